"""The ``before_run`` hook: a last look at, and rewrite of, a run's input.

Its contract is the reference's "beforeRun semantics"
(docs/structured-input.md): the hook sees both views of the
effective input — the complete ``messages`` and the ``prompt`` (the text of the
latest user message) — and may change either. A message change replaces the
whole input; a prompt change then rewrites the text of the latest user message.

Everything here is pure Python without I/O, so a workflow may apply a hook
(the hook itself must then be deterministic too).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Awaitable, Callable
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

from oma.core.schema.errors import InvalidHookError, InvalidMessageError
from oma.core.schema.message_guard import validate_messages
from oma.core.schema.messages import ContentBlock, LLMMessage, TextBlock


class BeforeRunContext(BaseModel):
    """What a ``before_run`` hook receives (always a copy of its own)."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(description="The name of the agent about to run.")
    messages: list[LLMMessage] = Field(
        description="The complete input conversation; its last message is the user turn "
        "the run answers."
    )
    prompt: str = Field(
        description="The text blocks of the latest user message, concatenated; '' for an "
        "image-only turn."
    )


BeforeRunResult = BeforeRunContext | dict[str, Any] | None
"""``None`` (no change), a ``BeforeRunContext``, or a dict with ``messages`` and/or
``prompt`` (an ``agent`` key is allowed and ignored)."""

BeforeRunHook = Callable[[BeforeRunContext], BeforeRunResult | Awaitable[BeforeRunResult]]
"""A sync or async callable taking a ``BeforeRunContext``."""


async def apply_before_run(
    hook: BeforeRunHook, ctx: BeforeRunContext, *, external: bool
) -> list[LLMMessage]:
    """Call ``hook`` with a deep copy of ``ctx`` and return the messages the run uses.

    In the reference's order:

    1. Returned ``messages`` replace the complete input. They are checked and
       copied by ``validate_messages`` (paths rooted at ``before_run.messages``),
       so they too must end with a user message.
    2. If the returned ``prompt`` differs from ``ctx.prompt``, the text blocks of
       the latest user message (of the new messages, if replaced) become one
       text block holding it. Non-text blocks keep their relative order; the
       new text block takes the place of the first text block, or comes first
       in an image-only message. Comparing with ``ctx.prompt`` means a hook that
       returns ``{"messages": new, "prompt": ctx.prompt}`` keeps ``new``'s own
       text.

    Returning ``None`` means no change — edits the hook made to its copy in
    place and did not return are ignored. ``agent`` cannot be changed. For an
    ``external`` agent (``process`` or ``acp`` backend, a text transport) a
    change of ``messages`` raises ``InvalidMessageError``; a prompt change is
    allowed. A returned value that is not one of the shapes above raises
    ``InvalidMessageError``; what the hook raises propagates unchanged.

    The returned list shares nothing with ``ctx`` or with what the hook
    returned, so nothing the hook does reaches caller-owned data.
    """
    result = hook(ctx.model_copy(deep=True))
    if inspect.isawaitable(result):
        result = await result
    messages, prompt = _answer(result)
    if messages is None:
        new = [m.model_copy(deep=True) for m in ctx.messages]
    else:
        new = validate_messages(messages, "before_run.messages")
        if external and new != ctx.messages:
            raise InvalidMessageError(
                f"before_run.messages: agent {ctx.agent!r} is external (a text prompt "
                "transport); an external agent's before_run may change prompt, not messages"
            )
    if prompt is None or prompt == ctx.prompt:
        return new
    return _with_prompt(new, prompt)


@functools.cache
def load_hook(path: str) -> BeforeRunHook:
    """The callable at ``path``, written ``package.module:function``; imported once.

    Raises ``InvalidHookError`` when the path is malformed, the module is not
    installed on this worker or fails to import, it has no such attribute, or
    the attribute is not callable. Failures are not cached.
    """
    module_name, sep, attr = path.partition(":")
    module_ok = all(part.isidentifier() for part in module_name.split("."))
    if not sep or not module_ok or not attr.isidentifier():
        raise InvalidHookError(f"hook {path!r} should look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is not None and (module_name + ".").startswith(err.name + "."):
            raise InvalidHookError(f"hook {path!r}: {_not_found(err.name)}") from None
        raise InvalidHookError(f"hook {path!r}: importing {module_name!r} failed: {err}") from err
    except Exception as err:  # the module's own code failed: say so, keep the cause
        raise InvalidHookError(
            f"hook {path!r}: importing {module_name!r} failed: {type(err).__name__}: {err}"
        ) from err
    if not hasattr(module, attr):
        raise InvalidHookError(f"hook {path!r}: module {module_name!r} has no attribute {attr!r}")
    hook = getattr(module, attr)
    if not callable(hook):
        raise InvalidHookError(
            f"hook {path!r}: {attr!r} is a {type(hook).__name__}, not a callable"
        )
    return cast(BeforeRunHook, hook)


def _not_found(name: str) -> str:
    """Why ``name`` did not import, and, for a top-level module, where the
    worker looked and what to do."""
    parent, dot, _ = name.rpartition(".")
    if dot:
        where = getattr(sys.modules.get(parent), "__path__", None)
        found = f" (package {parent!r} is in {', '.join(where)})" if where else ""
        return f"no module named {name!r} on this worker{found}"
    return (
        f"no module named {name!r} on this worker, which looked in {_searched()}; start "
        f"the worker (`oma run`, `oma dev`, `oma worker`) in the directory that holds "
        f"{name!r}, or name that directory with --path DIR or OMA_PATH (or install it "
        "as a package)"
    )


def _searched() -> str:
    """Where an import looks for a user's module, as a message says it: the
    directories of ``sys.path`` outside the Python installation (its standard
    library and site-packages, summed up as the installed packages)."""
    installation = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    own = [
        entry or "the working directory"
        for entry in sys.path
        if not any(entry.startswith(prefix) for prefix in installation if entry)
    ]
    return ", ".join([*own, "the installed packages"])


def _answer(result: object) -> tuple[object | None, str | None]:
    """The ``messages`` and ``prompt`` a hook returned (``None``: unchanged)."""
    if result is None:
        return None, None
    if isinstance(result, BeforeRunContext):
        return result.messages, result.prompt
    if not isinstance(result, dict):
        raise InvalidMessageError(
            "before_run: a hook returns None, a BeforeRunContext or a dict with messages "
            f"and/or prompt, got {type(result).__name__}"
        )
    unknown = next((k for k in result if k not in ("messages", "prompt", "agent")), None)
    if unknown is not None:
        raise InvalidMessageError(
            f"before_run: unknown key {unknown!r}; a hook returns messages and/or prompt"
        )
    prompt = result.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise InvalidMessageError(
            f"before_run.prompt: should be a string, got {type(prompt).__name__}"
        )
    return result.get("messages"), prompt


def _with_prompt(messages: list[LLMMessage], prompt: str) -> list[LLMMessage]:
    """``messages`` with the latest user message's text blocks replaced by ``prompt``."""
    latest = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    if latest is None:
        raise InvalidMessageError("before_run.prompt: there is no user message to hold it")
    content: list[ContentBlock] = []
    placed = False
    for block in messages[latest].content:
        if not isinstance(block, TextBlock):
            content.append(block)
        elif not placed:
            content.append(TextBlock(text=prompt))
            placed = True
    if not placed:
        content.insert(0, TextBlock(text=prompt))
    rewritten = LLMMessage(role="user", content=content)
    return [*messages[:latest], rewritten, *messages[latest + 1 :]]
