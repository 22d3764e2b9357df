"""Reading decoded JSON: one input out of a handler's arguments, and
validation errors that name the field by its path (and, for a misspelled
field name, the field meant)."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import pydantic_core
from pydantic import BaseModel, ValidationError

from oma.core.schema.errors import InvalidRunInputError, OMAError
from oma.core.schema.limits import check_payload_size


class UndecodableInput:
    """An argument a handler takes untyped (``*args``) whose payload the
    worker could not decode: not JSON, JSON nested deeper than the decoder
    reads, a lone UTF-16 surrogate escape such as ``"\\ud800"``. The
    product's payload converter (``oma.runtime.converter``) passes it on instead of
    failing the workflow task for good; ``single_input`` refuses it, with
    ``error`` when the converter knows a more precise one (a ciphertext no key
    can read, ``CiphertextInvalidError``; on a client, an encrypted payload
    without its key, ``CodecKeyMissingError``)."""

    def __init__(self, reason: str, error: OMAError | None = None) -> None:
        self.reason = reason
        self.error = error


def check_sendable(
    value: BaseModel, what: str, *, exclude_unset: bool = False, stored: bool = False
) -> None:
    """Raise ``InvalidRunInputError`` unless ``value`` becomes a payload a
    worker can decode: it must serialize to JSON (no lone UTF-16 surrogate)
    that JSON must not nest deeper than the decoder reads, and it must fit in
    Temporal's payload limit (``oma.core.schema.limits.MAX_PAYLOAD_BYTES``, the
    message naming the largest field; with a payload store, ``stored``, the
    stored budget: ``limits.payload_limit``). The client and the CLI check before
    they start anything; ``exclude_unset``: as sent without the fields left
    to their defaults."""
    try:
        data = value.model_dump_json(exclude_unset=exclude_unset).encode()
    except pydantic_core.PydanticSerializationError as err:
        problem = (
            "it holds a lone UTF-16 surrogate (such as \\ud800), which is not Unicode text"
            if "surrogates not allowed" in str(err)
            else str(err)
        )
        raise InvalidRunInputError(f"{what} cannot be sent as JSON: {problem}") from None
    try:
        pydantic_core.from_json(data)
    except ValueError as err:
        raise InvalidRunInputError(f"{what} is JSON a worker cannot read: {err}") from None
    check_payload_size(data, what, stored=stored)


def single_input(args: tuple[Any, ...], what: str) -> Any:
    """The one input in ``args`` (a workflow's, a signal's or an update's
    arguments, taken as ``*args``). Raises ``InvalidRunInputError`` for none
    or several: a client can send any number, and a handler that takes
    exactly one would fail the workflow task over and over instead."""
    if len(args) != 1:
        raise InvalidRunInputError(
            f"{what} takes exactly one input, a JSON object; got {len(args)}"
            + (" (pass it with --input or --input-file)" if not args else "")
        )
    if isinstance(args[0], UndecodableInput):
        if args[0].error is not None:
            raise args[0].error
        raise InvalidRunInputError(f"{what} is not JSON the worker can read: {args[0].reason}")
    return args[0]


class EntryError(ValueError):
    """A validator's ``ValueError`` about one entry below the model it
    validates: ``format_validation_error`` reports it at the model's path
    extended by ``loc`` (``("tools", 1)``: ``team.agents[0].tools[1]``)."""

    def __init__(self, message: str, loc: Sequence[int | str]) -> None:
        super().__init__(message)
        self.loc = tuple(loc)


def format_validation_error(
    err: ValidationError, root: str = "", model: type[BaseModel] | None = None
) -> str:
    """One line per problem, each naming the field path, e.g.
    ``team.agents[1].backend.command: Field required``.

    With the ``model`` that was validated, a field name the model at that
    path does not have (pydantic's ``extra_forbidden``) also gets the
    nearest one it has (``difflib``), e.g. ``options.max_concurency: Extra
    inputs are not permitted (did you mean 'max_concurrency'?)``."""
    lines = []
    for e in err.errors():
        path = root
        raised = (e.get("ctx") or {}).get("error")
        for part in (*e["loc"], *(raised.loc if isinstance(raised, EntryError) else ())):
            if isinstance(part, int):
                path += f"[{part}]"
            elif part in ("process", "acp", "function-after[_check_kind()]"):
                # discriminated-union and validator tags pydantic puts in the path
                continue
            else:
                path += f".{part}" if path else str(part)
        message = e["msg"].removeprefix("Value error, ")
        if model is not None and e["type"] == "extra_forbidden" and e["loc"]:
            *parent, name = e["loc"]
            meant = did_you_mean(str(name), field_names_at(model, parent))
            if meant:
                message += f" (did you mean {meant!r}?)"
        lines.append(f"{path or '(input)'}: {message}")
    return "; ".join(lines)


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (``difflib``, ratio 0.6 or more;
    case ignored), or ``None``."""
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1)
    return by_lower[close[0]] if close else None


