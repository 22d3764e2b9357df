"""Telling when an async custom tool blocks the event loop.

An ``async def`` tool that calls ``time.sleep`` or a synchronous HTTP client
holds the worker's event loop for as long as the call takes: no heartbeat goes
out, no cancel comes in, and every other run on the worker stops with it.
``watch_steps`` runs such a coroutine one step at a time, as ``await`` would,
and times each step (from being resumed to its next ``await`` that really
waits); a step longer than the limit is the tool's fault, whoever else was
waiting.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Coroutine, Generator
from typing import Any


class BlockedLoopError(Exception):
    """A coroutine ran one step longer than the limit: it blocked the event
    loop for ``blocked_s`` seconds. ``finished``: the step was its last (it
    returned ``result``); otherwise it was closed at its next ``await``."""

    def __init__(self, blocked_s: float, finished: bool, result: Any = None) -> None:
        super().__init__(f"blocked the event loop for {blocked_s:.1f} s")
        self.blocked_s = blocked_s
        self.finished = finished
        self.result = result


async def watch_steps(coro: Coroutine[Any, Any, Any], limit_s: float) -> Any:
    """``await coro``, raising ``BlockedLoopError`` once one of its steps has
    run longer than ``limit_s`` seconds (the coroutine is then closed, so its
    ``finally`` blocks run). Cancellation and exceptions pass through as with
    ``await``."""
    return await _Stepped(coro, limit_s)


class _Stepped:
    def __init__(self, coro: Coroutine[Any, Any, Any], limit_s: float) -> None:
        self._coro = coro
        self._limit_s = limit_s

    def __await__(self) -> Generator[Any, Any, Any]:
        # What ``yield from coro`` does, with a clock around each step.
        coro = self._coro
        value: Any = None
        error: BaseException | None = None
        while True:
            started = time.monotonic()
            try:
                waiting_on = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                self._check(time.monotonic() - started, finished=True, result=done.value)
                return done.value
            self._check(time.monotonic() - started, finished=False)
            try:
                value, error = (yield waiting_on), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as err:  # a cancellation, thrown in by the task
                value, error = None, err

    def _check(self, step_s: float, *, finished: bool, result: Any = None) -> None:
        if step_s <= self._limit_s:
            return
        if not finished:
            with contextlib.suppress(RuntimeError):  # it awaited again instead of closing
                self._coro.close()
        raise BlockedLoopError(step_s, finished, result)
