"""A run's approval requests as the editor's permission prompts.

Every open request of the run (``pending_approvals``: a plan, a round, a
dispatch, a tool call) becomes one ``session/request_permission`` with the
options ``allow_once``, ``allow_always``, ``reject_once`` and
``reject_always``. The answer is sent as the run's ``decide`` update with
the editor's user as reviewer. ``allow_always`` / ``reject_always`` also
answer every later request of the same boundary and agent in this session
(``rule_key``) without asking. A request decided elsewhere (``oma approve``,
another client, ``on_timeout``) is withdrawn from the editor
(``$/cancel_request``) and its tool call says who decided. A client that cannot
ask (it answers ``session/request_permission`` with an error) is told in a
message to answer with ``/approve`` or ``/reject``; the request stays
``pending`` in the run until then. Once the editor cancelled the prompt
turn (``session/cancel``), nothing it answers decides anything, nor does a
session rule, and a request opened later is not asked: the run is being
stopped, and an "allow" sent after the stop button must not start work.

The request's tool call: a dispatch is asked on its task's tool call (the task
id); a plan, a round or a tool call gets a tool call of its own,
``approval:<request id>``, which ends ``completed`` (approved) or
``failed`` (rejected).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from acp import RequestError, start_tool_call, text_block, tool_content, update_tool_call
from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate, ToolKind
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from oma.client.approvals import send_decision
from oma.core.schema.approvals import ApprovalDecision, DecisionValue, PendingApproval, Reviewer
from oma.core.schema.errors import (
    ApprovalConflictError,
    ApprovalStaleDecisionError,
    ApprovalUnknownRequestError,
)
from oma.core.schema.limits import cut_text

logger = logging.getLogger(__name__)

TOOL_CALL_TEXT_CHARS = 4000
"""The most of a request's content its tool call shows, in characters."""

OPTIONS = (
    ("allow_once", "Allow once"),
    ("allow_always", "Allow always"),
    ("reject_once", "Reject once"),
    ("reject_always", "Reject always"),
)
"""The options of every permission prompt: (ACP ``PermissionOptionKind``, its
label); the option's id is its kind."""

_TOOL_KINDS: dict[str, ToolKind] = {
    "bash": "execute",
    "file_write": "edit",
    "file_edit": "edit",
    "file_read": "read",
    "glob": "search",
    "grep": "search",
}

Send = Callable[[Any], Awaitable[None]]


def rule_key(request: PendingApproval) -> tuple[str, str]:
    """What an ``_always`` answer covers: the request's boundary and agent
    (the coordinator for a plan, the task's assignee for a dispatch, the
    calling agent for a tool call; a round has none)."""
    content = request.content if isinstance(request.content, dict) else {}
    agent = {
        "plan": "coordinator",
        "round": "",
        "dispatch": str(content.get("assignee") or ""),
        "tool": str(content.get("agent") or ""),
    }[request.boundary]
    return request.boundary, agent


def tool_call_id_of(request: PendingApproval) -> str:
    """The tool call a request is asked on (module docstring)."""
    content = request.content if isinstance(request.content, dict) else {}
    if request.boundary == "dispatch" and content.get("id"):
        return str(content["id"])
    return f"approval:{request.request_id}"


def describe(request: PendingApproval, kinds: dict[str, ToolKind]) -> tuple[str, ToolKind, str]:
    """``(title, kind, text)`` of a request's tool call, for a person."""
    content = request.content if isinstance(request.content, dict) else {}
    if request.boundary == "plan":
        tasks = content.get("tasks") or []
        lines = [_task_line(n, t) for n, t in enumerate(tasks, 1)]
        return f"Approve the plan ({len(tasks)} tasks)", "think", "\n".join(lines)
    if request.boundary == "round":
        nxt = content.get("next") or []
        lines = [_task_line(n, t) for n, t in enumerate(nxt, 1)]
        done = content.get("completed") or []
        if done:
            lines.append(f"after {len(done)} completed: " + ", ".join(_name(t) for t in done))
        return f"Approve round {content.get('round')} ({len(nxt)} tasks)", "think", "\n".join(lines)
    if request.boundary == "dispatch":
        title = f"Start {_name(content)}"
        lines = [str(content.get("description") or "")]
        for up in request.upstream or []:
            preview = up.preview if up.preview is not None else f"(kept in {up.output_ref})"
            lines.append(f"\n{up.task_id} ({up.title}) by {up.assignee}:\n{preview}")
        kind = kinds.get(str(content.get("assignee") or ""), "other")
        return title, kind, "\n".join(lines).strip()
    tool = str(content.get("tool") or "tool")
    given = content.get("input")
    shown = json.dumps(given, ensure_ascii=False, indent=2) if given is not None else ""
    title = f"{content.get('agent')}: {tool}" + (
        f" in task {content['task']}" if content.get("task") else ""
    )
    return title, _TOOL_KINDS.get(tool, "other"), shown


