"""Reading decoded JSON: one input out of a handler's arguments, and
validation errors that name the field by its path."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from oma.core.errors import InvalidRunInputError


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
