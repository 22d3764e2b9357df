"""Heartbeating while an activity waits on something else, and the progress
text its heartbeats carry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from temporalio import activity

from oma.core.rules.redact import redact

PROGRESS_HEARTBEAT_GAP_S = 0.2
"""The least seconds between two heartbeats sent because the progress
changed (``Heartbeat.changed``): the worker's heartbeat throttle
(``oma.worker.plugin.HEARTBEAT_THROTTLE``), which would hold back a faster one
anyway. New text thus reaches the server within about this long, and
``oma run``'s live view shows it (``oma.cli.live``)."""

LAST_TEXT_CHARS = 200
"""How much of the latest text a heartbeat carries (``last_text``)."""


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


class Heartbeat:
    """An activity's heartbeats: ``details()`` at least every ``interval_s``
    seconds, and soon after ``changed()`` (at most every ``min_gap_s``).

    One re-arming timer on the event loop: the idle beat, or the beat a
    change is waiting for. Call it from the loop's thread only.
    """

    def __init__(
        self,
        details: Callable[[], Any],
        interval_s: float,
        min_gap_s: float,
        send: Callable[[Any], None],
    ) -> None:
        self._details = details
        self._interval_s = interval_s
        self._min_gap_s = min_gap_s
        self._send = send
        self._loop = asyncio.get_running_loop()
        self._last = float("-inf")
        self._timer: asyncio.TimerHandle | None = None

    def changed(self) -> None:
        """The progress changed: heartbeat now, or once ``min_gap_s`` has
        passed since the last heartbeat."""
        now = self._loop.time()
        due = self._last + self._min_gap_s
        if now >= due:
            self.beat()
        elif self._timer is None or self._timer.when() > due:
            self._arm(due - now)

    def beat(self) -> None:
        self._last = self._loop.time()
        self._arm(self._interval_s)
        self._send(self._details())

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _arm(self, delay_s: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(delay_s, self.beat)


class _NoHeartbeat(Heartbeat):
    def __init__(self) -> None:
        pass

    def changed(self) -> None:
        pass


@contextmanager
def heartbeating(
    details: Callable[[], Any],
    interval_s: float,
    min_gap_s: float = PROGRESS_HEARTBEAT_GAP_S,
) -> Iterator[Heartbeat]:
    """Heartbeat with ``details()`` now, then whenever ``interval_s`` seconds
    have passed without one, and soon after each ``Heartbeat.changed()`` of
    the ``Heartbeat`` it yields (at most every ``min_gap_s`` seconds).

    Temporal delivers activity cancellation in the answer to a heartbeat, so
    the interval bounds how late a cancel arrives; ``changed`` lets progress
    (a process's last line, an agent's or a model's latest text) reach the
    server while it is new, which is what ``oma run`` shows. Outside an
    activity (the Python ``Agent`` API calls activities as plain functions)
    it does nothing.
    """
    if not activity.in_activity():
        yield _NoHeartbeat()
        return
    heartbeat = Heartbeat(details, interval_s, min_gap_s, activity.heartbeat)
    heartbeat.beat()
    try:
        yield heartbeat
    finally:
        heartbeat.stop()


class TextProgress:
    """The text an agent or a model has produced so far in one turn: its
    length and its latest part, for heartbeat details."""

    def __init__(self) -> None:
        self.output_chars = 0
        self.tail = ""
        self.heartbeat: Heartbeat | None = None

    def add(self, text: str) -> None:
        """Count ``text`` and keep the latest characters; heartbeat soon when
        ``heartbeat`` is set."""
        if not text:
            return
        self.output_chars += len(text)
        self.tail = (self.tail + text)[-2 * LAST_TEXT_CHARS :]
        if self.heartbeat is not None:
            self.heartbeat.changed()

    def details(self) -> dict[str, Any]:
        """``{"output_chars": int, "last_text": str}``: the characters so far
        and the last ``LAST_TEXT_CHARS`` of them, redacted (``oma.core.rules.redact``;
        the tail is redacted before it is cut, so a secret split by the cut
        is still caught)."""
        last_text = redact(self.tail)[-LAST_TEXT_CHARS:]
        return {"output_chars": self.output_chars, "last_text": last_text}
