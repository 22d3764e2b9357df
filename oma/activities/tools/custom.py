"""Custom tools: Python functions an agent names by import path.

``package.module:function`` (``AgentConfig.tools``) is loaded on the worker
that runs the call. Its input schema comes from its signature: one parameter
annotated with a pydantic model is that model; otherwise every parameter is
a field, typed by its annotation (``Any`` without one) and required unless it
has a default. Its docstring is the description the model reads. A sync
function runs in a thread of its own (so heartbeats go on); an async one is
awaited, and fails once it blocks the event loop for more than
``BLOCKING_STEP_LIMIT_S``. Either is given up after ``CUSTOM_TOOL_TIMEOUT_S``.
What it returns becomes the tool's text: a string as it is, a pydantic model
or anything else as JSON.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from oma.activities.tools._blocking import BlockedLoopError, watch_steps
from oma.activities.tools._progress import run_in_thread
from oma.core.schema.before_run import load_hook
from oma.core.schema.errors import InvalidHookError
from oma.core.schema.tools import CUSTOM_TOOL_PATH, TRAITS, ToolTraits
from oma.core.schema.validation import format_validation_error

CUSTOM_TOOL_TIMEOUT_S = 600.0
"""Seconds a custom tool may run; then the call is an error result (a sync
tool's thread is left to finish alone, an async tool is cancelled). Below the
``tool_call`` activity's start-to-close timeout, which would make Temporal run
the tool again."""

BLOCKING_STEP_LIMIT_S = 2.0
"""The longest an async custom tool may hold the event loop between two
``await``s (seconds); one that holds it longer fails (``BlockedLoopError``)."""


@dataclass(frozen=True)
class CustomTool:
    """A loaded custom tool."""

    name: str
    description: str
    input_model: type[BaseModel]
    function: Callable[..., Any]
    takes_model: bool
    traits: ToolTraits = field(default_factory=ToolTraits)

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the input, as ``tools[].input_schema`` wants it."""
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        return schema

    async def call(self, raw_input: dict[str, Any], raise_errors: bool = False) -> tuple[str, bool]:
        """Run the tool on ``raw_input``: ``(text, is_error)``. Invalid input,
        what the function raises, a value JSON cannot hold, a call past
        ``CUSTOM_TOOL_TIMEOUT_S`` and an async function that blocks the event
        loop are errors the model reads, never raised (a cancellation
        excepted) — unless ``raise_errors``: then what the function raises is
        raised, for Temporal to try the call again."""
        try:
            args = self.input_model.model_validate(raw_input)
        except ValidationError as err:
            return f"invalid input for {self.name}: {format_validation_error(err)}", True
        call = (
            functools.partial(self.function, args)
            if self.takes_model
            else functools.partial(self.function, **dict(args))
        )
        timeout_s = CUSTOM_TOOL_TIMEOUT_S
        try:
            if inspect.iscoroutinefunction(self.function):
                running = watch_steps(call(), BLOCKING_STEP_LIMIT_S)
            else:
                running = run_in_thread(call, f"custom tool {self.name}")
            value = await asyncio.wait_for(running, timeout_s)
        except TimeoutError:
            return f"{self.name} did not finish within {timeout_s:g} s and was given up", True
        except BlockedLoopError as err:
            return self._blocked(err), True
        except (Exception, SystemExit) as err:  # SystemExit would stop the worker's event loop
            if raise_errors and isinstance(err, Exception):
                raise
            return _describe(err), True
        try:
            return _as_text(value), False
        except Exception as err:
            return (
                f"{self.name} returned a value that JSON cannot hold ({_describe(err)}); "
                "return a string, a pydantic model, or lists, dicts with string keys, "
                "numbers and strings",
                True,
            )

    def _blocked(self, err: BlockedLoopError) -> str:
        message = (
            f"{self.name} blocked the worker's event loop for {err.blocked_s:.1f} s at once "
            "(a blocking call inside an async function, such as time.sleep or a synchronous "
            "HTTP client), which stalls every run on the worker; make it a plain def (it then "
            "runs in a thread) or await non-blocking calls."
        )
        if not err.finished:
            return f"{message} It was stopped at its next await."
        try:
            result = _as_text(err.result)
        except Exception:
            result = "(a value JSON cannot hold)"
        return f"{message} It ran to the end; its result: {result}"


@functools.cache
def load_custom_tool(path: str) -> CustomTool:
    """The tool at ``path`` (``package.module:function``), loaded once per worker.

    Raises ``InvalidHookError`` when it cannot be imported or called, or its
    signature cannot be a tool's input (``*args``, ``**kwargs``).
    """
    function = load_hook(path)
    match = CUSTOM_TOOL_PATH.match(path)
    assert match is not None  # load_hook checked the shape
    name = match.group(1)
    params = list(inspect.signature(function).parameters.values())
    hints = _hints(function)
    model = _single_model(params, hints)
    if model is None:
        model = _model_of(name, path, params, hints)
    description = inspect.getdoc(function) or f"Calls {path}."
    return CustomTool(
        name,
        description,
        model,
        function,
        takes_model=_is_model(params, hints),
        traits=getattr(function, TRAITS, ToolTraits()),
    )


def _hints(function: Callable[..., Any]) -> dict[str, Any]:
    try:
        return dict(inspect.get_annotations(function, eval_str=True))
    except Exception:  # an annotation that does not evaluate: treat as untyped
        return {}


def _is_model(params: list[inspect.Parameter], hints: dict[str, Any]) -> bool:
    if len(params) != 1:
        return False
    hint = hints.get(params[0].name)
    return isinstance(hint, type) and issubclass(hint, BaseModel)


def _single_model(params: list[inspect.Parameter], hints: dict[str, Any]) -> type[BaseModel] | None:
    if not _is_model(params, hints):
        return None
    model: type[BaseModel] = hints[params[0].name]
    return model


def _model_of(
    name: str, path: str, params: list[inspect.Parameter], hints: dict[str, Any]
) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for param in params:
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise InvalidHookError(
                f"custom tool {path!r}: *args and **kwargs cannot be a tool's input; name "
                "each parameter"
            )
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), default)
    model: type[BaseModel] = create_model(
        f"{name}_input", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


def _describe(err: BaseException) -> str:
    try:
        text = str(err)
    except Exception:  # a __str__ that raises
        text = ""
    return f"{type(err).__name__}: {text}".strip()


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str, ensure_ascii=False)
