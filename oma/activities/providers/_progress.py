"""A model turn's heartbeats, carrying the text the model has streamed so far."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from oma.activities._heartbeat import TextProgress, heartbeating
from oma.core.schema.agent_events import TextDelta, ToolCallEvent

OnEvent = Callable[[TextDelta | ToolCallEvent], None]
"""A progress callback: receives each event of a turn while it streams."""


@contextmanager
def streamed_text_heartbeats(on_event: OnEvent | None, interval_s: float) -> Iterator[OnEvent]:
    """Heartbeat the turn's activity at least every ``interval_s`` seconds,
    and soon after each ``TextDelta`` (``Heartbeat.changed``), with
    ``{"output_chars": int, "last_text": str}`` (``TextProgress.details``: the
    last 200 characters, redacted). Yields the callback to stream into: it
    counts the text, then hands every event on to ``on_event``.

    On a timer as well as per delta: a cancel must also reach a turn whose
    model is silent (thinking before its first token, a slow stream, a local
    model loading). Outside an activity nothing heartbeats.
    """
    text = TextProgress()

    def tee(event: TextDelta | ToolCallEvent) -> None:
        if isinstance(event, TextDelta):
            text.add(event.text)
        if on_event is not None:
            on_event(event)

    with heartbeating(text.details, interval_s) as text.heartbeat:
        yield tee
