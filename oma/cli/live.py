"""What ``oma run`` shows while a ``TeamRun`` runs.

Two views of the same run events (the ``events`` query, polled by
``oma.cli.run.Progress``), both on stderr:

- ``LiveView``, when stderr is a terminal: a rich live display, redrawn every
  ``PEEK_INTERVAL_S`` seconds, of a bar of settled/total tasks and one line
  per running task (its id, title, agent, elapsed time and latest output),
  with the settled tasks and the run's notable events printed above it;
- ``PlainView`` otherwise (a pipe, a file, a test): one line per event, with
  the task's title, agent and the settled/total count; a run of more than
  ``PLAIN_STARTS_UP_TO`` tasks leaves out its ``task_start`` lines, so it
  prints about one line per task.

The latest output comes from the heartbeats of the task's running
activities: a process's ``last_line``, an ACP agent's or a model's
``last_text`` (``oma.activities._heartbeat``); while Temporal retries a
failed attempt (a model provider that does not answer), the attempt and its
error instead. Both are read with
``DescribeWorkflowExecution`` of the task's ``AgentRun``
(``oma.client.progress.latest_output``, which ``oma acp`` reads too)
(``pending_activities[].heartbeat_details``). Heartbeats rather than a
query or a workflow update: the text never enters a workflow's history or
state (nothing to replay, no workflow task per delta), the server already
keeps the latest details of every pending activity, and any client reads
them without a worker (the Web UI shows the same details). Text reaches the
server within the worker's heartbeat throttle (0.2 s,
``oma.worker.plugin.HEARTBEAT_THROTTLE``) and the screen within one more
``PEEK_INTERVAL_S``: under 0.5 s in all (``bench/live.py`` measures it).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from rich.console import Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text
from temporalio.client import Client, WorkflowHandle

from oma.cli.common import err_console, run_text
from oma.client.progress import latest_output
from oma.core.contracts.workflow_ids import coordinator_workflow_id, task_workflow_id
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_events import RunEvent
from oma.core.schema.run_input import TeamRunInput
from oma.core.schema.task import TERMINAL_STATUSES, TaskStatus

PEEK_INTERVAL_S = 0.2
"""How often the live view reads its running tasks' latest output and redraws."""

RUNNING_ROWS = 10
"""The live view shows at most this many running tasks (and counts the others);
it reads the output of those only, one ``DescribeWorkflowExecution`` each."""

PLAIN_STARTS_UP_TO = 20
"""Plain output prints ``task_start`` lines for runs of at most this many tasks."""

_SETTLED = {"task_complete": "completed", "task_failed": "failed", "task_skipped": "skipped"}
_UNDER_WAY = {TaskStatus.IN_PROGRESS, *TERMINAL_STATUSES}

EVENT_STYLES = {
    "task_complete": "green",
    "task_failed": "red",
    "task_skipped": "yellow",
    "task_retry": "yellow",
    "budget_exceeded": "red",
    "approval_request": "yellow",
    "approval_refused": "red",
    "abort": "red",
    "run_end": "bold",
}


@dataclass
class TaskLine:
    """One task as the views show it."""

    id: str
    title: str = ""
    agent: str | None = None
    status: str = "pending"
    """``pending``, ``running``, or the settled status: ``completed``, ``failed``, ``skipped``."""
    started: datetime | None = None
    latest: str = ""
    """The last line of the task's latest output (a heartbeat's text)."""


