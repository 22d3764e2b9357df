"""What a built-in tool is: its context, its output, and the tool itself.

A tool's result is what the model reads in a ``tool_result`` block (the
Anthropic Messages API): text, flagged ``is_error`` when the call went wrong.
A mistake of the model's (a path outside the sandbox, a file that does not
exist, an ``old_string`` that is not there) is such a result, never an
exception, so the model can correct itself on its next turn.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, model_validator

from oma.activities.tools._schema import tool_input_schema

DEFAULT_MAX_OUTPUT_CHARS = 30_000
"""The longest tool output the model reads by default (characters)."""

InputT = TypeVar("InputT", bound=BaseModel)

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolContext:
    """Where and how one tool call runs.

    ``cwd`` is the agent's working directory: bash runs there, and it is the
    root of the file tools' sandbox (``resolve_in_sandbox``). It must be an
    absolute path. ``max_output_chars`` caps the text the model reads (at
    least 1). ``heartbeat``, when given, is called with a short progress note
    (bash's latest stdout line, how many files grep has searched) every
    ``HEARTBEAT_INTERVAL_S`` seconds while a tool runs, never from another
    thread. ``env`` adds variables to bash's minimal environment (see
    ``oma.activities.tools.bash``).

    Raises ``ValueError`` for a relative ``cwd`` or a cap below 1.
    """

    cwd: Path
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    heartbeat: Callable[[str], None] | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.cwd.is_absolute():
            raise ValueError(f"ToolContext.cwd must be an absolute path, got {str(self.cwd)!r}")
        if self.max_output_chars < 1:
            raise ValueError(f"max_output_chars must be at least 1, got {self.max_output_chars}")


class ToolOutput(BaseModel):
    """One tool call's result, as the model reads it (a ``tool_result``)."""

    content: str = Field(description="The output, or what went wrong (never empty for an error).")
    is_error: bool = Field(default=False, description="The call failed; content says why.")
    truncated: bool = Field(
        default=False, description="Part of the output was left out to respect the cap."
    )

    @model_validator(mode="after")
    def _error_says_why(self) -> ToolOutput:
        if self.is_error and not self.content.strip():
            raise ValueError("an error result must say what went wrong")
        return self


class ToolError(Exception):
    """A mistake the model can correct (a bad path, a missing file, an
    ``old_string`` not found). Raised inside a tool, it becomes an
    ``is_error`` result carrying the message; it never leaves ``run``."""


@dataclass(frozen=True)
class BuiltinTool(Generic[InputT]):
    """A built-in tool: its name and description as the model sees them,
    its input model, and the coroutine that runs it."""

    name: str
    description: str
    input_model: type[InputT]
    execute: Callable[[InputT, ToolContext], Awaitable[ToolOutput]] = field(repr=False)

    def input_schema(self) -> dict[str, Any]:
        """The input's JSON schema as the Anthropic Messages API's
        ``tools[].input_schema`` takes it: ``{"type": "object", "properties":
        ..., "required": [...], "additionalProperties": false}``, without
        titles or ``$defs``."""
        return tool_input_schema(self.input_model)

    async def run(self, args: InputT, ctx: ToolContext) -> ToolOutput:
        """Run the tool on validated ``args``.

        A ``ToolError`` or an ``OSError`` (permission denied, disk full)
        becomes an ``is_error`` result; the content is cut to
        ``ctx.max_output_chars`` (``cap_output``). ``asyncio.CancelledError``
        propagates, after the tool has cleaned up (bash kills its process
        group first). Any other exception is a bug of the tool's: it is logged
        with its traceback and becomes an ``is_error`` result too, because a
        failed activity would be tried again, to the same end.
        """
        try:
            output = await self.execute(args, ctx)
        except ToolError as err:
            output = ToolOutput(content=str(err), is_error=True)
        except OSError as err:
            output = ToolOutput(
                content=f"{self.name} failed: {describe_os_error(err)}", is_error=True
            )
        except Exception as err:
            _log.exception("built-in tool %s failed unexpectedly", self.name)
            output = ToolOutput(
                content=f"{self.name} failed unexpectedly ({type(err).__name__}: {err}); this "
                "is a bug in OMA, the worker's log has the traceback",
                is_error=True,
            )
        return cap_output(output, ctx.max_output_chars)


def cap_output(output: ToolOutput, max_chars: int) -> ToolOutput:
    """``output`` with its content cut to its first ``max_chars`` characters
    and a note saying how many were left out (``truncated=True``); unchanged
    when it fits. The note comes on top of the ``max_chars``."""
    text = output.content
    if len(text) <= max_chars:
        return output
    left_out = len(text) - max_chars
    note = f"\n[output truncated: {left_out} of {len(text)} characters left out]"
    return ToolOutput(content=text[:max_chars] + note, is_error=output.is_error, truncated=True)


def describe_os_error(err: OSError) -> str:
    """``"Permission denied: 'notes.txt'"``, the message of an ``OSError``
    without its errno number."""
    reason = err.strerror or str(err)
    return f"{reason}: {err.filename!r}" if err.filename else reason
