"""How long a run's workflow tasks took, read from its histories.

A workflow task's time is from its ``WorkflowTaskStarted`` event to its
``WorkflowTaskCompleted`` (or ``Failed``/``TimedOut``) event: the time a
worker spent on one activation, the local activities it ran included (they
run inside the task), and the time the task waited in the worker for a
thread. The server must see it end within the workflow task timeout (10 s by
default), or it times the task out and hands the run to a worker again (the
SDK warns ``TMPRL1104`` past 5 s).

On a busy worker the wait dominates, so ``ActivationClock`` also measures the
work itself: the CPU time of each activation's thread, by workflow type.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType, TimeoutType, WorkflowTaskFailedCause
from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkflowRunner

_ENDS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: "workflow_task_completed_event_attributes",
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED: "workflow_task_failed_event_attributes",
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT: "workflow_task_timed_out_event_attributes",
}


@dataclass
class WorkflowTasks:
    """The workflow tasks of some histories, in the order they were added."""

    seconds: list[float] = field(default_factory=list)
    longest_s: float = 0.0
    longest_at: str = ""
    """Where the longest is: its workflow id and started event id, ``wf#id``."""
    failed: int = 0
    """Tasks that failed or timed out."""
    failures: list[str] = field(default_factory=list)
    """Each of those: where, and its cause or timeout type."""

    def add(self, workflow_id: str, history: Any) -> WorkflowTasks:
        """Add the workflow tasks of ``history`` (a ``WorkflowHistory`` or its events)."""
        started: dict[int, Any] = {}
        for event in getattr(history, "events", history):
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                started[event.event_id] = event
                continue
            attrs = _ENDS.get(event.event_type)
            if attrs is None:
                continue
            begin = started.pop(getattr(event, attrs).started_event_id, None)
            if begin is None:
                continue
            end, start = event.event_time.ToDatetime(), begin.event_time.ToDatetime()
            seconds = (end - start).total_seconds()
            if seconds > self.longest_s:  # kept as it goes: a max over the list is quadratic
                self.longest_s, self.longest_at = seconds, f"{workflow_id}#{begin.event_id}"
            self.seconds.append(seconds)
            if event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                self.failed += 1
                ended = getattr(event, attrs)
                why = (
                    TimeoutType.Name(ended.timeout_type)
                    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
                    else f"{WorkflowTaskFailedCause.Name(ended.cause)}: {ended.failure.message}"
                )
                self.failures.append(f"{workflow_id}#{begin.event_id} after {seconds:.1f} s: {why}")
        return self

    def line(self) -> str:
        """How many, their total, the mean of the first and the last tenth (does
        a task's time grow as the run goes?) and the longest, for a bench's output."""
        n = len(self.seconds)
        tenth = max(1, n // 10)
        first = sum(self.seconds[:tenth]) / tenth
        last = sum(self.seconds[-tenth:]) / tenth
        failed = f", {self.failed} failed or timed out" if self.failed else ""
        return (
            f"{n} workflow tasks, {sum(self.seconds):.2f} s in all, the first tenth "
            f"{first * 1000:.0f} ms each, the last tenth {last * 1000:.0f} ms each, the longest "
            f"{self.longest_s * 1000:.0f} ms ({self.longest_at}){failed}"
        )


@dataclass
class Activations:
    """The activations of one workflow type: CPU seconds of each, in order,
    and which run's was the longest."""

    cpu_s: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    """The same activations' wall time (their thread's wait for the GIL included)."""
    first_cpu_s: list[float] = field(default_factory=list)
    """Each run's first activation (it reads the run's input), also in ``cpu_s``."""
    longest_s: float = 0.0
    longest_at: str = ""

    @property
    def p99_s(self) -> float:
        return _quantile(self.cpu_s, 0.99)

    def line(self) -> str:
        """How many, their CPU in all, median, p99 and the longest, for a bench's output."""
        return (
            f"{len(self.cpu_s)} activations, {sum(self.cpu_s):.2f} s CPU in all, median "
            f"{_quantile(self.cpu_s, 0.5) * 1000:.1f} ms, p99 {self.p99_s * 1000:.1f} ms, the "
            f"longest {self.longest_s * 1000:.0f} ms ({self.longest_at}); a run's first "
            f"{max(self.first_cpu_s, default=0) * 1000:.0f} ms at most; wall time: p99 "
            f"{_quantile(self.wall_s, 0.99) * 1000:.1f} ms, the longest "
            f"{max(self.wall_s, default=0) * 1000:.0f} ms"
        )


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


class ActivationClock(SimplePlugin):
    """A worker plugin (after ``OmaPlugin``, which sets the workflow sandbox)
    that times every activation's CPU (``time.thread_time``, so the work of
    this activation only, whatever else the worker does meanwhile), by
    workflow type: ``by_type["TeamRun"]``."""

    def __init__(self) -> None:
        self.by_type: defaultdict[str, Activations] = defaultdict(Activations)
        super().__init__("bench-activation-clock", workflow_runner=self._runner)

    def _runner(self, given: WorkflowRunner | None) -> WorkflowRunner:
        assert given is not None, "the clock wraps the runner OmaPlugin configures"
        return _TimedRunner(given, self)


class _TimedRunner(WorkflowRunner):
    def __init__(self, inner: WorkflowRunner, clock: ActivationClock) -> None:
        self._inner, self._clock = inner, clock

    def prepare_workflow(self, defn: Any) -> None:
        self._inner.prepare_workflow(defn)

    def set_worker_level_failure_exception_types(self, types: Any) -> None:
        self._inner.set_worker_level_failure_exception_types(types)

    def create_instance(self, det: Any) -> Any:
        instance = self._inner.create_instance(det)
        return _TimedInstance(instance, self._clock.by_type[det.defn.name], det.info.workflow_id)


class _TimedInstance:
    # delegates all but ``activate`` (the SDK calls the instance's methods, no isinstance)
    def __init__(self, inner: Any, activations: Activations, workflow_id: str) -> None:
        self._inner, self._activations, self._id = inner, activations, workflow_id
        self._first = True

    def activate(self, act: Any) -> Any:
        start, wall = time.thread_time(), time.perf_counter()
        try:
            return self._inner.activate(act)
        finally:
            cpu = time.thread_time() - start
            activations = self._activations
            activations.wall_s.append(time.perf_counter() - wall)
            # the longest kept as it goes: a max over the list each time made
            # the clock a third of a 100,000-task run's worker CPU
            if cpu > activations.longest_s:
                activations.longest_s, activations.longest_at = cpu, self._id
            activations.cpu_s.append(cpu)
            if self._first:
                activations.first_cpu_s.append(cpu)
                self._first = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
