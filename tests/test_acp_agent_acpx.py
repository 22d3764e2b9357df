"""`oma acp` driven by a real third-party ACP client: `acpx` (npm, pinned in
tests/npm/ with the Node 22 it needs), against the session's dev server and
worker: `acpx --agent 'oma acp --team …' --format json --approve-all exec`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from oma.runtime.dev_server import DevServer
from tests._acp_editor import OMA, write_team
from tests._runs import TASK_QUEUE
from tests.test_acp_agent import FINAL, team

pytestmark = pytest.mark.usefixtures("worker")

NPM = Path(__file__).resolve().parent / "npm" / "node_modules"
NODE = NPM / "node" / "bin" / "node"
ACPX = NPM / "acpx" / "dist" / "cli.js"


@pytest.fixture(scope="module", autouse=True)
def _acpx_installed() -> None:
    # Not a skip: without the client this test cannot say anything.
    assert NODE.is_file() and ACPX.is_file(), (
        f"{ACPX} or {NODE} is missing: run `make test` "
        "(or `npm ci --prefix tests/npm --no-audit --no-fund`)"
    )


async def test_acpx_runs_a_goal_and_shows_the_plan_tasks_and_answer(
    dev_server: DevServer, tmp_path: Path
) -> None:
    team_file = write_team(tmp_path / "team.json", team(approvals={"plan": True}))
    env = {
        "PATH": f"{Path(OMA).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),  # acpx keeps its sessions there
        "TEMPORAL_ADDRESS": dev_server.address,
        "OMA_TASK_QUEUE": TASK_QUEUE,
    }
    command = [str(NODE), str(ACPX), "--agent", f"oma acp --team {team_file}", "--format", "json"]
    ran = await asyncio.to_thread(
        subprocess.run,
        [*command, "--approve-all", "exec", "Write the notes"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    wire = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    updates: list[dict[str, Any]] = [
        m["params"]["update"] for m in wire if m.get("method") == "session/update"
    ]
    plans = [u for u in updates if u["sessionUpdate"] == "plan"]
    assert [e["content"] for e in plans[0]["entries"]] == [
        "Write notes · writer",
        "Review · reviewer",
    ]
    assert [e["status"] for e in plans[-1]["entries"]] == ["completed", "completed"]
    cards = {u["toolCallId"]: u for u in updates if u["sessionUpdate"] == "tool_call"}
    assert {"t1", "t2", "approval:plan"} <= set(cards)
    assert cards["t1"]["title"] == "Write notes (writer)"
    # (acpx prints a tool call as it holds it, its updates folded in: the last status counts)
    last = {
        u["toolCallId"]: u["status"]
        for u in updates
        if u["sessionUpdate"] in ("tool_call", "tool_call_update") and u.get("status")
    }
    assert {k: last[k] for k in ("t1", "t2", "approval:plan")} == dict.fromkeys(
        ("t1", "t2", "approval:plan"), "completed"
    )
    [asked] = [m for m in wire if m.get("method") == "session/request_permission"]
    after = wire[wire.index(asked) :]
    answered = next(m for m in after if m.get("id") == asked["id"] and "result" in m)
    assert answered["result"]["outcome"] == {"outcome": "selected", "optionId": "allow_once"}
    text = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert text == [FINAL]
    stop = next(m for m in wire if m.get("result", {}).get("stopReason"))
    assert stop["result"]["stopReason"] == "end_turn"
    assert (tmp_path / "notes.md").read_text() == "hello\n"
