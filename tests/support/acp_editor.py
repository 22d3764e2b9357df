"""An editor as the tests play it: the ACP Python SDK's client side driving a
real ``oma acp`` process, every message it receives recorded in order; and the
goal team it runs (``notes_team``)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    Implementation,
    RequestPermissionResponse,
)

from oma.runtime.dev_server import DevServer
from tests.support.runs import TASK_QUEUE

OMA = str(Path(sys.executable).parent / "oma")

Answer = Callable[[Any], Awaitable[str | None] | str | None]


def allow_once(call: Any) -> str:
    return "allow_once"


class Editor:
    """The client: answers ``session/request_permission`` with ``answer``
    (an option id, or ``None`` for ``cancelled``), and keeps every message
    ``oma acp`` sent, in the order it arrived (``wire``)."""

    def __init__(self, answer: Answer = allow_once) -> None:
        self.answer = answer
        self.wire: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self.conn: Any = None
        self.process: Any = None

    def observe(self, event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING:
            self.wire.append(event.message)
            self.arrived.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **_: Any
    ) -> RequestPermissionResponse:
        choice = self.answer(tool_call)
        if inspect.isawaitable(choice):
            choice = await choice
        if choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=choice, outcome="selected")
        )

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        return None

    # -- reading the wire ---------------------------------------------------------

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """The ``update`` of every ``session/update``, in order."""
        return [
            m["params"]["update"]
            for m in self.wire
            if m.get("method") == "session/update"
            and (session_id is None or m["params"]["sessionId"] == session_id)
        ]

    def permissions(self) -> list[dict[str, Any]]:
        return [m["params"] for m in self.wire if m.get("method") == "session/request_permission"]

    async def wait_for(self, probe: Callable[[], Any], what: str, timeout_s: float = 30) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            found = probe()
            if found:
                return found
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what}; got {self.kinds()}")
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), min(left, 0.5))

    def kinds(self) -> list[str]:
        """Each message in order, in short: ``kind:toolCallId:status`` for an
        update, ``permission:toolCallId``, ``response``."""
        out = []
        for m in self.wire:
            if m.get("method") == "session/update":
                u = m["params"]["update"]
                out.append(f"{u['sessionUpdate']}:{u.get('toolCallId', '')}:{u.get('status', '')}")
            elif m.get("method") == "session/request_permission":
                out.append(f"permission:{m['params']['toolCall']['toolCallId']}")
            elif "id" in m and "method" not in m:
                out.append("response")
            else:
                out.append(str(m.get("method")))
        return out


def oma_env(dev_server: DevServer, **extra: str) -> dict[str, str]:
    """``oma acp``'s environment: the session's dev server and task queue."""
    env = {
        "TEMPORAL_ADDRESS": dev_server.address,
        "OMA_TASK_QUEUE": TASK_QUEUE,
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    for name in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV"):
        if name in os.environ:
            env[name] = os.environ[name]
    return {**env, **extra}


@contextlib.asynccontextmanager
async def editor_with(
    dev_server: DevServer,
    cwd: Path,
    *args: str,
    answer: Answer = allow_once,
    stderr: Path | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Editor]:
    """An ``Editor`` connected to a new ``oma acp ARGS`` in ``cwd``, initialized."""
    editor = Editor(answer)
    log = open(stderr or cwd / "oma-acp.stderr", "ab")  # noqa: SIM115 (closed below)
    try:
        async with spawn_agent_process(
            editor,
            OMA,
            "acp",
            *args,
            env=env or oma_env(dev_server),
            cwd=cwd,
            transport_kwargs={"stderr": log},
            observers=[editor.observe],
        ) as (conn, process):
            editor.conn, editor.process = conn, process
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="test-editor", title="Test Editor", version="1"),
            )
            yield editor
    finally:
        log.close()


def write_team(path: Path, team: dict[str, Any]) -> Path:
    path.write_text(json.dumps(team))
    return path


# -- the team the editor runs --------------------------------------------------


PLAN = [
    {
        "title": "Write notes",
        "description": "Write notes.md saying hello.",
        "assignee": "writer",
        "depends_on": [],
    },
    {
        "title": "Review",
        "description": "Review the notes.",
        "assignee": "reviewer",
        "depends_on": ["Write notes"],
    },
]
"""The plan ``notes_team``'s coordinator writes: Write notes, then Review."""

FINAL = "The notes are written and reviewed: LGTM."
"""The coordinator's final answer in ``notes_team``."""


def notes_team(
    approvals: dict[str, Any] | None = None, writer_script: list[Any] | None = None
) -> dict[str, Any]:
    """A goal team: a writer with file_write, a reviewer, a scripted coordinator."""
    write = {
        "type": "tool_use",
        "id": "tu-1",
        "name": "file_write",
        "input": {"path": "notes.md", "content": "hello\n"},
    }
    return {
        "team": {
            "name": "notes",
            "agents": [
                {
                    "name": "writer",
                    "provider": "scripted",
                    "tools": ["file_write"],
                    "script": writer_script or [[write], "Wrote notes.md."],
                },
                {"name": "reviewer", "provider": "scripted", "script": ["LGTM"]},
            ],
        },
        "coordinator": {
            "provider": "scripted",
            "script": [f"```json\n{json.dumps(PLAN)}\n```", FINAL],
        },
        "options": {
            "approvals": approvals
            if approvals is not None
            else {"plan": True, "tools": ["file_write"]}
        },
    }
