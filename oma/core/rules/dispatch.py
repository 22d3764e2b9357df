"""``Dispatcher``: which task of a team run starts next, and on which agent.

A task becomes ready when its dependencies completed; where
``options.approvals.dispatch`` gates it, a dispatch request opens first and
the task waits ``awaiting_approval``. Ready tasks start on their assignee or
on the agent the ``Scheduler`` picks (a gate naming that agent then applies
before it starts); an ACP agent holds one conversation, so it takes one task
at a time. Pure logic: ``TeamRun`` starts the children.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from oma.core.rules.approval_gate import ApprovalGate, dispatch_request_id, task_snapshot
from oma.core.rules.scheduling import Scheduler
from oma.core.rules.task_graph import TaskGraph
from oma.core.schema.approvals import Boundary
from oma.core.schema.task import TaskStatus
from oma.core.schema.team import TeamConfig

RequestApproval = Callable[[str, Boundary, Any, str], None]
"""Opens an approval request: request id, boundary, content, reason."""


class Dispatcher:
    """The ready queue of one run over its ``graph``.

    ``request`` opens a dispatch request (the run records it and its event);
    ``gate`` says which tasks need one and holds the decisions.
    """

    def __init__(
        self,
        graph: TaskGraph,
        scheduler: Scheduler,
        gate: ApprovalGate,
        team: TeamConfig,
        request: RequestApproval,
    ) -> None:
        self.graph = graph
        self.scheduler = scheduler
        self._gate = gate
        self._acp = {a.name for a in team.agents if a.kind == "acp"}
        self._busy: set[str] = set()
        self._request = request
        # the tasks waiting on their dispatch request, kept as they start to
        # wait: a release after every settle reads these, not every task
        self._position = {task_id: n for n, task_id in enumerate(graph.specs)}
        self._awaiting = set(graph.awaiting_approval())

    def __len__(self) -> int:
        """How many tasks are queued to start."""
        return len(self.scheduler)

    def start(self) -> None:
        """A fresh run: the tasks without dependencies are ready."""
        for task_id in self.graph.roots():
            self.ready(task_id)

    def resume(self) -> None:
        """A resumed run: tasks keep the agents the scheduler gave them, and
        the ``pending`` tasks whose dependencies completed are ready again."""
        for task_id, spec in self.graph.specs.items():
            assignee = self.graph[task_id].assignee
            if spec.assignee is None and assignee is not None:
                self.scheduler.pin(task_id, assignee)
        for task_id in self.graph.ready():
            self.ready(task_id)

    def ready(self, task_id: str) -> None:
        """``task_id``'s dependencies completed: queue it, or first request the
        approval of its dispatch."""
        state = self.graph[task_id]
        if self._gate.gates_dispatch(task_id, state.assignee):
            state.status = TaskStatus.AWAITING_APPROVAL
            self._awaiting.add(task_id)
            self._request(
                dispatch_request_id(task_id),
                "dispatch",
                task_snapshot(state, outcome=False),
                f"options.approvals.dispatch: review task {task_id!r} before it starts",
            )
            return
        state.status = TaskStatus.PENDING
        self.scheduler.push(task_id)

    def release(self, approved: Callable[[str], bool]) -> None:
        """Queue the tasks whose dispatch request got a decision that
        ``approved(request_id)`` accepts (it stops the run on a rejection), in
        task order. Costs the tasks awaiting approval, not the run's."""
        if not self._awaiting:
            return
        for task_id in sorted(self._awaiting, key=self._position.__getitem__):
            if self.graph[task_id].status != TaskStatus.AWAITING_APPROVAL:
                self._awaiting.discard(task_id)  # skipped meanwhile
                continue
            request_id = dispatch_request_id(task_id)
            if self._gate.decision(request_id) is not None and approved(request_id):
                self._awaiting.discard(task_id)
                self.ready(task_id)

    def next_round(self) -> deque[str]:
        """Every queued task, each given its agent: the next round."""
        batch: deque[str] = deque()
        while (nxt := self.scheduler.next(lambda agent: True)) is not None:
            task_id, agent = nxt
            self.graph[task_id].assignee = agent
            batch.append(task_id)
        return batch

    def next(self, batch: deque[str] | None = None) -> tuple[str, str] | None:
        """The next task that can start now and its agent, taken off the queue
        (off ``batch``, in a round); ``None`` when none can."""
        if batch is not None:
            task_id = next((t for t in batch if self._available(self._agent_of(t))), None)
            if task_id is None:
                return None
            batch.remove(task_id)
            return task_id, self._agent_of(task_id)
        while (nxt := self.scheduler.next(self._available)) is not None:
            task_id, agent = nxt
            if not self._gate_assigned(task_id, agent):
                return nxt
        return None

    def started(self, task_id: str, agent: str) -> None:
        state = self.graph[task_id]
        state.assignee = agent
        state.status = TaskStatus.IN_PROGRESS
        self.scheduler.started(agent)
        if agent in self._acp:
            self._busy.add(agent)

    def settled(self, agent: str) -> None:
        self._busy.discard(agent)
        self.scheduler.settled(agent)

    def _gate_assigned(self, task_id: str, agent: str) -> bool:
        """A task the scheduler just gave to ``agent``: if a dispatch approval
        names that agent, request it now, for that agent."""
        if self.graph.specs[task_id].assignee is not None or not self._gate.gates_dispatch(
            task_id, agent
        ):
            return False
        self.graph[task_id].assignee = agent
        self.scheduler.pin(task_id, agent)
        self.ready(task_id)
        return True

    def _agent_of(self, task_id: str) -> str:
        agent = self.graph[task_id].assignee
        assert agent is not None
        return agent

    def _available(self, agent: str) -> bool:
        return agent not in self._busy
