"""Hooks and evaluators that test workers load by import path (tests.support.hooks:...)."""

from __future__ import annotations

from typing import Any

from oma.core.schema.before_run import BeforeRunContext


def shout(ctx: BeforeRunContext) -> dict[str, Any]:
    """A before_run hook: the prompt in capitals."""
    return {"prompt": ctx.prompt.upper()}


def replace_messages(ctx: BeforeRunContext) -> dict[str, Any]:
    """A before_run hook that replaces the whole input."""
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": "replaced"}]}]}


def output_length(sample: dict[str, Any]) -> dict[str, Any]:
    """An evaluator: the output's length as the score."""
    return {"score": float(len(sample["output"])), "label": "length"}


def index_like_a_dict(ctx: Any) -> dict[str, Any]:
    """A before_run hook written as a newcomer might: ``ctx["prompt"]``."""
    return {"prompt": ctx["prompt"] + "!"}