def field_names_at(model: type[BaseModel], loc: Sequence[int | str]) -> set[str]:
    """The field names (and aliases) of the model(s) found at ``loc`` (a
    pydantic error location) inside ``model``: list indexes and dict keys
    are stepped through, a discriminated union's tag picks its member, other
    unions contribute every member."""
    types_here = _leaves([model])
    for part in loc:
        if isinstance(part, int):
            nxt = [a for t in types_here if _is_sequence(t) for a in get_args(t)[:1]]
        else:
            nxt = [f for t in types_here if (f := _field_type(t, part)) is not None]
            nxt += [get_args(t)[1] for t in types_here if _is_mapping(t) and get_args(t)]
            if not nxt:
                # a union tag (``process``) or a validator's (``function-after[...]``)
                tagged = [t for t in types_here if _has_tag(t, part)]
                nxt = tagged or types_here
        types_here = _leaves(nxt)
    names: set[str] = set()
    for t in types_here:
        if isinstance(t, type) and issubclass(t, BaseModel):
            for field_name, info in t.model_fields.items():
                names.add(info.alias or field_name)
    return names


def _leaves(candidates: Iterable[Any]) -> list[Any]:
    """``candidates`` with ``Annotated`` unwrapped and unions flattened."""
    out: list[Any] = []
    for t in candidates:
        origin = get_origin(t)
        if origin is Annotated:
            out += _leaves(get_args(t)[:1])
        elif origin is Union or origin is types.UnionType:
            out += _leaves(get_args(t))
        else:
            out.append(t)
    return out


def _field_type(t: Any, name: str) -> Any:
    if not (isinstance(t, type) and issubclass(t, BaseModel)):
        return None
    for field_name, info in t.model_fields.items():
        if name in (field_name, info.alias):
            return info.annotation
    return None


def _has_tag(t: Any, tag: str) -> bool:
    """Whether the model ``t`` has a ``Literal`` field allowing ``tag`` (a
    discriminator such as ``kind: Literal["process"]``)."""
    if not (isinstance(t, type) and issubclass(t, BaseModel)):
        return False
    return any(
        get_origin(info.annotation) is Literal and tag in get_args(info.annotation)
        for info in t.model_fields.values()
    )


def _is_sequence(t: Any) -> bool:
    origin = get_origin(t)
    return isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str


def _is_mapping(t: Any) -> bool:
    origin = get_origin(t)
    return isinstance(origin, type) and issubclass(origin, Mapping)


M = TypeVar("M", bound=BaseModel)


def parse_run_json(model: type[M], raw: Any, what: str) -> M:
    """``raw`` (decoded JSON) validated as ``model``. Raises
    ``InvalidRunInputError`` ``invalid <what>: ...`` naming every bad field by
    its path (``format_validation_error``)."""
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise InvalidRunInputError(
            f"invalid {what}: {format_validation_error(err, model=model)}"
        ) from None
