"""A ``before_run`` hook (docs/structured-input.md): runs on the worker before each agent run."""

from __future__ import annotations

from typing import Any


def be_brief(ctx: Any) -> dict[str, str]:
    """The task's prompt, asking for a short answer."""
    return {"prompt": ctx.prompt + "\n\nAnswer in one sentence."}
