"""What an editor shows of a team run, as ACP session updates.

A run's ``state`` (a ``TeamRunResult``) becomes:

- a ``plan``: one entry per task, in the run's order, ``pending`` /
  ``in_progress`` / ``completed`` (a failed or skipped task is ``completed``
  with the word in its entry: a plan entry has no failed state; so is a
  task a fork kept, "reused");
- one tool call per task (``toolCallId`` = the task id), its ``kind`` from
  its agent (``agent_kinds``), its ``status`` ``pending`` (waiting on
  dependencies or an approval) → ``in_progress`` → ``completed`` or
  ``failed`` (a skipped task too, saying so), its ``content`` who decided
  its dispatch approval once decided, the latest line of output while it
  runs, then its output (or its error; a task a fork kept: the run it was
  reused from, then its output);
- a ``usage_update``: the run's tokens (``used``), its token budget or,
  without one, the tokens used (``size``), and its known cost in USD.

``RunPlan`` remembers what was sent on this connection and gives only what
changed, so the same code draws a new run, and a run reattached with
``session/load``: there every tool call is new.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from acp import plan_entry, start_tool_call, text_block, tool_content, update_plan, update_tool_call
from acp.schema import Cost, ToolKind, UsageUpdate

from oma.core.schema.limits import cut_text
from oma.core.schema.results import TeamRunResult
from oma.core.schema.task import TaskState, TaskStatus

TOOL_CALL_OUTPUT_CHARS = 20_000
"""The most of a task's output its tool call shows, in characters (the rest is
in ``oma show RUN --task ID``)."""

ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]
PlanStatus = Literal["pending", "in_progress", "completed"]

_TOOL_CALL_STATUS: dict[TaskStatus, ToolCallStatus] = {
    TaskStatus.PENDING: "pending",
    TaskStatus.BLOCKED: "pending",
    TaskStatus.AWAITING_APPROVAL: "pending",
    TaskStatus.IN_PROGRESS: "in_progress",
    TaskStatus.COMPLETED: "completed",
    TaskStatus.FAILED: "failed",
    TaskStatus.SKIPPED: "failed",
}

_PLAN_STATUS: dict[ToolCallStatus, PlanStatus] = {
    "pending": "pending",
    "in_progress": "in_progress",
    "completed": "completed",
    "failed": "completed",
}

READ_TOOLS = frozenset({"file_read", "glob", "grep", "readonly"})


def agent_kinds(team: dict[str, Any] | None) -> dict[str, ToolKind]:
    """Each agent's ACP ``ToolKind`` (a team file's JSON): ``execute`` for a
    process, ``edit`` for an ACP agent or an LLM agent with tools that write
    or run, ``read`` for one with read-only tools, ``think`` for one without
    tools."""
    kinds: dict[str, ToolKind] = {}
    for agent in (team or {}).get("agents", []):
        backend = agent.get("backend") or {}
        tools = set(agent.get("tools") or []) | {
            s.get("name") for s in agent.get("mcp_servers") or []
        }
        kind: ToolKind
        if backend.get("kind") == "process":
            kind = "execute"
        elif backend.get("kind") == "acp":
            kind = "edit"
        elif not tools:
            kind = "think"
        else:
            kind = "read" if tools <= READ_TOOLS else "edit"
        kinds[str(agent.get("name"))] = kind
    return kinds


@dataclass(frozen=True)
class ToolCall:
    """A task's tool call, as the editor should show it now."""

    title: str
    kind: ToolKind
    status: ToolCallStatus
    text: str


def tool_call_of(
    task: TaskState, kinds: dict[str, ToolKind], latest: str = "", decided: str = ""
) -> ToolCall:
    """The tool call of ``task``; ``latest`` is its latest line of output while it
    runs, ``decided`` who decided its dispatch approval (what it says until
    then: the request's prompt may be withdrawn, decided elsewhere)."""
    title = f"{task.title or task.id} ({task.assignee})" if task.assignee else task.title or task.id
    status = _TOOL_CALL_STATUS[task.status]
    if task.status == TaskStatus.COMPLETED:
        text = task.output if task.output is not None else _by_reference(task)
        if task.reused_from is not None:
            text = f"{_reused(task)}\n\n{text}"
    elif task.status == TaskStatus.FAILED:
        text = f"failed: {task.error_code or 'error'}: {task.error or ''}".rstrip(": ")
    elif task.status == TaskStatus.SKIPPED:
        text = _skipped(task.error)
    elif task.status == TaskStatus.AWAITING_APPROVAL:
        text = decided or "waiting for approval"
    elif task.status == TaskStatus.IN_PROGRESS:
        text = latest or decided
    else:
        text = decided
    return ToolCall(
        title,
        kinds.get(task.assignee or "", "other"),
        status,
        cut_text(text, TOOL_CALL_OUTPUT_CHARS),
    )


