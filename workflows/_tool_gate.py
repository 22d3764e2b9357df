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
the team run's id can see and answer them there; the team run forwards the
decision to the task's run, and tells it to close its requests when the team
run stops.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from oma.core.approval_gate import task_of
    from oma.core.approvals import ApprovalDecision, ApprovalRequest, Decision
    from oma.core.tools import ToolCallInput, ToolCallOutput
    from oma.workflows._approval_waits import ApprovalWaits, Emit


M = TypeVar("M", bound=BaseModel)


class ToolRequestClosed(BaseModel):
    """Sent by a task's run to its team run: a tool request is closed, with
    the decision it got (``None``: none)."""

    request_id: str
    decision: ApprovalDecision | None = None


class _Signals:
    """Signals to other runs sent in the background, awaited before the run ends."""

    def __init__(self) -> None:
        self._sending: set[asyncio.Task[None]] = set()

    def send(self, workflow_id: str, signal: str, payload: Any) -> None:
        handle = workflow.get_external_workflow_handle(workflow_id)
        task = asyncio.create_task(handle.signal(signal, payload))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def flush(self) -> None:
        """Return once every signal sent so far has been delivered (or failed)."""
        if self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)


class ToolGate(_Signals):
    """The gated tool calls of one ``AgentRun`` (``task_id``: the team task it
    runs, if any), over the run's ``approvals``."""

    def __init__(self, approvals: ApprovalWaits, task_id: str | None = None) -> None:
        super().__init__()
        self._approvals = approvals
        self.task_id = task_id
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
        request_id = "-".join(["tool", *([self.task_id] if self.task_id else []), str(self._count)])
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
        self._tell_parent("tool_approval_request", self._approvals.gate.get(request_id))
        await self._approvals.decided(request_id, lambda: self.closed_because is not None)
        decision = self._approvals.gate.decision(request_id)
        if decision is None:
            return _not_run(f"its approval request closed: {self.closed_because}")
        if decision.decision == "reject":
            comment = f": {decision.comment}" if decision.comment else ""
            return _not_run(f"the reviewer {decision.reviewer.id} rejected it{comment}")
        return None

    def close(self, reason: str) -> None:
        """The team run stopped: no gated call runs any more."""
        if self.closed_because is None:
            self.closed_because = reason
            self._approvals.close_all()

    def decided(self, request: ApprovalRequest, record: ApprovalDecision) -> None:
        """``ApprovalWaits.on_decided``: the team run learns the decision
        (taken here, forwarded, or ``on_timeout``) and closes the request."""
        if request.boundary == "tool":
            closed = ToolRequestClosed(request_id=request.request_id, decision=record)
            self._tell_parent("tool_approval_closed", closed)

    def _tell_parent(self, signal: str, payload: BaseModel) -> None:
        parent = workflow.info().parent
        if parent is not None:
            self.send(parent.workflow_id, signal, payload)


class AdoptedToolRequests(_Signals):
    """A team run's view of its tasks' tool requests (held in its own gate)."""

    def __init__(self, approvals: ApprovalWaits, emit: Emit) -> None:
        super().__init__()
        self._approvals = approvals
        self._emit = emit

    def adopt(self, args: tuple[Any, ...], stopped_because: str | None) -> None:
        """A task's run made a request: list it (or, the run having stopped,
        have the task close it at once)."""
        request = _parsed(ApprovalRequest, args)
        if request is None:
            return
        if stopped_because is not None:
            self.send(request.scope, "close_approvals", {"reason": stopped_because})
            return
        self._approvals.gate.adopt(request)
        self._emit("approval_request", task_of(request), request.request_id)

    def closed(self, args: tuple[Any, ...]) -> None:
        """A task's request closed: stop listing it; record a decision taken there."""
        closed = _parsed(ToolRequestClosed, args)
        if closed is None:
            return
        gate = self._approvals.gate
        if closed.decision is not None and gate.decision(closed.request_id) is None:
            gate.note(closed.decision)
            detail = f"{closed.request_id}: {closed.decision.decision} by "
            request = gate.get(closed.request_id) if gate.knows(closed.request_id) else None
            task = task_of(request) if request is not None else None
            self._emit("approval_decision", task, detail + closed.decision.reviewer.id)
        gate.close(closed.request_id)

    def forward(self, request: ApprovalRequest, record: ApprovalDecision) -> None:
        """``ApprovalWaits.on_decided`` of a team run: a decision on a task's
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
        self.send(request.scope, "decide", decision)

    def settled(self, child: str) -> None:
        """The task's run ``child`` ended: its requests are no longer open."""
        for request in [r for r in self._approvals.gate.open if r.scope == child]:
            self._approvals.gate.close(request.request_id)

    def close_all(self, reason: str) -> None:
        """The team run stopped: every task with an open request closes its requests."""
        scope = self._approvals.gate.scope
        for child in dict.fromkeys(r.scope for r in self._approvals.gate.open if r.scope != scope):
            self.send(child, "close_approvals", {"reason": reason})


def _not_run(why: str) -> ToolCallOutput:
    return ToolCallOutput(content=f"not run: {why}", is_error=True)


def _parsed(model: type[M], args: tuple[Any, ...]) -> M | None:
    try:
        return model.model_validate(args[0]) if len(args) == 1 else None
    except ValidationError:
        workflow.logger.warning("ignored a malformed %s", model.__name__)
        return None
