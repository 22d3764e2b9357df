"""Reading decoded JSON: one input out of a handler's arguments, and
validation errors that name the field by its path."""

from __future__ import annotations

from typing import Any

import pydantic_core
from pydantic import BaseModel, ValidationError

from oma.core.errors import InvalidRunInputError, OMAError
from oma.core.limits import check_payload_size


class UndecodableInput:
    """An argument a handler takes untyped (``*args``) whose payload the
    worker could not decode: not JSON, JSON nested deeper than the decoder
    reads, a lone UTF-16 surrogate escape such as ``"\\ud800"``. The
    product's payload converter (``oma.plugin``) passes it on instead of
    failing the workflow task for good; ``single_input`` refuses it, with
    ``error`` when the converter knows a more precise one (an encrypted
    payload without its key, ``CodecKeyMissingError``; a plaintext payload
    where encryption is required, ``PayloadNotEncryptedError``)."""

    def __init__(self, reason: str, error: OMAError | None = None) -> None:
        self.reason = reason
        self.error = error


def check_sendable(value: BaseModel, what: str) -> None:
    """Raise ``InvalidRunInputError`` unless ``value`` becomes a payload a
    worker can decode: it must serialize to JSON (no lone UTF-16 surrogate)
    that JSON must not nest deeper than the decoder reads, and it must fit in
    Temporal's payload limit (``oma.core.limits.MAX_PAYLOAD_BYTES``, the
    message naming the largest field). The client and the CLI check before
    they start anything."""
    try:
        data = pydantic_core.to_json(value)
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
    check_payload_size(data, what)


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


def format_validation_error(err: ValidationError, root: str = "") -> str:
    """One line per problem, each naming the field path, e.g.
    ``team.agents[1].backend.command: Field required``."""
    lines = []
    for e in err.errors():
        path = root
        for part in e["loc"]:
            if isinstance(part, int):
                path += f"[{part}]"
            elif part in ("process", "acp", "function-after[_check_kind()]"):
                # discriminated-union and validator tags pydantic puts in the path
                continue
            else:
                path += f".{part}" if path else str(part)
        message = e["msg"].removeprefix("Value error, ")
        lines.append(f"{path or '(input)'}: {message}")
    return "; ".join(lines)