def _task_line(n: int, task: Any) -> str:
    if not isinstance(task, dict):
        return f"{n}. {task}"
    after = task.get("depends_on") or []
    deps = f" (after {', '.join(map(str, after))})" if after else ""
    return f"{n}. {_name(task)}{deps}"


def _name(task: Any) -> str:
    if not isinstance(task, dict):
        return str(task)
    who = f" ({task['assignee']})" if task.get("assignee") else ""
    return f"{task.get('title') or task.get('id')}{who}"


def decided_text(decision: ApprovalDecision | None) -> str:
    """What a request's tool call says once it closed."""
    if decision is None:
        return "closed without a decision (the run stopped)"
    verb = "approved" if decision.decision == "approve" else "rejected"
    who = decision.reviewer.display_name or decision.reviewer.id
    how = " (on_timeout)" if decision.source == "timeout" else ""
    why = f": {decision.comment}" if decision.comment else ""
    return f"{verb} by {who}{how}{why}"


@dataclass
class Rules:
    """A session's ``allow_always`` / ``reject_always`` answers, and whether
    its client can ask at all."""

    always: dict[tuple[str, str], DecisionValue] = field(default_factory=dict)
    can_ask: bool = True


@dataclass
class _Ask:
    request: PendingApproval
    task: asyncio.Task[None] | None = None
    rpc_id: int | None = None


