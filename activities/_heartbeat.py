"""Heartbeating while an activity waits on something else."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from temporalio import activity


@contextmanager
def heartbeating(details: Callable[[], Any], interval_s: float) -> Iterator[None]:
    """Heartbeat with ``details()`` now and every ``interval_s`` seconds while
    the block runs.

    Temporal delivers activity cancellation in the answer to a heartbeat, so
    this bounds how late a cancel arrives. A re-arming timer rather than a
    task: no task to start, cancel and await on every activity (about 0.05 ms
    of a 1 ms ACP turn, ``bench/backends.py``). Outside an activity (the
    Python ``Agent`` API calls activities as plain functions) it does nothing.
    """
    if not activity.in_activity():
        yield
        return
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None

    def beat() -> None:
        nonlocal timer
        activity.heartbeat(details())
        timer = loop.call_later(interval_s, beat)

    beat()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
