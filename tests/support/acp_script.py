"""The scripted ACP agent (``tests/support/acp_agent.py``, built on the SDK's agent
side) as the tests drive it: backends that run it with a script, the steps
of a script's prompt turns, its logs, and the heartbeats an activity sends."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from oma.core.schema.backends import AcpBackendConfig
from tests.support.paths import ACP_AGENT

AGENT_SCRIPT = ACP_AGENT
WORKER_QUEUE = "oma-worker-test-1"
"""The worker task queue the ACP activities under test say they run on."""


class ScriptedAgent:
    """Backends that run ``tests/support/acp_agent.py`` with a script, and its logs."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.spawn_log = tmp_path / "spawn.log"
        self.event_log = tmp_path / "events.jsonl"

    def backend(
        self, *turns: dict[str, Any], script: dict[str, Any] | None = None, **backend: Any
    ) -> AcpBackendConfig:
        env = {
            "ACP_TEST_SCRIPT": json.dumps({**(script or {}), "turns": list(turns)}),
            "ACP_TEST_SPAWN_LOG": str(self.spawn_log),
            "ACP_TEST_EVENT_LOG": str(self.event_log),
        }
        return AcpBackendConfig(
            command=sys.executable, args=[str(AGENT_SCRIPT)], env=env, **backend
        )

    def events(self, kind: str) -> list[dict[str, Any]]:
        if not self.event_log.exists():
            return []
        events = [json.loads(line) for line in self.event_log.read_text().splitlines()]
        return [event for event in events if event["event"] == kind]

    def pids(self, role: str = "agent") -> list[int]:
        if not self.spawn_log.exists():
            return []
        lines = [line.split() for line in self.spawn_log.read_text().splitlines()]
        return [int(pid) for who, pid in lines if who == role]


def turn(*steps: dict[str, Any], stop_reason: str = "end_turn") -> dict[str, Any]:
    """One prompt turn of the script: its ``steps``, then ``stop_reason``."""
    return {"steps": list(steps), "stop_reason": stop_reason}


def text(chunk: str, message_id: str | None = None) -> dict[str, Any]:
    """An ``agent_message_chunk``, with ``messageId`` ``message_id`` when given."""
    if message_id is None:
        return {"text": chunk}
    return {"text": chunk, "message_id": message_id}


def thought(chunk: str) -> dict[str, Any]:
    return {"raw_update": {"sessionUpdate": "agent_thought_chunk",
                           "content": {"type": "text", "text": chunk}}}  # fmt: skip


def tool_call(call_id: str) -> dict[str, Any]:
    return {"tool_call": {"id": call_id, "title": "Run tests", "kind": "execute"}}


def permission(*options: str, **ask: Any) -> dict[str, Any]:
    return {"permission": {"options": list(options), **ask}}


class Heartbeats:
    """An ``ActivityEnvironment`` that keeps the heartbeat details it gets."""

    def __init__(self) -> None:
        self.details: list[Any] = []
        self.env = ActivityEnvironment()
        self.env.on_heartbeat = lambda *details: self.details.extend(details)

    async def until_output_chars(self, n: int) -> None:
        await eventually(lambda: any(d["output_chars"] == n for d in self.details))


async def eventually(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Wait until ``condition()`` holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)