class RunTracker:
    """The run's tasks and their status, folded from its events.

    Titles and agents come from the input (``tasks``, ``plan``) and the
    ``task_start`` events (``agent NAME``); a goal run's tasks, known only
    once planned, from the ``state`` query (``Progress`` asks it when
    ``names_unknown`` says so).
    """

    def __init__(self, inp: TeamRunInput | None = None) -> None:
        self.tasks: dict[str, TaskLine] = {}
        self.goal_run = inp is not None and inp.goal is not None
        self.planned = not self.goal_run
        self.ended = False
        self.aborting: str | None = None
        """The reason of the abort the run drains for (its ``abort`` event), if any."""
        # a run with options.reuse decides which tasks it keeps before it
        # starts one: its state says, once a task event has come
        self.reusing = inp is not None and inp.resume is None and inp.options.reuse is not None
        specs = inp.given_tasks() if inp else []
        for spec in specs:
            self.tasks[spec.id] = TaskLine(spec.id, spec.title, spec.assignee)
        if inp is not None and inp.resume is not None:  # a fork: its tasks and what it kept
            self.planned = True
            for t in inp.resume.result.tasks:
                line = self.task(t.id)
                line.title, line.agent = line.title or t.title, line.agent or t.assignee
                if t.reused_from is not None:
                    line.status = "completed"

    def names_unknown(self, event: RunEvent) -> bool:
        """Whether ``event`` brings tasks this tracker does not know (a plan),
        or, the first task event of a run with ``options.reuse``, which tasks
        it keeps."""
        return event.type == "plan_ready" or (
            event.task_id is not None and (self.reusing or event.task_id not in self.tasks)
        )

    def apply(self, event: RunEvent) -> None:
        if event.type == "plan_ready":
            self.planned = True
        elif event.type == "run_end":
            self.ended = True
        elif event.type == "abort":
            self.aborting = event.detail or "abort signal"
        if event.task_id is None:
            return
        line = self.task(event.task_id)
        if event.type == "task_start":
            line.status = "running"
            line.started = line.started or event.at
            detail = event.detail or ""
            if detail.startswith("agent "):
                line.agent = detail.removeprefix("agent ")
        elif event.type in _SETTLED:
            line.status = _SETTLED[event.type]

    def task(self, task_id: str) -> TaskLine:
        line = self.tasks.get(task_id)
        if line is None:
            line = self.tasks[task_id] = TaskLine(task_id)
        return line

    def learn(self, state: TeamRunResult) -> None:
        """Titles and agents from the run's ``state``, and the tasks it reused
        (settled ``completed`` before it ran anything)."""
        for t in state.tasks:
            line = self.tasks.get(t.id) or self.tasks.setdefault(t.id, TaskLine(t.id))
            line.title = line.title or t.title
            line.agent = line.agent or t.assignee
            if t.reused_from is not None:
                line.status = "completed"
        if any(t.reused_from is not None or t.status in _UNDER_WAY for t in state.tasks):
            self.reusing = False  # what it keeps is decided

    @property
    def total(self) -> int:
        return len(self.tasks)

    @property
    def settled(self) -> int:
        return sum(t.status in ("completed", "failed", "skipped") for t in self.tasks.values())

    @property
    def failed(self) -> int:
        return sum(t.status == "failed" for t in self.tasks.values())

    def running(self) -> list[TaskLine]:
        return [t for t in self.tasks.values() if t.status == "running"]


class RunView(Protocol):
    """Where ``Progress`` sends what it reads of the run."""

    tracker: RunTracker

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def event(self, event: RunEvent) -> None: ...

    def note(self, text: str, style: str) -> None: ...


def run_view(client: Client, handle: WorkflowHandle[Any, Any], inp: TeamRunInput) -> RunView:
    """``LiveView`` when stderr is a terminal, else ``PlainView``."""
    if err_console.is_terminal and not err_console.is_dumb_terminal:
        return LiveView(client, handle, inp)
    return PlainView(RunTracker(inp))


class PlainView:
    """One line per event on stderr (see the module docstring)."""

    def __init__(self, tracker: RunTracker | None = None) -> None:
        self.tracker = tracker or RunTracker()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def event(self, event: RunEvent) -> None:
        self.tracker.apply(event)
        if event.type == "task_start" and self.tracker.total > PLAIN_STARTS_UP_TO:
            return
        err_console.print(event_line(event, self.tracker))

    def note(self, text: str, style: str) -> None:
        err_console.print(run_text(text, style))


def event_line(event: RunEvent, tracker: RunTracker | None = None) -> Text:
    """``12:00:03 task_failed       code         Write it · PROCESS_FAILED: ... [2/3]``:
    the time, the type, the task, then its title and the event's detail (first
    line), and for a settled task the settled/total count."""
    detail = (event.detail or "").strip()
    first = detail.splitlines()[0] if detail else ""
    at = event.at.astimezone().strftime("%H:%M:%S")
    line = Text(f"{at} ", style="dim")
    line.append(f"{event.type:<17}", style=EVENT_STYLES.get(event.type, "cyan"))
    line.append(run_text(f" {event.task_id or '-':<12}"))
    task = tracker.tasks.get(event.task_id) if tracker and event.task_id else None
    parts = [task.title] if task is not None and task.title else []
    if event.type == "task_start" and task is not None and task.agent:
        parts.append(task.agent)
    elif event.type == "task_complete" and task is not None and task.started is not None:
        parts.append(_elapsed(event.at - task.started))
    elif first:
        parts.append(first)
    line.append(run_text(f" {' · '.join(parts)}"))
    line.rstrip()
    if tracker is not None and event.type in _SETTLED and tracker.total:
        line.append(f" [{tracker.settled}/{tracker.total}]", style="dim")
    return line


