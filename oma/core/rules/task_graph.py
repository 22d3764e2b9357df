"""``TaskGraph``: the tasks of one team run, and what each outcome does to the others.

Pure bookkeeping (no I/O, no Temporal), so ``TeamRun`` can run it in workflow
code and its rules can be tested in milliseconds: a task waits until every
dependency completed; a completion may unblock dependents; a failure skips
every transitive dependent; a skip only touches a task that never started.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from oma.core.rules.prompt import task_prompt
from oma.core.rules.shared_memory import shared_memory
from oma.core.rules.task_tally import TaskTally
from oma.core.schema.dag import dependents_map, transitive_dependents
from oma.core.schema.errors import RunCancelledError, RunTimeoutError
from oma.core.schema.task import TaskSpec, TaskState, TaskStatus

NOT_STARTED = frozenset({TaskStatus.BLOCKED, TaskStatus.PENDING, TaskStatus.AWAITING_APPROVAL})
"""The statuses of a task that never started: the ones a skip applies to."""

SETTLED = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED})
"""The statuses of a task that ran to an outcome."""

SPEC_FIELDS = frozenset({"title", "description", "depends_on"})
"""The fields of a ``TaskState`` that its ``TaskSpec`` says; a carried state
may leave them out (see ``oma.core.rules.team_run_state.carried``)."""


def skip_reason(failed: TaskState, stop_reason: str, *, retry_stopped: bool = False) -> str:
    """Why the dependents of ``failed`` are skipped: the run's stop when the
    stop cut the task short (``CANCELLED``, ``RUN_TIMEOUT``) or kept it from
    a retry it had coming, else the failure."""
    cut = retry_stopped or failed.error_code in (RunCancelledError.code, RunTimeoutError.code)
    if cut and stop_reason:
        return f"skipped: {stop_reason}"
    return f"skipped: dependency {failed.id!r} ({failed.title}) failed"


class TaskGraph:
    """The task states of a run over their specs, with the dependency counts.

    ``states`` are the tasks' states so far (a resumed run's, whose spec
    fields may be missing: they are set here from the specs). A task with no
    state starts ``blocked`` if it has dependencies, else ``pending``; with
    ``plan_only`` every new state is ``pending`` (a plan-only run reports its
    plan). ``states`` keeps the specs' order and holds the very ``TaskState``
    objects the run reports, so the run's result reads them directly.
    ``tally`` counts the tasks that ended, as they end.
    """

    def __init__(
        self,
        specs: Sequence[TaskSpec],
        states: Sequence[TaskState] = (),
        *,
        plan_only: bool = False,
    ) -> None:
        self.specs = {t.id: t for t in specs}
        self.dependents = dependents_map(specs)
        known = {s.id: s for s in states}
        self.states: dict[str, TaskState] = {}
        for t in specs:
            state = known.get(t.id)
            if state is None:
                # in one call: pydantic's __setattr__ costs more than its
                # __init__ (a 5,000-task run's first workflow task builds 5,000)
                blocked = bool(t.depends_on) and not plan_only
                self.states[t.id] = TaskState(
                    id=t.id,
                    title=t.title,
                    description=t.description,
                    depends_on=t.depends_on,
                    assignee=t.assignee,
                    status=TaskStatus.BLOCKED if blocked else TaskStatus.PENDING,
                )
                continue
            state.title, state.description, state.depends_on = t.title, t.description, t.depends_on
            if state.assignee is None:
                state.assignee = t.assignee
            self.states[t.id] = state
        completed = TaskStatus.COMPLETED
        self._waiting_on = (
            {
                t.id: sum(1 for d in t.depends_on if self.states[d].status != completed)
                for t in specs
            }
            if known
            else {t.id: len(t.depends_on) for t in specs}  # a new run: none completed
        )
        self.tally = TaskTally(s.status for s in self.states.values())

    def __getitem__(self, task_id: str) -> TaskState:
        return self.states[task_id]

    def __iter__(self) -> Iterator[TaskState]:
        return iter(self.states.values())

    def roots(self) -> list[str]:
        """The tasks without dependencies, in order: a fresh run's first ready tasks."""
        return [t.id for t in self.specs.values() if not t.depends_on]

    def ready(self) -> list[str]:
        """The ``pending`` tasks whose dependencies all completed, in order:
        what a resumed run queues again."""
        return [
            task_id
            for task_id, state in self.states.items()
            if state.status == TaskStatus.PENDING and self._waiting_on[task_id] == 0
        ]

    def awaiting_approval(self) -> list[str]:
        """The tasks whose dispatch waits on an approval, in order."""
        return [s.id for s in self if s.status == TaskStatus.AWAITING_APPROVAL]

    def complete(self, task_id: str, output: str | None) -> list[str]:
        """``task_id`` completed with ``output``; returns the dependents whose
        dependencies have now all completed, in order (the caller queues them,
        or leaves them ``pending`` when the run is stopping)."""
        state = self.states[task_id]
        self._move(state, TaskStatus.COMPLETED)
        state.output = output
        unblocked = []
        for dependent in self.dependents[task_id]:
            self._waiting_on[dependent] -= 1
            if self._waiting_on[dependent] == 0:
                unblocked.append(dependent)
        return unblocked

    def fail(self, task_id: str, error: str, error_code: str | None) -> list[str]:
        """``task_id`` failed; returns its transitive dependents that have not
        started, breadth first: the tasks the caller skips with it."""
        state = self.states[task_id]
        self._move(state, TaskStatus.FAILED)
        state.error = error
        state.error_code = error_code
        return [
            d
            for d in transitive_dependents(task_id, self.dependents)
            if self.states[d].status in NOT_STARTED
        ]

    def skip(self, task_id: str, reason: str) -> bool:
        """Skip ``task_id`` with ``reason`` if it never started; whether it did."""
        state = self.states[task_id]
        if state.status not in NOT_STARTED:
            return False
        self._move(state, TaskStatus.SKIPPED)
        state.error = reason
        return True

    def prompt(self, task_id: str) -> str:
        """The prompt of ``task_id`` (``oma.core.rules.prompt.task_prompt``): its
        dependencies' outputs, or with ``memory_scope`` ``all`` the shared
        memory too. Raises ``DependencyPayloadTooLargeError``."""
        spec = self.specs[task_id]
        memory = shared_memory(self) if spec.memory_scope == "all" else {}
        return task_prompt(spec, [self.states[d] for d in spec.depends_on], memory)

    def unsettled(self) -> list[str]:
        """Every task that has no outcome (the ones a stopped run skips), in order."""
        return [s.id for s in self if s.status not in SETTLED]

    def any_failed(self) -> bool:
        return self.tally.count(TaskStatus.FAILED) > 0

    def _move(self, state: TaskState, status: TaskStatus) -> None:
        self.tally.moved(state.status, status)
        state.status = status
