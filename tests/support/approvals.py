"""Helpers for approval tests: a started ``TeamRun`` seen the way a reviewer
sees it, and the gated runs the tests start."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError

from oma.core.contracts.names import QueryName, SignalName, UpdateName
from oma.core.schema.approvals import ApprovalDecision, ApprovalRequest
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_events import RunEvent
from tests.support.runs import TASK_QUEUE, scripted, start_team, task, team_result

T = TypeVar("T")

WAIT_S = 15.0
"""How long a test waits for a run to reach a point before it fails."""


async def eventually(probe: Callable[[], Awaitable[T | None]], what: str, timeout_s: float) -> T:
    """Poll ``probe`` until it returns something other than ``None``; fail
    naming ``what`` after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.05)


def decision(
    request_id: str,
    request_hash: str,
    value: str = "approve",
    reviewer: str = "alice",
    comment: str | None = None,
) -> dict[str, Any]:
    """A ``decide`` payload, as a reviewer writes it."""
    payload: dict[str, Any] = {
        "request_id": request_id,
        "request_hash": request_hash,
        "decision": value,
        "reviewer": {"id": reviewer, "display_name": reviewer.capitalize()},
    }
    if comment is not None:
        payload["comment"] = comment
    return payload


def refusal_code(err: BaseException) -> str:
    """The ``ApplicationError`` type behind a refused ``decide`` update."""
    assert isinstance(err, WorkflowUpdateFailedError), repr(err)
    assert isinstance(err.cause, ApplicationError), repr(err.cause)
    return str(err.cause.type)


async def wait_for_file(path: Path, timeout_s: float = WAIT_S) -> str:
    """The text of ``path`` once a line of it is complete."""

    async def probe() -> str | None:
        text = path.read_text() if path.exists() else ""
        return text if text.endswith("\n") else None

    return await eventually(probe, f"{path} to be written", timeout_s)


class Run:
    """A started ``TeamRun``: its queries, and the reviewer's signals and updates."""

    def __init__(self, handle: WorkflowHandle[Any, TeamRunResult]) -> None:
        self.handle = handle
        self.id = handle.id

    async def pending(self) -> list[ApprovalRequest]:
        return await self.handle.query(
            QueryName.PENDING_APPROVALS, result_type=list[ApprovalRequest]
        )

    async def state(self) -> TeamRunResult:
        return await self.handle.query(QueryName.STATE, result_type=TeamRunResult)

    async def events(self) -> list[RunEvent]:
        return await self.handle.query(QueryName.EVENTS, result_type=list[RunEvent])

    async def request(self, request_id: str, timeout_s: float = WAIT_S) -> ApprovalRequest:
        """The open request ``request_id``, once the run has made it."""

        async def probe() -> ApprovalRequest | None:
            return next((r for r in await self.pending() if r.request_id == request_id), None)

        return await eventually(probe, f"approval request {request_id!r}", timeout_s)

    async def state_where(
        self, holds: Callable[[TeamRunResult], bool], what: str, timeout_s: float = WAIT_S
    ) -> TeamRunResult:
        """The run's state once ``holds`` is true of it."""

        async def probe() -> TeamRunResult | None:
            state = await self.state()
            return state if holds(state) else None

        return await eventually(probe, what, timeout_s)

    async def decide(
        self, request: ApprovalRequest, value: str = "approve", reviewer: str = "alice"
    ) -> ApprovalDecision:
        """Answer ``request`` with the ``decide`` update."""
        return await self.handle.execute_update(
            UpdateName.DECIDE,
            decision(request.request_id, request.request_hash, value, reviewer),
            result_type=ApprovalDecision,
        )

    async def signal_decision(
        self, request: ApprovalRequest, value: str = "approve", reviewer: str = "alice"
    ) -> None:
        """Answer ``request`` with the ``decide`` signal."""
        await self.handle.signal(
            SignalName.DECIDE, decision(request.request_id, request.request_hash, value, reviewer)
        )

    async def abort(self, reason: str) -> None:
        await self.handle.signal(SignalName.ABORT, {"reason": reason})

    async def result(self) -> TeamRunResult:
        """The run's result, also of one that ended Failed (``team_result``)."""
        return await team_result(self.handle)


