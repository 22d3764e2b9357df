"""Heartbeating while an activity waits on something else."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from temporalio import activity


@contextmanager
def every(interval_s: float, fn: Callable[[], None], *, now: bool) -> Iterator[None]:
    """Call ``fn()`` every ``interval_s`` seconds while the block runs, and
    once on entry too when ``now``.

    A re-arming timer on the event loop rather than a task: no task to start,
    cancel and await on every activity (about 0.05 ms of a 1 ms ACP turn,
    ``bench/backends.py``), and ``fn`` always runs on the loop's thread.
    """
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle

    def beat() -> None:
        nonlocal timer
        timer = loop.call_later(interval_s, beat)
        fn()

    if now:
        fn()
    timer = loop.call_later(interval_s, beat)
    try:
        yield
    finally:
        timer.cancel()


@contextmanager
def heartbeating(details: Callable[[], Any], interval_s: float) -> Iterator[None]:
    """Heartbeat with ``details()`` now and every ``interval_s`` seconds while
    the block runs.

    Temporal delivers activity cancellation in the answer to a heartbeat, so
    this bounds how late a cancel arrives. Outside an activity (the Python
    ``Agent`` API calls activities as plain functions) it does nothing.
    """
    if not activity.in_activity():
        yield
        return
    with every(interval_s, lambda: activity.heartbeat(details()), now=True):
        yield
