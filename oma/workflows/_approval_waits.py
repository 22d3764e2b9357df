"""``ApprovalWaits``: the waiting side of a run's approval gate, and
``ApprovalHandlers``: what a reviewer talks to.

The gate (``oma.core.rules.approval_gate``) keeps the books; here each open request
gets a waiter that applies ``on_timeout`` when the request expires (a
Temporal timer), and a step of the run can wait for a decision. Decisions
arrive through the ``decide`` signal and update, which ``TeamRun`` and
``AgentRun`` (a task's gated tool calls) share: one mechanism for every gate.

Exactly one run decides a request: the run that made it. A team run lists
its tasks' tool requests too, but a decision taken there goes to the task's
run (a ``DecisionForwarder``), and the team run records only what that run
recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from oma.core.contracts.names import QueryName, SignalName, UpdateName
    from oma.core.rules.approval_gate import ApprovalGate, pending_view, task_of
    from oma.core.rules.payload_fit import answered_requests
    from oma.core.rules.task_graph import TaskGraph
    from oma.core.schema.approvals import (
        ApprovalDecision,
        ApprovalOptions,
        ApprovalRequest,
        Boundary,
        Decision,
        DecisionSource,
        PendingApproval,
        decision_of,
    )
    from oma.core.schema.errors import OMAError
    from oma.core.schema.run_state import TeamRunState
    from oma.workflows._events import NO_EVENTS, EventSink
    from oma.workflows._failures import as_failure
    from oma.workflows._waiting import Wakeup

LAG_S = 1.0
"""How long a decision on a request the run has not made waits for it."""


class DecisionListener(Protocol):
    """Told of every decision a run records (by a reviewer, forwarded, or
    by ``on_timeout``): an ``AgentRun``'s ``ToolGate`` tells its team run."""

    def decided(self, request: ApprovalRequest, record: ApprovalDecision) -> None: ...


class DecisionForwarder(Protocol):
    """Sends the decisions a run takes on requests another run made to that
    run, which decides them (a team run's ``AdoptedToolRequests``)."""

    def takes(self, request: ApprovalRequest) -> bool:
        """Whether a decision on ``request`` goes to the run that made it."""
        ...

    def check(self, decision: Decision) -> None:
        """Raise ``ApprovalConflictError`` when a decision on the same request
        is on its way already."""
        ...

    def send_decision(
        self, request: ApprovalRequest, decision: Decision, source: DecisionSource
    ) -> asyncio.Future[ApprovalDecision]:
        """Send ``decision``; the future is the decision the other run
        recorded, when it is this one, or the ``ApprovalError`` saying why not
        (``APPROVAL_CONFLICT``: another decision came first)."""
        ...


