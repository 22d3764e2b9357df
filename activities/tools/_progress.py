"""Progress notes while a tool runs, and file work off the event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from oma.activities._heartbeat import every
from oma.activities.tools.tool import ToolContext, ToolError

HEARTBEAT_INTERVAL_S = 0.25
"""Seconds between two progress notes to ``ToolContext.heartbeat``."""

T = TypeVar("T")


@contextmanager
def reporting(ctx: ToolContext, note: Callable[[], str]) -> Iterator[None]:
    """Call ``ctx.heartbeat(note())`` every ``HEARTBEAT_INTERVAL_S`` seconds
    while the block runs (first after one interval: a quick call reports
    nothing), always from the event loop's thread."""
    heartbeat = ctx.heartbeat
    if heartbeat is None:
        yield
        return
    with every(HEARTBEAT_INTERVAL_S, lambda: heartbeat(note()), now=False):
        yield


class Work:
    """What a function running in a thread shares with the event loop: a
    progress ``note`` it updates, and a stop flag it checks."""

    def __init__(self, note: str) -> None:
        self.note = note
        self._stop = threading.Event()

    def check(self) -> None:
        """Raise ``ToolError`` once the call was cancelled: the thread stops
        walking files nobody will read about."""
        if self._stop.is_set():
            raise ToolError("cancelled")

    def stop(self) -> None:
        self._stop.set()


async def in_thread(ctx: ToolContext, note: str, fn: Callable[[Work], T]) -> T:
    """``fn(work)`` in a worker thread, so that reading or walking a large
    tree does not block the event loop (and the activity's heartbeats);
    ``work.note`` is reported through ``ctx.heartbeat`` meanwhile.

    On cancellation the thread is told to stop (``Work.check``) and
    ``CancelledError`` propagates at once; a write already under way finishes.
    """
    work = Work(note)
    with reporting(ctx, lambda: work.note):
        try:
            return await asyncio.to_thread(fn, work)
        except asyncio.CancelledError:
            work.stop()
            raise
