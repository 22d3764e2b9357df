"""The signals between a task's ``AgentRun`` and its ``TeamRun`` about the
task's tool requests (``oma/workflows/_tool_gate.py``): one closed
(``tool_approval_closed``), a decision taken at the team run
(``forwarded_decision``)."""

from __future__ import annotations

from pydantic import BaseModel

from oma.core.schema.approvals import ApprovalDecision, Decision, DecisionSource


class ToolRequestClosed(BaseModel):
    """Sent by a task's run to its team run: a tool request is closed, with
    the decision it got (``None``: none; ``reason``: why a decision the team
    run forwarded was refused)."""

    request_id: str
    decision: ApprovalDecision | None = None
    reason: str | None = None


class ForwardedDecision(BaseModel):
    """Sent by a team run to a task's run (signal ``forwarded_decision``): a
    reviewer's decision on one of its tool requests, taken at the team run
    ``forwarded_by`` through the ``decide`` signal or update (``source``)."""

    decision: Decision
    source: DecisionSource
    forwarded_by: str
