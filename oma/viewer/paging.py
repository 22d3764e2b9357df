"""What the views of a many-task run show whole, and what they count.

A run of at most ``WHOLE_TASKS`` tasks is shown whole: every task in the
table, its output, its runs and activities. A larger one (a fan-out over a
corpus: thousands of tasks) would make a table nobody reads, an HTML page of
megabytes and, to draw every activity, one history read per task. Its views
show ``MOST_TASKS`` tasks whole: every task that failed or has not ended
(in progress, awaiting approval, cancelled), then the first tasks in
dependency order; the others are counted by status, and ``oma show RUN
--task ID`` or ``--json`` has each of them. The HTML page also draws every
task's status, as a map (``oma.viewer.html``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from oma.viewer.model import RunView, TaskView

WHOLE_TASKS = 200
"""A run of at most this many tasks is shown whole."""

MOST_TASKS = 200
"""How many tasks the views of a larger run show whole."""

NOTABLE = frozenset({"failed", "in_progress", "awaiting_approval", "cancelled", "running"})
"""The statuses of the tasks a larger run's views show first."""


@dataclass
class Page:
    """The tasks a view shows whole, in the view's order, and the rest counted."""

    tasks: list[TaskView]
    left: Counter[str] = field(default_factory=Counter)
    """The tasks not shown, by status (``TaskView.shown_status``)."""

    @property
    def whole(self) -> bool:
        """Whether every task is shown."""
        return not self.left

    def left_text(self) -> str:
        """``4,800 more tasks (4,790 completed, 10 skipped)``; ``""`` when none."""
        count = sum(self.left.values())
        if not count:
            return ""
        statuses = ", ".join(f"{n:,} {status}" for status, n in self.left.most_common())
        return f"{count:,} more task{'' if count == 1 else 's'} ({statuses})"


def page_of(view: RunView) -> Page:
    """The ``Page`` of ``view``: every task when it has at most
    ``WHOLE_TASKS``, else ``MOST_TASKS`` of them, the notable ones first
    (``NOTABLE``), in the view's order."""
    tasks, most = view.tasks, MOST_TASKS
    if len(tasks) <= WHOLE_TASKS:
        return Page(list(tasks))
    notable = [i for i, t in enumerate(tasks) if t.shown_status in NOTABLE][:most]
    chosen = set(notable)
    for i in range(len(tasks)):
        if len(chosen) >= most:
            break
        chosen.add(i)
    shown = [tasks[i] for i in sorted(chosen)]
    left = Counter(t.shown_status for i, t in enumerate(tasks) if i not in chosen)
    return Page(shown, left)
