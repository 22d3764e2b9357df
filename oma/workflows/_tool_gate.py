"""The tool gate: a tool call approved, with its exact input, before it runs.

``ToolGate`` is the ``AgentRun`` side. Where ``options.approvals.tools``
gates a call, the run requests an approval (boundary ``tool``, content: the
agent, the task, the tool, the ``tool_use`` id and the exact input; its hash
binds a decision to those arguments) and waits durably for it. Each gated
call is a request of its own, decided once: a retry of the approved
``tool_call`` activity does not ask again, and a call the model makes again
later is a new request. A rejection, or a request closed without a decision,
is an error result the model reads, and the loop goes on.

``AdoptedToolRequests`` is the ``TeamRun`` side: a task's requests are listed
by the team run too (its ``pending_approvals``), so a reviewer who knows only
the team run's id can see and answer them there. The task's run alone
decides its requests: the team run forwards a decision taken there and
records only what the task's run recorded (the reviewer's decision, or the
one that came first: that reviewer is told ``APPROVAL_CONFLICT``), so both
runs hold the same decision, the one the call ran or did not run by. The
team run tells the task's run to close its requests when the team run stops.

Request ids are ``tool-<task id>-<n>`` (``n`` counts the gated calls of the
task's run from 1), ``tool-<task id>/<attempt>-<n>`` in a retry of the task
(a task id never contains ``/``, so no two are alike), and ``tool-<n>`` in a
standalone agent run.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from oma.core.contracts.names import SignalName
    from oma.core.contracts.tool_requests import ForwardedDecision, ToolRequestClosed
    from oma.core.contracts.tools import ToolCallInput, ToolCallOutput
    from oma.core.rules.approval_gate import task_of
    from oma.core.schema.approvals import (
        ApprovalDecision,
        ApprovalRequest,
        Decision,
        DecisionSource,
    )
    from oma.core.schema.errors import (
        ApprovalConflictError,
        ApprovalError,
        ApprovalUnknownRequestError,
        OMAError,
    )
    from oma.workflows import _patches
    from oma.workflows._approval_waits import ApprovalWaits
    from oma.workflows._events import EventSink
    from oma.workflows._signals import BackgroundSignals


M = TypeVar("M", bound=BaseModel)


class ToolGate(BackgroundSignals):
    """The gated tool calls of one ``AgentRun`` (``task_id``: the team task it
    runs, if any), over the run's ``approvals``, and their ``listener``."""

    def __init__(self, approvals: ApprovalWaits, task_id: str | None = None) -> None:
        super().__init__()
        self._approvals = approvals
        approvals.listener = self
        self.task_id = task_id
        self.attempt = 1
        self._count = 0
        self.closed_because: str | None = None

    async def ask(self, call: ToolCallInput) -> ToolCallOutput | None:
        """``None`` when ``call`` may run (not gated, or approved); else the
        error result the model reads instead of the tool's."""
        options = self._approvals.gate.options
        named = options is not None and options.gates_tool(call.agent, call.tool.name)
        if not (named or call.traits.consequential):
            return None
        if self.closed_because is not None:
            return _not_run(f"its approval could not be asked: {self.closed_because}")
        self._count += 1
        request_id = self._request_id()
        content = {
            "agent": call.agent,
            "task": self.task_id,
            "tool": call.tool.name,
            "tool_use_id": call.tool_use_id,
            "input": call.input,
        }
        why = "options.approvals.tools" if named else f"{call.tool.name} is consequential"
        reason = f"{why}: review {call.agent}'s {call.tool.name} call"
        self._approvals.request(request_id, "tool", content, reason)
        self._tell_parent(SignalName.TOOL_APPROVAL_REQUEST, self._approvals.gate.get(request_id))
        await self._approvals.decided(request_id, lambda: self.closed_because is not None)
        decision = self._approvals.gate.decision(request_id)
        if decision is None:
            return _not_run(f"its approval request closed: {self.closed_because}")
        if decision.decision == "reject":
            comment = f": {decision.comment}" if decision.comment else ""
            return _not_run(f"the reviewer {decision.reviewer.id} rejected it{comment}")
        return None

    def _request_id(self) -> str:
        if self.task_id is None:
            return f"tool-{self._count}"
        if self.attempt == 1:
            return f"tool-{self.task_id}-{self._count}"
        return f"tool-{self.task_id}/{self.attempt}-{self._count}"

    def take_forwarded(self, args: tuple[Any, ...]) -> None:
        """The ``forwarded_decision`` signal of the team run: record the
        decision (the team run learns it from ``decided``), or tell the team
        run why not, with the decision the request has, if any."""
        forwarded = _parsed(ForwardedDecision, args)
        if forwarded is None:
            return
        parent = workflow.info().parent
        if parent is None or forwarded.forwarded_by != parent.workflow_id:
            workflow.logger.warning("ignored a forwarded decision not from this run's team run")
            return
        decision = forwarded.decision
        try:
            self._approvals.record(
                decision, forwarded.source, self.closed_because or "", forwarded.forwarded_by
            )
        except OMAError as err:
            gate = self._approvals.gate
            refused = ToolRequestClosed(
                request_id=decision.request_id,
                decision=gate.decision(decision.request_id),
                reason=err.message,
            )
            self._tell_parent(SignalName.TOOL_APPROVAL_CLOSED, refused)

    def close(self, reason: str) -> None:
        """The team run stopped: no gated call runs any more."""
        if self.closed_because is None:
            self.closed_because = reason
            self._approvals.close_all()

    def decided(self, request: ApprovalRequest, record: ApprovalDecision) -> None:
        """``DecisionListener``: the team run learns the decision
        (taken here, forwarded, or ``on_timeout``) and closes the request."""
        if request.boundary == "tool":
            closed = ToolRequestClosed(request_id=request.request_id, decision=record)
            self._tell_parent(SignalName.TOOL_APPROVAL_CLOSED, closed)

    def _tell_parent(self, signal: str, payload: BaseModel) -> None:
        parent = workflow.info().parent
        if parent is not None:
            self.send(parent.workflow_id, signal, payload)


