"""What talks to a running ``TeamRun``: its queries (``state``, ``events``,
``shared_memory``, and the approvals' ``pending_approvals``), the ``abort``
signal, the approvals' ``decide`` signal and update, and the signals of its
tasks' runs (``tool_approval_request``, ``tool_approval_closed``,
``task_usage``). Each handler hands its payload to the run's collaborator
that owns it; every handler takes ``*args``, so a payload of the wrong arity
is refused, not a workflow task failed for good."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from oma.core.contracts.names import QueryName, SignalName
    from oma.core.rules.payload_fit import answered_events, fitted_result, sent_result
    from oma.core.rules.shared_memory import shared_memory
    from oma.core.rules.task_graph import TaskGraph
    from oma.core.rules.team_run_state import RunStop, StopKind
    from oma.core.schema import limits
    from oma.core.schema.run_events import RunEvent
    from oma.core.schema.run_state import TeamRunState
    from oma.workflows._approval_waits import ApprovalHandlers
    from oma.workflows._budget import RunSpending
    from oma.workflows._events import RunEvents
    from oma.workflows._tool_gate import AdoptedToolRequests


class TeamRunHandlers(ApprovalHandlers):
    """The handlers of ``TeamRun``, over the parts of the run it sets up in
    its ``__init__`` (declared here), its ``stop_with`` and its
    ``_stop_if_over_budget``."""

    state: TeamRunState
    _events: RunEvents
    _graph: TaskGraph
    _stop: RunStop
    _spending: RunSpending
    _tool_requests: AdoptedToolRequests
    _in_flight: dict[str, asyncio.Task[None]]
    _stored: bool
    """The run's payloads go to a payload store (``_payload_store.stored``)."""
    stop_with: Callable[[StopKind, str], None]
    """Stop the run early: ``TeamRun.stop_with``."""
    _stop_if_over_budget: Callable[[], None]
    """Stop the run if a budget is used up: ``TeamRun._stop_if_over_budget``."""

    @workflow.query(name=QueryName.STATE)
    def state_query(self) -> dict[str, Any]:
        """The run so far, a ``TeamRunResult``'s JSON: every task's status and
        output, usage, decisions; within the run's budget as the run's result
        is (``payload_fit.sent_result``: outputs kept by reference,
        ``output_ref``, while the whole would not fit)."""
        return sent_result(self.state.result, workflow.info().workflow_id, stored=self._stored)

    @workflow.query(name=QueryName.EVENTS)
    def events(self, after_seq: int = -1) -> list[RunEvent]:
        """The run's events with ``seq`` above ``after_seq`` (all by default),
        oldest first; the latest ``EVENTS_KEPT`` are kept (their details cut
        if they would pass the payload limit: ``payload_fit.answered_events``)."""
        return answered_events(self._events.log.after(after_seq), stored=self._stored)

    @workflow.query(name=QueryName.SHARED_MEMORY)
    def shared_memory(self) -> dict[str, str]:
        """The run's shared memory: ``<agent>/task:<id>:result`` -> output, so
        far; the outputs the ``state`` query keeps by reference read as where
        they are (``shared_memory``)."""
        run_id = workflow.info().workflow_id
        return shared_memory(fitted_result(self.state.result, run_id, stored=self._stored).tasks)

    @workflow.signal(name=SignalName.ABORT)
    def abort(self, *args: Any) -> None:
        """``{reason}`` (optional): stop dispatching, let tasks in flight
        settle, skip the rest and the synthesis; the run ends
        ``cancelled``. Any payload aborts; a ``reason`` is recorded, cut to
        ``MAX_REASON_CHARS`` (the run carries it and returns it)."""
        raw = args[0] if args else None
        reason = raw.get("reason") if isinstance(raw, dict) else None
        if not self._stop.stopped:
            said = limits.cut_text(str(reason or "abort signal"), limits.MAX_REASON_CHARS)
            self._events.emit("abort", detail=said)
            self.stop_with("aborted", f"aborted: {said}")

    def _closed_because(self) -> str:
        return self._stop.reason

    def _task_graph(self) -> TaskGraph | None:
        return self._graph

    @workflow.signal(name=SignalName.TOOL_APPROVAL_REQUEST)
    def tool_approval_request(self, *args: Any) -> None:
        """From a task's ``AgentRun``: a gated tool call waits; listed here too."""
        self._tool_requests.adopt(args, self._stop.reason if self._stop.stopped else None)

    @workflow.signal(name=SignalName.TOOL_APPROVAL_CLOSED)
    def tool_approval_closed(self, *args: Any) -> None:
        """From a task's ``AgentRun``: one of its tool requests closed."""
        self._tool_requests.closed(args)

    @workflow.signal(name=SignalName.TASK_USAGE)
    def task_usage(self, *args: Any) -> None:
        """From a task's ``AgentRun``: its usage so far (``UsageReport``),
        answered with what the run may still spend (its ``budget`` signal),
        or what it used as it was cancelled."""
        report = self._spending.reported(args[0] if args else None, self._in_flight)
        if report is not None:
            self._stop_if_over_budget()
            self._spending.answer(report)
