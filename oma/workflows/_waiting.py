"""Waiting helpers of the workflows: the wake-up a dispatch loop waits on, a
step the run's stop cuts short, a delay a stop ends, and a deadline (a
Temporal timer)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from oma.workflows import _patches


class Wakeup:
    """What a run's dispatch loop waits on: ``set`` whenever something it
    waits for changed (a task settled, a decision, a closed request, a stop).
    Setting one that nothing waits on (an ``AgentRun``'s) costs nothing."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    async def wait(self) -> None:
        """Return at the next ``set`` (one before this call does not count)."""
        self._set = False
        await workflow.wait_condition(lambda: self._set)


async def unless_stopped(step: Coroutine[Any, Any, None], stopped: Callable[[], bool]) -> None:
    """Run ``step`` unless ``stopped()`` first: then it is cancelled, and what
    it raises on the way out (a child cancelled with it fails the step) is
    dropped, because the stop says how the run ends. A cancellation of the
    caller cancels it too; what the step raises otherwise propagates."""
    task = asyncio.create_task(step)
    try:
        await workflow.wait_condition(lambda: task.done() or stopped())
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, ApplicationError):
                await task
    # (runs that failed this way before the stop won keep replaying: patched)
    if not (stopped() and _patches.patched(_patches.STOP_WINS_OVER_A_STEP)):
        await task


def at_deadline(deadline: datetime, expire: Callable[[], None]) -> asyncio.Task[None]:
    """Call ``expire()`` at ``deadline`` (workflow time; at once when it has
    passed, e.g. in a run resumed after it)."""

    async def watch() -> None:
        await workflow.sleep(max((deadline - workflow.now()).total_seconds(), 0.001))
        expire()

    return asyncio.create_task(watch())


async def delay_unless_stopped(seconds: float, stopped: Callable[[], bool], summary: str) -> None:
    """Wait ``seconds`` (a timer with ``summary``), or until ``stopped()``
    (runs from before ``STOP_ENDS_RETRY_DELAY`` waited the whole delay)."""
    if _patches.patched(_patches.STOP_ENDS_RETRY_DELAY):
        with contextlib.suppress(asyncio.TimeoutError):
            await workflow.wait_condition(stopped, timeout=seconds, timeout_summary=summary)
    else:
        await workflow.sleep(seconds, summary=summary)


def reraise_cancel(err: ActivityError) -> None:
    """Raise ``asyncio.CancelledError`` when ``err`` is an activity the run's
    own Temporal cancellation cancelled (from ``_patches.CANCEL_IN_A_FIRST_READ``
    on): a read whose failure a run may shrug off must not swallow a cancel."""
    if isinstance(err.cause, CancelledError) and _patches.patched(_patches.CANCEL_IN_A_FIRST_READ):
        raise asyncio.CancelledError() from err