def _skipped(error: str | None) -> str:
    """What a skipped task's tool call says: its reason, which the run writes
    starting ``skipped: `` (``oma.core.rules.task_graph.skip_reason``)."""
    if not error:
        return "skipped"
    return error if error.startswith("skipped") else f"skipped: {error}"


def _by_reference(task: TaskState) -> str:
    return f"(the output, {task.output_bytes or 0} bytes, is in the result of {task.output_ref})"


def _reused(task: TaskState) -> str:
    assert task.reused_from is not None
    origin = task.reused_from
    return f"(reused from run {origin.run_id}, task {origin.task_id}: not run again)"


def plan_of(state: TeamRunResult) -> list[tuple[str, PlanStatus]]:
    """The plan entries of ``state``: ``(content, status)`` per task."""
    entries: list[tuple[str, PlanStatus]] = []
    for task in state.tasks:
        status = _PLAN_STATUS[_TOOL_CALL_STATUS[task.status]]
        word = {TaskStatus.FAILED: " (failed)", TaskStatus.SKIPPED: " (skipped)"}.get(
            task.status, " (reused)" if task.reused_from is not None else ""
        )
        who = f" · {task.assignee}" if task.assignee else ""
        entries.append((f"{task.title or task.id}{who}{word}", status))
    return entries


def usage_of(state: TeamRunResult, token_budget: int | None) -> tuple[int, int, float]:
    """``(used, size, cost)`` of ``state``: tokens, the budget (else the tokens
    used), US dollars known."""
    used = state.total_token_usage.total_tokens
    return used, max(token_budget or used, used), round(state.total_cost_usd, 6)


@dataclass
class RunPlan:
    """What this connection has shown of one run's plan (ACP ``plan``): its
    entries, each task's tool call, the usage."""

    tool_calls: dict[str, ToolCall] = field(default_factory=dict)
    entries: list[tuple[str, PlanStatus]] | None = None
    usage: tuple[int, int, float] | None = None

    def plan_update(self, state: TeamRunResult) -> list[Any]:
        """A ``plan`` update when the plan changed (none before the run has tasks)."""
        entries = plan_of(state)
        if not entries or entries == self.entries:
            return []
        self.entries = entries
        return [update_plan(plan_entry(c, status=s) for c, s in entries)]

    def tool_call_updates(
        self, task: TaskState, kinds: dict[str, ToolKind], latest: str = "", decided: str = ""
    ) -> list[Any]:
        """A ``tool_call`` for a task not shown yet, a ``tool_call_update`` of
        what changed for one shown; nothing when nothing did (``tool_call_of``)."""
        call = tool_call_of(task, kinds, latest, decided)
        if task.status == TaskStatus.IN_PROGRESS and not call.text and task.id in self.tool_calls:
            call = ToolCall(call.title, call.kind, call.status, self.tool_calls[task.id].text)
        shown = self.tool_calls.get(task.id)
        if shown == call:
            return []
        self.tool_calls[task.id] = call
        content = [tool_content(text_block(call.text))] if call.text else None
        if shown is None:
            raw = {"task": task.id, "assignee": task.assignee, "description": task.description}
            return [
                start_tool_call(
                    task.id,
                    call.title,
                    kind=call.kind,
                    status=call.status,
                    content=content,
                    raw_input=raw,
                )
            ]
        return [
            update_tool_call(
                task.id,
                title=call.title if call.title != shown.title else None,
                status=call.status if call.status != shown.status else None,
                content=content if call.text != shown.text else None,
            )
        ]

    def usage_update(self, state: TeamRunResult, token_budget: int | None) -> list[Any]:
        """A ``usage_update`` when the run's tokens or cost changed."""
        usage = usage_of(state, token_budget)
        if usage == self.usage or (usage[0] == 0 and self.usage is None):
            return []
        self.usage = usage
        used, size, cost = usage
        return [
            UsageUpdate(
                session_update="usage_update",
                used=used,
                size=size,
                cost=Cost(amount=cost, currency="USD"),
            )
        ]


StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]

_STOPS: dict[str, StopReason] = {
    "BUDGET_EXCEEDED": "max_tokens",
    "COST_BUDGET_EXCEEDED": "max_tokens",
    "MAX_TURNS_EXCEEDED": "max_turn_requests",
    "RUN_TIMEOUT": "max_turn_requests",
}


def stop_reason(result: TeamRunResult | None, cancelled: bool) -> StopReason:
    """The ``stopReason`` of a prompt whose run ended with ``result``:
    ``cancelled`` after ``session/cancel`` (or an abort), ``refusal`` when a
    reviewer rejected the plan, a round or a dispatch, ``max_tokens`` when
    the token or cost budget stopped it, ``max_turn_requests`` when its
    time ran out (``options.timeout_s``), else ``end_turn`` (a failed task
    included: the final message says so)."""
    if cancelled or (result is not None and result.status == "cancelled"):
        return "cancelled"
    if result is None:
        return "end_turn"
    if result.status == "rejected":
        return "refusal"
    return _STOPS.get(result.error_code or "", "end_turn")