async def start_run(
    client: Client, workflow_id: str, run_input: dict[str, Any], task_queue: str = TASK_QUEUE
) -> Run:
    """Start a ``TeamRun`` (without waiting for it), with its search attributes."""
    return Run(await start_team(client, workflow_id, run_input, task_queue))


async def children_started(client: Client, workflow_id: str) -> list[str]:
    """The workflow ids of every child the run asked to start, in order (read
    from its history, so a child that never got going still counts)."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]


async def result_within(run: Run, timeout_s: float) -> TeamRunResult:
    """The run's result; when it takes longer than ``timeout_s``, fail with the
    errors of the run's failed workflow tasks (a run whose workflow task keeps
    failing never ends by itself)."""
    try:
        return await asyncio.wait_for(run.result(), timeout_s)
    except TimeoutError:
        history = await run.handle.fetch_history()
        failures = sorted(
            {
                e.workflow_task_failed_event_attributes.failure.message
                for e in history.events
                if e.HasField("workflow_task_failed_event_attributes")
            }
        )
        raise AssertionError(
            f"run {run.id} did not end within {timeout_s:g} s; failed workflow tasks: {failures}"
        ) from None


async def terminate_if_running(run: Run) -> None:
    """Leave no run behind whose workflow task keeps failing."""
    description = await run.handle.describe()
    if description.status == WorkflowExecutionStatus.RUNNING:
        await run.handle.terminate("left running by a failed test")


# -- gated runs ---------------------------------------------------------------


def write(tool_id: str, path: str, content: str) -> dict[str, Any]:
    """A scripted ``file_write`` call of ``content`` to ``path``."""
    return {
        "type": "tool_use",
        "id": tool_id,
        "name": "file_write",
        "input": {"path": path, "content": content},
    }


def writer(cwd: Path, *script: Any) -> dict[str, Any]:
    """A scripted agent ``writer`` with the read-write tools in ``cwd``."""
    return {
        "name": "writer",
        "provider": "scripted",
        "script": list(script),
        "tools": ["readwrite"],
        "cwd": str(cwd),
    }


def gated_run(cwd: Path, *script: Any, **approvals: Any) -> dict[str, Any]:
    """One task ``w`` by a ``writer`` whose every ``file_write`` waits for a
    decision (and ``approvals``' other gates)."""
    return {
        "team": {"name": "t", "agents": [writer(cwd, *script)]},
        "tasks": [task("w", "writer")],
        "options": {"approvals": {"tools": ["file_write"], **approvals}},
    }


DRAFT = "\n".join(
    [
        "## 1.4.0 [bold]not markup[/bold]",
        "- \x1b[2Jthe screen stays",
        *(f"- change {n:03d}: " + "x" * 40 for n in range(20)),
        "THE LAST LINE",
    ]
)
"""A draft of 1,150 characters: markup that must stay text, an escape that
must be made visible, and a last line past the 500-character preview."""


def draft_then_publish() -> dict[str, Any]:
    """``draft`` writes DRAFT; ``publish``, which depends on it, waits for a
    dispatch approval."""
    return {
        "team": {
            "name": "notes",
            "agents": [scripted("writer", DRAFT), scripted("publisher", "published")],
        },
        "tasks": [task("draft", "writer"), task("publish", "publisher", "draft")],
        "options": {"approvals": {"dispatch": ["publish"]}},
    }


async def failure_at_once(handle: Any, code: str) -> ApplicationError:
    """The failure the run ``handle`` ends with within 30 s, typed ``code``
    (a run still going then is terminated, and the test fails)."""
    run = Run(handle)
    try:
        await result_within(run, 30)
    except WorkflowFailureError as err:
        failure = err.cause
    else:
        raise AssertionError(f"{run.id} did not fail")
    finally:
        await terminate_if_running(run)
    assert isinstance(failure, ApplicationError)
    assert failure.type == code
    return failure