class _Forwarded:
    """A decision taken at the team run, on its way to the task's run that
    decides ``request``."""

    def __init__(
        self, request: ApprovalRequest, decision: Decision, source: DecisionSource
    ) -> None:
        self.request = request
        self.decision = decision
        self.source = source
        self.recorded: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()

    def is_this(self, record: ApprovalDecision, forwarded_by: str) -> bool:
        """Whether ``record``, recorded by the task's run, is this decision."""
        decision = self.decision
        return (
            record.forwarded_by == forwarded_by
            and record.source == self.source
            and (record.decision, record.reviewer, record.comment)
            == (decision.decision, decision.reviewer, decision.comment)
        )


class AdoptedToolRequests(BackgroundSignals):
    """A team run's view of its tasks' tool requests (held in its own gate),
    and the ``DecisionForwarder`` and ``DecisionListener`` of its ``approvals``."""

    def __init__(self, approvals: ApprovalWaits, events: EventSink) -> None:
        super().__init__()
        self._approvals = approvals
        self._events = events
        self._forwarded: dict[str, _Forwarded] = {}
        approvals.forwarder = self
        approvals.listener = self

    def adopt(self, args: tuple[Any, ...], stopped_because: str | None) -> None:
        """A task's run made a request: list it (or, the run having stopped,
        have the task close it at once)."""
        request = _parsed(ApprovalRequest, args)
        if request is None:
            return
        if stopped_because is not None:
            self.send(request.scope, SignalName.CLOSE_APPROVALS, {"reason": stopped_because})
            return
        self._approvals.gate.adopt(request)
        self._events.emit("approval_request", task_of(request), request.request_id)

    def closed(self, args: tuple[Any, ...]) -> None:
        """A task's request closed: stop listing it; record the decision the
        task's run recorded; answer the decision forwarded to it, if any."""
        closed = _parsed(ToolRequestClosed, args)
        if closed is None:
            return
        gate = self._approvals.gate
        if closed.decision is not None and gate.decision(closed.request_id) is None:
            gate.note(closed.decision)
            detail = f"{closed.request_id}: {closed.decision.decision} by "
            request = gate.get(closed.request_id) if gate.knows(closed.request_id) else None
            task = task_of(request) if request is not None else None
            self._events.emit("approval_decision", task, detail + closed.decision.reviewer.id)
        gate.close(closed.request_id)
        forwarded = self._forwarded.pop(closed.request_id, None)
        if forwarded is None:
            return
        record = closed.decision
        if record is not None and forwarded.is_this(record, gate.scope):
            forwarded.recorded.set_result(record)
        elif record is not None:
            self._refused(
                forwarded,
                ApprovalConflictError(
                    f"request {closed.request_id!r} was already decided at the task's run: "
                    f"{record.decision} by {record.reviewer.id} at {record.decided_at.isoformat()}"
                ),
            )
        else:
            why = closed.reason or "it closed the request"
            self._refused(
                forwarded, ApprovalUnknownRequestError(f"the task's run refused it: {why}")
            )

    def takes(self, request: ApprovalRequest) -> bool:
        """``DecisionForwarder``: a decision on a task's request goes to the
        task's run (from ``_patches.TOOL_DECISIONS_AT_THE_TASK`` on; before it, this run
        recorded it and ``forward`` sent it on)."""
        return request.scope != self._approvals.gate.scope and _patches.patched(
            _patches.TOOL_DECISIONS_AT_THE_TASK
        )

    def check(self, decision: Decision) -> None:
        """``DecisionForwarder``: one decision on its way per request; a later
        one would lose to it, or to the decision that beat it."""
        forwarded = self._forwarded.get(decision.request_id)
        if forwarded is not None:
            earlier = forwarded.decision
            raise ApprovalConflictError(
                f"request {decision.request_id!r} has a decision on its way to the task's run: "
                f"{earlier.decision} by {earlier.reviewer.id}"
            )

    def send_decision(
        self, request: ApprovalRequest, decision: Decision, source: DecisionSource
    ) -> asyncio.Future[ApprovalDecision]:
        """``DecisionForwarder``: send ``decision`` to the task's run; nothing
        is recorded here until the task's run says what it recorded."""
        forwarded = _Forwarded(request, decision, source)
        self._forwarded[request.request_id] = forwarded
        payload = ForwardedDecision(
            decision=decision, source=source, forwarded_by=self._approvals.gate.scope
        )

        def undelivered() -> None:
            self._unanswered(request.request_id, "the task's run is not running")

        self.send(request.scope, SignalName.FORWARDED_DECISION, payload, undelivered)
        return forwarded.recorded

    def _refused(self, forwarded: _Forwarded, err: ApprovalError) -> None:
        if forwarded.source == "signal":
            # no one awaits a signal's answer: the refusal is a run event
            request_id = forwarded.request.request_id
            self._events.emit(
                "approval_refused", task_of(forwarded.request), f"{request_id}: {err}"
            )
            forwarded.recorded.cancel()
        else:
            forwarded.recorded.set_exception(err)

    def _unanswered(self, request_id: str, why: str) -> None:
        forwarded = self._forwarded.pop(request_id, None)
        if forwarded is not None:
            self._approvals.gate.close(request_id)
            err = ApprovalUnknownRequestError(
                f"request {request_id!r} was closed without a decision: {why}"
            )
            self._refused(forwarded, err)

    def decided(self, request: ApprovalRequest, record: ApprovalDecision) -> None:
        """``DecisionListener`` of a team run from before
        ``_patches.TOOL_DECISIONS_AT_THE_TASK``: a decision recorded here on a task's
        request goes to the task's run, which applies it."""
        if request.scope == self._approvals.gate.scope:
            return
        decision = Decision(
            request_id=record.request_id,
            request_hash=record.request_hash,
            decision=record.decision,
            reviewer=record.reviewer,
            comment=record.comment,
        )
        self.send(request.scope, SignalName.DECIDE, decision)

    def settled(self, child: str) -> None:
        """The task's run ``child`` ended: its requests are no longer open."""
        for request in [r for r in self._approvals.gate.open if r.scope == child]:
            self._approvals.gate.close(request.request_id)
        for forwarded in [f for f in self._forwarded.values() if f.request.scope == child]:
            self._unanswered(forwarded.request.request_id, "the task's run ended")

    def attempt_ended(self, child: str) -> None:
        """One attempt of a task, the run ``child``, ended: its requests are
        no longer open (a retry's are new ones), from ``_patches.TOOL_DECISIONS_AT_THE_TASK`` on."""
        listed = any(r.scope == child for r in self._approvals.gate.open)
        on_its_way = any(f.request.scope == child for f in self._forwarded.values())
        if (listed or on_its_way) and _patches.patched(_patches.TOOL_DECISIONS_AT_THE_TASK):
            self.settled(child)

    def close_all(self, reason: str) -> None:
        """The team run stopped: every task with an open request closes its requests."""
        scope = self._approvals.gate.scope
        for child in dict.fromkeys(r.scope for r in self._approvals.gate.open if r.scope != scope):
            self.send(child, SignalName.CLOSE_APPROVALS, {"reason": reason})


def _not_run(why: str) -> ToolCallOutput:
    return ToolCallOutput(content=f"not run: {why}", is_error=True)


def _parsed(model: type[M], args: tuple[Any, ...]) -> M | None:
    try:
        return model.model_validate(args[0]) if len(args) == 1 else None
    except ValidationError:
        workflow.logger.warning("ignored a malformed %s", model.__name__)
        return None