class ApprovalWaits:
    """Requests, decisions and expiries of one run, over ``gate``.

    ``events`` records the run's events (an ``AgentRun`` keeps none);
    ``wakeup`` is set whenever something the dispatch loop waits on changed
    (a decision, a closed request; nothing waits in an ``AgentRun``, whose
    tool calls wait on conditions). Set after: ``listener``, told of every
    decision recorded, and ``forwarder``, which at a team run takes the
    decisions on requests its tasks' runs made.
    """

    def __init__(
        self,
        gate: ApprovalGate,
        events: EventSink = NO_EVENTS,
        wakeup: Wakeup | None = None,
    ) -> None:
        self.gate = gate
        self._events = events
        self._wakeup = wakeup or Wakeup()
        self._waiters: dict[str, asyncio.Task[None]] = {}
        self.listener: DecisionListener | None = None
        self.forwarder: DecisionForwarder | None = None

    @classmethod
    def of_run(
        cls,
        state: TeamRunState,
        approvals: ApprovalOptions | None,
        events: EventSink,
        wakeup: Wakeup,
    ) -> ApprovalWaits:
        """The approval waits of this ``TeamRun``, over its ``state``'s open
        requests and decisions, under its ``options.approvals``."""
        return cls(_gate_of(state, approvals), events, wakeup)

    def start_from(self, state: TeamRunState, approvals: ApprovalOptions | None) -> None:
        """A ``TeamRun`` goes on over the ``state`` it read (a fork's, or a
        reuse's: ``TeamRun._start_from``), under ``approvals``: the gate is
        that state's. No request is waited on yet (a run waits on none while
        it reads)."""
        self.gate = _gate_of(state, approvals)

    def request(self, request_id: str, boundary: Boundary, content: Any, reason: str) -> None:
        """Open a request; its waiter starts with the next ``start_waiters``."""
        request = self.gate.request(request_id, boundary, content, reason, workflow.now())
        self._events.emit("approval_request", task_of(request), request_id)

    def validate(self, decision: Decision, closed_because: str) -> None:
        """The ``decide`` update's validator: refuses what the state proves
        wrong (the gate's ``ApprovalError``), not a request it does not know
        yet (``made``)."""
        if self.gate.knows(decision.request_id):
            self._check(decision, closed_because)

    async def decide(self, decision: Decision, closed_because: str) -> ApprovalDecision:
        """The ``decide`` update's handler: records ``decision`` once the
        request it names is made (or refuses it ``LAG_S`` later); on a
        request another run made, returns what that run recorded, once it
        did. Answered by the gate the update came to: a ``TeamRun`` that
        read its start state goes on over another (``start_from``), and an
        update that waited across that for a request the run had not made
        is refused by the gate it waited on."""
        gate = self.gate
        await self.made(decision.request_id, gate)
        request = self._check(decision, closed_because, gate)
        if self.forwarder is not None and self.forwarder.takes(request):
            return await self.forwarder.send_decision(request, decision, "update")
        return self._record(request, decision, "update", gate=gate)

    def signalled(self, decision: Decision, closed_because: str) -> None:
        """The ``decide`` signal's handler: the update's rules, without an
        answer; raises the gate's ``ApprovalError``."""
        request = self._check(decision, closed_because)
        if self.forwarder is not None and self.forwarder.takes(request):
            self.forwarder.send_decision(request, decision, "signal")
        else:
            self._record(request, decision, "signal")

    async def made(self, request_id: str, gate: ApprovalGate) -> None:
        """Return once the run has made request ``request_id`` (in ``gate``,
        its gate), or ``LAG_S`` seconds later if it never does.

        For the ``decide`` update: the SDK (temporalio 1.35) runs an update's
        validator and handler before the run reacts to the rest of their
        activation, and after a worker restart the completion of the child
        that makes a dispatch request comes in the same activation as the
        update (a signal is an event of the history, replayed in order, and
        is not affected). A request the state does not know yet may be a
        moment away, not unknown: only a timer (the run's own time) tells the
        two apart.
        """
        if not gate.knows(request_id):
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: gate.knows(request_id), timeout=LAG_S)

    def record(
        self,
        decision: Decision,
        source: DecisionSource,
        closed_because: str,
        forwarded_by: str | None = None,
    ) -> ApprovalDecision:
        """Record a reviewer's decision on a request this run made (taken at
        the run ``forwarded_by``, if not here); raises the gate's
        ``ApprovalError`` (``closed_because``: why a request closed without one)."""
        return self._record(self._check(decision, closed_because), decision, source, forwarded_by)

    def _check(
        self, decision: Decision, closed_because: str, gate: ApprovalGate | None = None
    ) -> ApprovalRequest:
        request = (gate or self.gate).check(decision, closed_because)
        if self.forwarder is not None:
            self.forwarder.check(decision)
        return request

    def _record(
        self,
        request: ApprovalRequest,
        decision: Decision,
        source: DecisionSource,
        forwarded_by: str | None = None,
        *,
        gate: ApprovalGate | None = None,
    ) -> ApprovalDecision:
        record = (gate or self.gate).decide(
            request,
            decision.decision,
            decision.reviewer,
            decision.comment,
            source,
            workflow.now(),
            forwarded_by,
        )
        self._recorded(request, record)
        return record

    def start_waiters(self) -> None:
        for request in self.gate.open:
            # an adopted request expires in the run that made it
            if request.scope == self.gate.scope and request.request_id not in self._waiters:
                waiter = asyncio.create_task(self._expire_unless_decided(request))
                self._waiters[request.request_id] = waiter

    def close(self, request_id: str) -> None:
        """The request takes no more decisions; its waiter stops."""
        self.gate.close(request_id)
        waiter = self._waiters.pop(request_id, None)
        if waiter is not None:
            waiter.cancel()

    def close_all(self) -> None:
        for request in list(self.gate.open):
            self.close(request.request_id)

    async def decided(self, request_id: str, stopped: Callable[[], bool]) -> None:
        """Wait until ``request_id`` has a decision, or ``stopped()``."""
        self.start_waiters()
        await workflow.wait_condition(
            lambda: self.gate.decision(request_id) is not None or stopped()
        )

    async def _expire_unless_decided(self, request: ApprovalRequest) -> None:
        request_id = request.request_id
        timeout = None
        if request.expires_at is not None:
            timeout = max((request.expires_at - workflow.now()).total_seconds(), 0.001)
        try:
            await workflow.wait_condition(
                lambda: self.gate.decision(request_id) is not None, timeout=timeout
            )
        except TimeoutError:
            # a decision that arrived in the same workflow task wins
            if self.gate.decision(request_id) is None:
                self._recorded(request, self.gate.expire(request, workflow.now()))
        finally:
            self.gate.close(request_id)
            self._waiters.pop(request_id, None)
            self._wakeup.set()

    def refused(self, args: tuple[Any, ...], err: Exception) -> None:
        """A ``decide`` signal refused: an ``approval_refused`` event."""
        raw = args[0] if len(args) == 1 else None
        request = raw.get("request_id") if isinstance(raw, dict) else None
        self._events.emit("approval_refused", None, f"{request or '(no request_id)'}: {err}")

    def _recorded(self, request: ApprovalRequest, record: ApprovalDecision) -> None:
        detail = f"{request.request_id}: {record.decision} by {record.reviewer.id}"
        self._events.emit("approval_decision", task_of(request), detail)
        self._wakeup.set()
        if self.listener is not None:
            self.listener.decided(request, record)