class PermissionRequests:
    """The permission prompts of one run on one connection (module docstring).

    ``sync`` takes the run's open requests after each change; ``close``
    withdraws every prompt still open. ``conn`` is the SDK's
    ``AgentSideConnection``; ``send`` sends one session update; ``deciding``
    says whether the editor's answers may still decide (false once it
    cancelled the prompt turn)."""

    def __init__(
        self,
        conn: Any,
        session_id: str,
        handle: WorkflowHandle[Any, Any],
        reviewer: Reviewer,
        rules: Rules,
        kinds: dict[str, ToolKind],
        send: Send,
        shown_tool_calls: Callable[[], set[str]],
        deciding: Callable[[], bool] = lambda: True,
    ) -> None:
        self.conn = conn
        self.deciding = deciding
        self.session_id = session_id
        self.handle = handle
        self.reviewer = reviewer
        self.rules = rules
        self.kinds = kinds
        self.send = send
        self.shown_tool_calls = shown_tool_calls
        self.asks: dict[str, _Ask] = {}
        self.seen: dict[str, PendingApproval] = {}
        self.told: set[str] = set()

    async def sync(self, pending: list[PendingApproval], decisions: list[ApprovalDecision]) -> None:
        """Ask each new request, answer it by a session rule, or tell how to
        answer it; close the tool calls of requests no longer open."""
        open_ids = {r.request_id for r in pending}
        for request_id in [r for r in self.seen if r not in open_ids]:
            request = self.seen.pop(request_id)
            decision = next((d for d in decisions if d.request_id == request_id), None)
            await self._closed(request, decision)
        for request in pending:
            if request.request_id in self.seen:
                continue
            self.seen[request.request_id] = request
            await self._open(request)

    async def close(self) -> None:
        """Withdraw every prompt still open (the prompt turn or the
        connection ends; the requests stay open in the run)."""
        for request_id in list(self.asks):
            await self._withdraw(request_id)

    # -- one request ----------------------------------------------------------

    async def _open(self, request: PendingApproval) -> None:
        title, kind, text = describe(request, self.kinds)
        call_id = tool_call_id_of(request)
        content = [tool_content(text_block(cut_text(text, TOOL_CALL_TEXT_CHARS)))] if text else None
        if call_id not in self.shown_tool_calls():
            await self.send(
                start_tool_call(
                    call_id,
                    title,
                    kind=kind,
                    status="pending",
                    content=content,
                    raw_input=request.content,
                )
            )
        if not self.deciding():
            return  # (the turn was cancelled: the run is being stopped)
        rule = self.rules.always.get(rule_key(request))
        if rule is not None:
            await self._decide(request, rule, "answered by an 'always' choice of this session")
            return
        if not self.rules.can_ask:
            await self._tell(request, title)
            return
        ask = _Ask(request)
        ask.task = asyncio.create_task(self._ask(ask, call_id, title, kind, content))
        self.asks[request.request_id] = ask

    async def _ask(
        self, ask: _Ask, call_id: str, title: str, kind: str, content: list[Any] | None
    ) -> None:
        request = ask.request
        options = [PermissionOption(option_id=k, name=name, kind=k) for k, name in OPTIONS]
        call = ToolCallUpdate(
            tool_call_id=call_id,
            title=title,
            kind=kind,
            status="pending",
            content=content,
            raw_input=request.content,
        )
        # the JSON-RPC id the SDK gives this request, read as it is taken
        # (no await in between): what $/cancel_request names to withdraw it
        ask.rpc_id = getattr(getattr(self.conn, "_conn", None), "_next_request_id", None)
        try:
            response = await self.conn.request_permission(
                session_id=self.session_id, tool_call=call, options=options
            )
        except RequestError as err:
            logger.info("session/request_permission refused (%s): asking in messages", err)
            self.rules.can_ask = False
            await self._tell(request, title)
            return
        except ValueError as err:  # pydantic's: an answer that is not a permission outcome
            logger.warning("session/request_permission answered with no outcome: %s", err)
            await self._tell(request, title, "The editor's answer was not one of the options")
            return
        finally:
            self.asks.pop(request.request_id, None)
        outcome = response.outcome
        if not isinstance(outcome, AllowedOutcome):
            return  # cancelled: the request stays open in the run (/approve)
        chosen = outcome.option_id
        if chosen not in {kind for kind, _ in OPTIONS}:
            logger.warning("session/request_permission answered %r, not an option", chosen)
            await self._tell(
                request, title, f"The editor's answer {chosen[:100]!r} was not one of the options"
            )
            return
        value: DecisionValue = "approve" if chosen.startswith("allow") else "reject"
        if chosen.endswith("_always"):
            self.rules.always[rule_key(request)] = value
        await self._decide(request, value, None)

    async def _decide(
        self, request: PendingApproval, value: DecisionValue, comment: str | None
    ) -> None:
        if not self.deciding():
            logger.info(
                "%s of %s not sent: the editor cancelled the prompt turn", value, request.request_id
            )
            return
        try:
            await send_decision(self.handle, request, value, self.reviewer, comment)
        except (ApprovalConflictError, ApprovalUnknownRequestError) as err:
            logger.info("%s of %s not recorded: %s", value, request.request_id, err)
        except ApprovalStaleDecisionError:
            self.seen.pop(request.request_id, None)  # asked again with its new content
        except RPCError as err:
            logger.warning("decide %s of %s: %s", value, request.request_id, err)
            await self.send(
                _message(f"Your {value} of {request.request_id} was not recorded: {err}")
            )

    async def _tell(
        self, request: PendingApproval, title: str, why: str = "This editor cannot ask"
    ) -> None:
        if request.request_id in self.told:
            return
        self.told.add(request.request_id)
        rid = request.request_id
        await self.send(
            _message(
                f"Approval needed: {title} ({rid}). {why}; answer with "
                f"/approve {rid} or /reject {rid}."
            )
        )

    async def _closed(self, request: PendingApproval, decision: ApprovalDecision | None) -> None:
        if request.request_id in self.asks:
            await self._withdraw(request.request_id)
        call_id = tool_call_id_of(request)
        if call_id.startswith("approval:"):
            approved = decision is not None and decision.decision == "approve"
            await self.send(
                update_tool_call(
                    call_id,
                    status="completed" if approved else "failed",
                    content=[tool_content(text_block(decided_text(decision)))],
                )
            )

    async def _withdraw(self, request_id: str) -> None:
        ask = self.asks.pop(request_id, None)
        if ask is None:
            return
        if ask.task is not None:
            ask.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ask.task
        inner = getattr(self.conn, "_conn", None)
        if ask.rpc_id is not None and inner is not None:
            with contextlib.suppress(Exception):
                await inner.send_notification("$/cancel_request", {"requestId": ask.rpc_id})


def _message(text: str) -> Any:
    from acp import update_agent_message_text

    return update_agent_message_text(text + "\n")
