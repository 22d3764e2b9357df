"""`oma acp` driven by a real third-party ACP client: `acpx` (npm, pinned in
tests/npm/ with the Node 22 it needs), against the session's dev server and
worker: `acpx --agent 'oma acp --team …' --format json --approve-all exec`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from oma.core.contracts.names import QueryName
from oma.runtime.dev_server import DevServer
from tests.support.acp_editor import FINAL, OMA, notes_team, write_team
from tests.support.paths import TESTS
from tests.support.procs import alive
from tests.support.runs import TASK_QUEUE

pytestmark = pytest.mark.usefixtures("worker")

NPM = TESTS / "npm" / "node_modules"
NODE = NPM / "node" / "bin" / "node"
ACPX = NPM / "acpx" / "dist" / "cli.js"


@pytest.fixture(scope="module", autouse=True)
def _acpx_installed() -> None:
    # Not a skip: without the client this test cannot say anything.
    assert NODE.is_file() and ACPX.is_file(), (
        f"{ACPX} or {NODE} is missing: run `make test` "
        "(or `npm ci --prefix tests/npm --no-audit --no-fund`)"
    )


async def acpx(
    dev_server: DevServer, cwd: Path, team_file: Path, *args: str
) -> list[dict[str, Any]]:
    """Run ``acpx --agent 'oma acp --team TEAM_FILE' --format json ARGS`` in
    ``cwd`` (its sessions kept under ``cwd``), which must succeed: every
    JSON-RPC message it prints."""
    env = {
        "PATH": f"{Path(OMA).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(cwd),  # acpx keeps its sessions there
        "TEMPORAL_ADDRESS": dev_server.address,
        "OMA_TASK_QUEUE": TASK_QUEUE,
    }
    command = [str(NODE), str(ACPX), "--agent", f"oma acp --team {team_file}", "--format", "json"]
    ran = await asyncio.to_thread(
        subprocess.run,
        [*command, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert ran.returncode == 0, (ran.stdout[-2000:], ran.stderr[-2000:])
    return [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]


async def test_acpx_runs_a_goal_and_shows_the_plan_tasks_and_answer(
    dev_server: DevServer, tmp_path: Path
) -> None:
    team_file = write_team(tmp_path / "team.json", notes_team(approvals={"plan": True}))
    wire = await acpx(dev_server, tmp_path, team_file, "--approve-all", "exec", "Write the notes")
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


def queue_owners(home: Path) -> list[int]:
    """The pids of acpx's live queue owners (its lock files under ``home``)."""
    pids = []
    for lock in (home / ".acpx" / "queues").glob("*.lock"):
        with contextlib.suppress(OSError, ValueError):
            pids.append(int(json.loads(lock.read_text())["pid"]))
    return [pid for pid in pids if alive(pid)]


async def test_acpx_prompts_a_persistent_session_again_after_its_queue_owner_has_gone(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    # acpx keeps a persistent session's agent in a queue owner that ends when
    # idle (--ttl); the next prompt starts a new `oma acp` and reattaches
    # with session/resume. That `oma acp` took its own follower of the ended
    # run for the run still going: ACP_SESSION_BUSY for every later prompt
    team_file = write_team(tmp_path / "team.json", notes_team(approvals={}))
    prompts = ["Write the notes", "Add a title", "Add a date"]
    await acpx(dev_server, tmp_path, team_file, "sessions", "new")
    turns = []
    for text in prompts:
        turns.append(await acpx(dev_server, tmp_path, team_file, "--ttl", "0.2", "prompt", text))
        for _ in range(200):
            if not queue_owners(tmp_path):
                break
            await asyncio.sleep(0.05)
        assert not queue_owners(tmp_path), "the queue owner is still there"

    [opened] = [m for m in turns[0] if m.get("method") == "session/new"]
    sid = next(m for m in turns[0] if m.get("id") == opened["id"] and "result" in m)["result"][
        "sessionId"
    ]
    finals: list[str] = []
    for n, wire in enumerate(turns):
        methods = [m["method"] for m in wire if "method" in m and "id" in m]
        # a new `oma acp` each time, reattached to the session after the first
        assert methods == [
            "initialize",
            "session/new" if n == 0 else "session/resume",
            "session/prompt",
        ], methods
        updates = [m["params"] for m in wire if m.get("method") == "session/update"]
        asked = [
            m["params"] for m in wire if m.get("method") in ("session/resume", "session/prompt")
        ]
        assert {m["sessionId"] for m in updates + asked} == {sid}
        stop = next(m for m in wire if "stopReason" in m.get("result", {}))
        assert stop["result"]["stopReason"] == "end_turn"
        chunks = [
            p["update"] for p in updates if p["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
        assert chunks[-1]["content"]["text"] == FINAL
        finals.append(chunks[-1]["messageId"])
        # (before it, a reattached session may draw the run it found: the previous answer)
        assert {c["messageId"] for c in chunks[:-1]} <= set(finals[:-1])
    assert len(set(finals)) == len(prompts)  # each prompt's answer is its own run's
    # three runs of the session's workflow id, each a follow-up of the one before
    runs = [wf async for wf in client.list_workflows(f"WorkflowId = '{sid}'")]
    assert len(runs) == 3
    state = await client.get_workflow_handle(sid).query(QueryName.STATE)
    assert state["goal"].startswith(
        f"Earlier in this session the team was asked:\n\n{prompts[1]}\n\nThat run completed."
    )
    assert state["goal"].endswith(f"Now, building on that:\n\n{prompts[2]}")