def _gate_of(state: TeamRunState, approvals: ApprovalOptions | None) -> ApprovalGate:
    """The gate of this ``TeamRun``, over its ``state``'s open requests and
    decisions, under its ``options.approvals``."""
    requests, decisions = state.requests, state.result.approval_decisions
    return ApprovalGate(workflow.info().workflow_id, approvals, requests, decisions)


class ApprovalHandlers:
    """The ``pending_approvals`` query and the ``decide`` signal and update,
    for a workflow that sets ``_approvals`` and says, in ``_closed_because``,
    why a request closed without a decision (the run's stop)."""

    _approvals: ApprovalWaits
    _stored = False
    """The run's payloads go to a payload store (a ``TeamRun`` learns it:
    ``_payload_store.stored``): the budget of the answers."""

    def _closed_because(self) -> str:
        return ""

    def _task_graph(self) -> TaskGraph | None:
        """The run's tasks, whose outputs a dispatch request shows (none in
        an ``AgentRun``)."""
        return None

    @workflow.query(name=QueryName.PENDING_APPROVALS)
    def pending_approvals(self) -> list[PendingApproval]:
        """The open approval requests, oldest first; a dispatch request with
        the outputs of its task's dependencies (``upstream``, previews); a
        round request's outputs kept by reference if the answer would pass
        the payload limit (``payload_fit.answered_requests``)."""
        graph = self._task_graph()
        views = [pending_view(r, graph) for r in self._approvals.gate.open]
        states = {s.id: s for s in graph} if graph is not None else {}
        run_id = workflow.info().workflow_id
        return answered_requests(views, run_id, states, stored=self._stored)

    @workflow.signal(name=SignalName.DECIDE)
    def decide_signal(self, *args: Any) -> None:
        """A ``Decision`` sent as a signal: the same rules as the update; a
        refused decision is recorded as an ``approval_refused`` event. (Every
        handler takes ``*args``: a signal with a payload of the wrong arity
        must be refused, not fail the workflow task for good.)"""
        try:
            self._approvals.signalled(decision_of(args), self._closed_because())
        except OMAError as err:
            self._approvals.refused(args, err)

    @workflow.update(name=UpdateName.DECIDE)
    async def decide_update(self, *args: Any) -> ApprovalDecision:
        """A ``Decision``; returns the recorded ``ApprovalDecision``. Refused
        (``APPROVAL_STALE_DECISION``, ``APPROVAL_CONFLICT``, ``INVALID_RUN_INPUT``,
        a closed request) by the validator, without writing history; a request
        the run never made, or a race another decision won, by the handler.
        At a team run, a decision on a task's tool request is answered once the
        task's run recorded it (or ``APPROVAL_CONFLICT``: it recorded another)."""
        with as_failure():
            return await self._approvals.decide(decision_of(args), self._closed_because())

    @decide_update.validator
    def validate_decision(self, *args: Any) -> None:
        with as_failure():
            self._approvals.validate(decision_of(args), self._closed_because())