def _elapsed(delta: timedelta) -> str:
    s = max(delta.total_seconds(), 0.0)
    if s < 60:
        return f"{s:.1f}s"
    minutes, seconds = divmod(int(s), 60)
    return f"{minutes}m{seconds:02d}s"


class LiveView:
    """A rich live display on stderr (see the module docstring).

    ``start`` begins redrawing every ``PEEK_INTERVAL_S`` seconds, each time
    after reading the running tasks' latest output; ``stop`` ends it and
    clears the display (``transient``), leaving the lines printed above it.
    """

    def __init__(self, client: Client, handle: WorkflowHandle[Any, Any], inp: TeamRunInput) -> None:
        self.client = client
        self.handle = handle
        self.tracker = RunTracker(inp)
        self.coordinator = TaskLine("coordinator", "planning", "coordinator")
        self._live = Live(
            console=err_console, auto_refresh=False, transient=True, redirect_stdout=False
        )
        self._loop: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._loop is None:
            self._live.start()
            self._loop = asyncio.create_task(self._redraw())

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            self._loop = None
            self._live.stop()

    def event(self, event: RunEvent) -> None:
        self.tracker.apply(event)
        if event.type != "task_start":
            # above the display: what settled and what happened to the run
            err_console.print(event_line(event, self.tracker))

    def note(self, text: str, style: str) -> None:
        err_console.print(run_text(text, style))

    async def _redraw(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # best effort: the next round asks again
                await self._peek()
            self._live.update(self.render(), refresh=True)
            await asyncio.sleep(PEEK_INTERVAL_S)

    async def _peek(self) -> None:
        shown = self._shown()
        ids = [self._workflow_id(t) for t in shown]
        outputs = await asyncio.gather(
            *(latest_output(self.client, wid) for wid in ids), return_exceptions=True
        )
        for task, out in zip(shown, outputs, strict=True):
            if isinstance(out, str) and out:
                task.latest = out

    def _shown(self) -> list[TaskLine]:
        if not self.tracker.planned:
            if self.coordinator.started is None:
                self.coordinator.started = datetime.now(UTC)
            return [self.coordinator]
        return self.tracker.running()[:RUNNING_ROWS]

    def _workflow_id(self, task: TaskLine) -> str:
        if task is self.coordinator:
            return coordinator_workflow_id(self.handle.id, "plan")
        return task_workflow_id(self.handle.id, task.id)

    def render(self) -> RenderableType:
        """The bar and the running tasks' lines, as of now."""
        tracker = self.tracker
        now = datetime.now(UTC)
        bar = Table.grid(padding=(0, 1))
        bar.add_row(
            ProgressBar(total=max(tracker.total, 1), completed=tracker.settled, width=30),
            Text(f"{tracker.settled}/{tracker.total} tasks settled"),
            Text(f"{tracker.failed} failed", style="red") if tracker.failed else Text(""),
            # one line, cut at the screen's edge: a reason is the user's text, of any length
            Text.assemble(
                run_text(f"aborting ({tracker.aborting}): the tasks in flight settle", "red"),
                no_wrap=True,
                overflow="ellipsis",
            )
            if tracker.aborting
            else Text(""),
        )
        rows = Table.grid(padding=(0, 1))
        for _ in range(4):  # id, title, agent, elapsed
            rows.add_column(no_wrap=True, overflow="ellipsis", max_width=28)
        # the latest text takes what is left, cut: a column rich may narrow
        # (a no_wrap one's width is its whole text, and the others were squeezed)
        rows.add_column(ratio=1)
        shown = self._shown()
        for task in shown:
            elapsed = _elapsed(now - task.started) if task.started else ""
            rows.add_row(
                run_text(task.id, "cyan"),
                run_text(task.title),
                run_text(task.agent or "-", "dim"),
                Text(elapsed, style="dim"),
                Text.assemble(run_text(task.latest, "italic"), no_wrap=True, overflow="ellipsis"),
            )
        more = len(tracker.running()) - len(shown)
        parts: list[RenderableType] = [bar, rows]
        if more > 0:
            parts.append(Text(f"+ {more} more running", style="dim"))
        return Group(*parts)
