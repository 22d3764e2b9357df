"""Approval callbacks: the Python functions that answer approval requests
in this process, for the client (``OpenMultiAgent``'s ``on_plan_ready``,
``on_task_dispatch``, ``on_approval``) and the in-process agent
(``Agent``'s ``on_tool_call``) alike.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeAlias

from oma.core.schema.approvals import ApprovalRequest, DecisionValue

ApprovalAnswer: TypeAlias = Literal["approve", "reject", "suspend"] | bool
"""What an approval callback returns: ``approve`` (or ``True``), ``reject``
(or ``False``), or ``suspend``: leave the request open for another reviewer
(``oma approve``, ``temporal workflow update``, ``OpenMultiAgent.decide``)."""

ApprovalCallback: TypeAlias = Callable[
    [ApprovalRequest], ApprovalAnswer | Awaitable[ApprovalAnswer]
]
"""An approval callback: gets the open ``ApprovalRequest``, sync or async."""


async def call_approval_callback(callback: ApprovalCallback, request: ApprovalRequest) -> Any:
    """What ``callback`` answers for ``request``: an async callback is awaited,
    a plain one runs in a worker thread (it may block)."""
    if inspect.iscoroutinefunction(callback):
        answer = await callback(request)
    else:
        answer = await asyncio.to_thread(callback, request)
    if inspect.isawaitable(answer):  # e.g. a lambda or partial around an async function
        answer = await answer
    return answer


def answer_decision(answer: Any, name: str) -> DecisionValue | None:
    """The decision a callback's answer stands for; ``None`` for ``suspend``.
    Raises ``ValueError`` for anything else than an ``ApprovalAnswer``."""
    if answer is True or answer == "approve":
        return "approve"
    if answer is False or answer == "reject":
        return "reject"
    if answer == "suspend":
        return None
    raise ValueError(
        f"{name} returned {answer!r}; an approval callback returns 'approve', 'reject', "
        "'suspend', True or False"
    )
