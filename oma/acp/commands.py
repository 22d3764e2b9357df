"""The session's slash commands: ``/status``, ``/abort``, ``/approve``,
``/reject``, ``/retry``.

A prompt whose text starts with one of them is that command, run against
the session's run (the ``TeamRun`` of the session's id), whether a run is
going or not; its answer is a message, and the turn ends ``end_turn``.
``/retry [TASK ...]`` is the exception: it starts a run (a fork of the
latest, ``oma.acp.retry``) and its turn follows that run as a
prompt's does. Any other prompt is a goal.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from acp.schema import AvailableCommand, AvailableCommandInput, UnstructuredCommandInput
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError, RPCStatusCode

from oma.acp.permission_requests import decided_text
from oma.acp.prompt import typed_prompt
from oma.client.approvals import pending, send_decision
from oma.core.contracts.names import QueryName, SignalName
from oma.core.schema.approvals import DecisionValue, Reviewer
from oma.core.schema.errors import OMAError
from oma.core.schema.results import TeamRunResult
from oma.core.schema.usage import usd

QUERY_TIMEOUT = timedelta(seconds=10)


@dataclass(frozen=True)
class Command:
    """A command as ``available_commands_update`` offers it."""

    name: str
    description: str
    hint: str | None = None

    def available(self) -> AvailableCommand:
        given = (
            AvailableCommandInput(root=UnstructuredCommandInput(hint=self.hint))
            if self.hint
            else None
        )
        return AvailableCommand(name=self.name, description=self.description, input=given)


COMMANDS = (
    Command("status", "The run's status: its tasks, open approvals, tokens and cost."),
    Command(
        "abort", "Stop the run gracefully: nothing new starts, tasks in flight finish.", "reason"
    ),
    Command(
        "approve",
        "Approve an open approval request (the only one, or the one named).",
        "[request id] [comment]",
    ),
    Command(
        "reject",
        "Reject an open approval request (the only one, or the one named).",
        "[request id] [comment]",
    ),
    Command(
        "retry",
        "Run the tasks named and everything downstream of them again, keeping the rest "
        "(none named: the tasks that did not complete).",
        "[task id ...]",
    ),
)


def parse(text: str) -> tuple[str, list[str]] | None:
    """``(command, words)`` when ``text`` is one of ``COMMANDS``, else ``None``."""
    words = text.strip().split()
    if not words or not words[0].startswith("/"):
        return None
    name = words[0][1:]
    if name not in {c.name for c in COMMANDS}:
        return None
    return name, words[1:]


async def run_command(
    client: Client, workflow_id: str, name: str, words: list[str], reviewer: Reviewer
) -> str:
    """Run the command ``name`` (any but ``retry``, which starts a run:
    ``TeamAgent``) with ``words`` on the ``TeamRun`` ``workflow_id``; what
    to tell the user (an error included: a command never fails the turn)."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        if name == "status":
            return await _status(handle)
        if name == "abort":
            reason = " ".join(words) or "/abort from the editor"
            await handle.signal(SignalName.ABORT, {"reason": reason}, rpc_timeout=QUERY_TIMEOUT)
            return f"Aborting {workflow_id}: nothing new starts; tasks in flight finish."
        value: DecisionValue = "approve" if name == "approve" else "reject"
        return await _decide(handle, value, words, reviewer)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return f"No run in this session yet ({workflow_id}): send a goal first."
        return f"/{name} failed: {err}"
    except (WorkflowQueryFailedError, WorkflowQueryRejectedError) as err:
        # the run could not answer (e.g. its state over Temporal's payload limit)
        return f"/{name} failed: the run could not answer: {err}"
    except OMAError as err:
        return f"/{name}: {err}"


async def _status(handle: Any) -> str:
    described = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
    state: TeamRunResult = await handle.query(
        QueryName.STATE, result_type=TeamRunResult, rpc_timeout=QUERY_TIMEOUT
    )
    lines = [f"Run {handle.id}: {state.status} (Temporal: {described.status.name.lower()})"]
    # the goal as typed: a follow-up's goal leads with the previous run's context
    goal = typed_prompt(await described.memo()) or state.goal
    if goal:
        lines.append(f"Goal: {goal.splitlines()[0][:200]}")
    for task in state.tasks:
        who = f" · {task.assignee}" if task.assignee else ""
        lines.append(f"- {task.id} {task.title}{who}: {task.status.value}")
    open_requests = await pending(handle, QUERY_TIMEOUT) if state.status == "running" else []
    for request in open_requests:
        lines.append(f"Waiting for approval: {request.request_id} ({request.boundary})")
    usage = state.total_token_usage
    cost = usd(state.total_cost_usd) + (" + unknown" if state.cost_unknown else "")
    lines.append(f"Tokens: {usage.total_tokens}; cost: {cost}")
    if state.error:
        lines.append(f"Stopped: {state.error_code}: {state.error}")
    return "\n".join(lines)


async def _decide(handle: Any, value: DecisionValue, words: list[str], reviewer: Reviewer) -> str:
    requests = await pending(handle, QUERY_TIMEOUT)
    ids = [r.request_id for r in requests]
    if words and words[0] in ids:
        request = requests[ids.index(words[0])]
        comment = " ".join(words[1:]) or None
    elif len(requests) == 1:
        request = requests[0]
        comment = " ".join(words) or None
    elif not requests:
        return "No approval request is open."
    else:
        verb = "approve" if value == "approve" else "reject"
        return f"Name the request: /{verb} ID, one of {', '.join(ids)}."
    decision = await send_decision(handle, request, value, reviewer, comment, QUERY_TIMEOUT)
    return f"Recorded: {request.request_id} {decided_text(decision)}."
