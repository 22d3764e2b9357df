"""Progress notes while a tool runs, and work off the event loop: each call
in a thread of its own, waited for up to a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from oma.activities._heartbeat import every
from oma.activities.tools.tool import ToolContext, ToolError

HEARTBEAT_INTERVAL_S = 0.25
"""Seconds between two progress notes to ``ToolContext.heartbeat``."""

THREAD_TOOL_TIMEOUT_S = 120.0
"""The deadline of a file tool's work (``file_read``, ``file_write``,
``file_edit``, ``glob``, ``grep`` in RE2), in seconds: past it the call is an
error result and its thread is told to stop."""

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
    """``fn(work)`` in a thread of its own (``run_in_thread``), so that
    reading or walking a large tree does not block the event loop (and the
    activity's heartbeats); ``work.note`` is reported through
    ``ctx.heartbeat`` meanwhile.

    Raises ``ToolError`` when ``fn`` has not returned within
    ``THREAD_TOOL_TIMEOUT_S`` seconds. On that deadline or a cancellation the
    thread is told to stop (``Work.check``) and is no longer waited for;
    ``CancelledError`` propagates at once. A write already under way finishes.
    """
    work = Work(note)
    timeout_s = THREAD_TOOL_TIMEOUT_S
    with reporting(ctx, lambda: work.note):
        try:
            return await asyncio.wait_for(
                run_in_thread(functools.partial(fn, work), note), timeout_s
            )
        except TimeoutError:
            raise ToolError(
                f"{note} did not finish within {timeout_s:g} s and was given up (a write it "
                "had begun may still complete)"
            ) from None
        finally:
            work.stop()


async def run_in_thread(fn: Callable[[], T], name: str) -> T:
    """``fn()`` in a new daemon thread, its result or its exception awaited.

    Not ``asyncio.to_thread``: the loop's default executor has a few threads
    (``min(32, cores + 4)``), and calls that never return (a blocking open, a
    custom tool's endless loop) would take them all, and with them every later
    call. Here a call that is no longer awaited (cancelled, or past a deadline)
    leaves its thread to run on alone; nothing waits for it, at shutdown
    either. ``fn`` runs in a copy of the caller's context (as with
    ``to_thread``); a ``SystemExit`` or ``KeyboardInterrupt`` it raises comes
    back as a ``RuntimeError``, so that it never stops the event loop.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def deliver(setter: Callable[[Any], None], value: object) -> None:
        def settle() -> None:
            if not future.done():
                setter(value)

        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle)

    def main() -> None:
        try:
            result = context.run(fn)
        except Exception as err:
            deliver(future.set_exception, err)
        except BaseException as err:
            deliver(future.set_exception, RuntimeError(f"{type(err).__name__}: {err}"))
        else:
            deliver(future.set_result, result)

    threading.Thread(target=main, name=f"oma {name}"[:64], daemon=True).start()
    return await future
