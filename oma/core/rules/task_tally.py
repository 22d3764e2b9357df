"""``TaskTally``: how many tasks of a run ended, and how, kept as each one ends.

A running ``TeamRun`` shows how many of its tasks settled (its details line)
after every task that settles; counting its tasks each time would cost the
size of the run on every settle, O(n²) over a run of n tasks. The task graph
keeps this tally at the moment it changes a status instead, so reading it
costs O(1). Pure bookkeeping: no I/O, no Temporal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from oma.core.schema.task import TERMINAL_STATUSES, TaskStatus


class TaskTally:
    """The tasks that ended (``completed``, ``failed``, ``skipped``), by
    status, counted from ``statuses`` (a resumed run's tasks) and then as
    ``moved`` is told of each change."""

    def __init__(self, statuses: Iterable[TaskStatus] = ()) -> None:
        self._ended: Counter[TaskStatus] = Counter(s for s in statuses if s in TERMINAL_STATUSES)

    def moved(self, before: TaskStatus, after: TaskStatus) -> None:
        """A task went from ``before`` to ``after``."""
        if before in TERMINAL_STATUSES:
            self._ended[before] -= 1
        if after in TERMINAL_STATUSES:
            self._ended[after] += 1

    def count(self, status: TaskStatus) -> int:
        """How many tasks ended ``status`` (0 for a status that is not an end)."""
        return self._ended[status]

    @property
    def ended(self) -> int:
        """How many tasks ended, whichever way."""
        return sum(self._ended.values())
