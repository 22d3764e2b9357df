"""ACP agents as team members on Temporal: sessions across activities, the
stop-reason mapping, and nothing left running when the run ends."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError, CancelledError

from oma import worker as oma_worker
from oma.core.contracts.names import WorkflowName
from oma.core.schema.results import AcpSessionInfo, AgentRunResult
from oma.core.schema.usage import TokenUsage
from tests.support.anthropic_server import AnthropicServer
from tests.support.paths import ACP_AGENT
from tests.support.procs import alive, descendants
from tests.support.runs import (
    TASK_QUEUE,
    agent_result,
    assert_replays,
    process,
    run_team,
    scripted,
    task,
)

pytestmark = pytest.mark.usefixtures("worker")

TEST_AGENT = str(ACP_AGENT)


class AcpAgent:
    """The scriptable test ACP agent (tests/support/acp_agent.py) as a team member."""

    def __init__(self, tmp_path: Path) -> None:
        self.spawn_log = tmp_path / "spawn.log"
        self.event_log = tmp_path / "events.log"
        self.cwd = tmp_path

    def config(self, name: str, turns: list[dict[str, Any]], **script: Any) -> dict[str, Any]:
        return {
            "name": name,
            "system_prompt": "You write code.",
            "backend": {
                "kind": "acp",
                "command": sys.executable,
                "args": [TEST_AGENT],
                "cwd": str(self.cwd),
                "env": {
                    "ACP_TEST_SCRIPT": json.dumps({"turns": turns, **script}),
                    "ACP_TEST_SPAWN_LOG": str(self.spawn_log),
                    "ACP_TEST_EVENT_LOG": str(self.event_log),
                },
            },
        }

    def pids(self) -> list[int]:
        if not self.spawn_log.exists():
            return []
        return [
            int(pid) for role, pid in (ln.split() for ln in self.spawn_log.read_text().splitlines())
        ]

    def events(self, kind: str) -> list[dict[str, Any]]:
        """The agent's logged events of ``kind`` (``prompt``, ``cancel``, ``turn_end``...)."""
        lines = self.event_log.read_text().splitlines() if self.event_log.exists() else []
        return [e for e in map(json.loads, lines) if e["event"] == kind]

    def prompts(self) -> list[str]:
        return [e["text"] for e in self.events("prompt")]


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    """Wait for ``condition``; fail naming ``what`` after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.05)


def turn(*steps: dict[str, Any], stop_reason: str = "end_turn") -> dict[str, Any]:
    return {"steps": list(steps), "stop_reason": stop_reason}


async def test_hybrid_team_llm_planner_acp_coder_process_reviewer_share_outputs(
    client: Client, workflow_id: str, tmp_path: Path, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    anthropic_server.reply_text("1. write slugify\n2. test it", input_tokens=20, output_tokens=8)
    acp = AcpAgent(tmp_path)
    coder = acp.config(
        "coder",
        [
            turn(
                {"tool_call": {"id": "t1", "title": "Write slugify.py", "kind": "edit"}},
                {"tool_call_update": {"id": "t1", "status": "completed"}},
                {"text": "Wrote slugify.py"},
                {"text": " and its test."},
                {"usage": 1200, "cost": 0.05},
            )
        ],
    )
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {
                "name": "hybrid",
                "agents": [
                    {"name": "planner", "provider": "anthropic"},
                    coder,
                    process("reviewer", "import sys; print('REVIEWED:', sys.stdin.read()[-40:])"),
                ],
            },
            "tasks": [
                task("plan", "planner"),
                task("code", "coder", "plan"),
                task("review", "reviewer", "code"),
            ],
        },
    )
    assert result.success, [t.error for t in result.tasks]
    code = await agent_result(client, workflow_id, "code")
    assert code.output == result.task("code").output == "Wrote slugify.py and its test."
    assert code.stop_reason == "end_turn"
    assert [(c.id, c.name, c.status) for c in code.tool_calls] == [
        ("t1", "Write slugify.py", "completed")
    ]
    assert code.token_usage == TokenUsage(input_tokens=1200, cost_usd=0.05)
    total = result.total_token_usage
    assert (total.input_tokens, total.output_tokens) == (1220, 8)
    # what each task cost: the planner at claude-sonnet-4-6's price ($3 in, $15 out per
    # million tokens), the coder as its usage_update.cost said, the process: unknown
    planned = (20 * 3 + 8 * 15) / 1e6
    assert result.task("plan").cost_usd == pytest.approx(planned)
    assert result.task("code").cost_usd == 0.05
    assert result.task("review").cost_usd is None
    assert result.total_cost_usd == pytest.approx(planned + 0.05)
    assert result.cost_unknown == ["process agent 'reviewer'"]
    # the coder got the planner's output; the reviewer got the coder's
    [prompt] = acp.prompts()
    assert prompt.startswith("You write code.\n\n# Task: Code")
    assert "### Plan\n1. write slugify\n2. test it" in prompt
    assert (result.task("review").output or "").strip().endswith("Wrote slugify.py and its test.")
    await assert_replays(client, workflow_id)


async def test_two_tasks_of_one_acp_agent_share_one_subprocess_and_session(
    client: Client, workflow_id: str, tmp_path: Path, worker: oma_worker.OmaWorker
) -> None:
    acp = AcpAgent(tmp_path)
    coder = acp.config("coder", [turn({"text": "first"}), turn({"text": "second"})])
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [coder]},
            # independent tasks: the run still gives the agent one at a time
            "tasks": [task("one", "coder"), task("two", "coder")],
        },
    )
    assert result.success
    assert sorted(t.output or "" for t in result.tasks) == ["first", "second"]
    sessions = [(await agent_result(client, workflow_id, t)).acp_session for t in ("one", "two")]
    assert all(isinstance(s, AcpSessionInfo) for s in sessions)
    assert len({s.session_id for s in sessions if s}) == 1
    assert sorted(s.new_session for s in sessions if s) == [False, True]
    assert len(acp.pids()) == 1, "the second prompt spawned a second agent process"
    # the system prompt went with the session's first prompt only
    assert [p.startswith("You write code.") for p in acp.prompts()] == [True, False]
    # the run ended: its session is closed and the agent process is gone
    assert len(worker.activities.acp_pool) == 0
    assert not any(alive(pid) for pid in acp.pids())
    await assert_replays(client, workflow_id)


async def test_refusal_fails_the_task_and_skips_its_dependents(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    acp = AcpAgent(tmp_path)
    coder = acp.config("coder", [turn({"text": "I won't."}, stop_reason="refusal")])
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [coder, scripted("after", "x")]},
            "tasks": [task("code", "coder"), task("next", "after", "code")],
        },
    )
    assert [(t.id, t.status) for t in result.tasks] == [("code", "failed"), ("next", "skipped")]
    assert result.task("code").error_code == "AGENT_REFUSAL"
    await assert_replays(client, workflow_id)


@pytest.mark.parametrize("stop_reason", ["max_tokens", "max_turn_requests"])
async def test_turn_stopped_early_succeeds_with_budget_exceeded(
    client: Client, workflow_id: str, tmp_path: Path, stop_reason: str
) -> None:
    acp = AcpAgent(tmp_path)
    coder = acp.config("coder", [turn({"text": "partial"}, stop_reason=stop_reason)])
    result = await run_team(
        client,
        workflow_id,
        {"team": {"name": "t", "agents": [coder]}, "tasks": [task("code", "coder")]},
    )
    code = await agent_result(client, workflow_id, "code")
    assert (result.success, code.status, code.output, code.budget_exceeded) == (
        True,
        "completed",
        "partial",
        True,
    )


@pytest.mark.fault
@pytest.mark.usefixtures("short_routing_waits")
async def test_turn_routed_to_a_gone_worker_opens_a_new_session_elsewhere(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    acp = AcpAgent(tmp_path)
    coder = acp.config("coder", [turn({"text": "back again"})], load_session=True)
    gone = AcpSessionInfo(
        session_id="sess-old", worker_task_queue=f"{TASK_QUEUE}/gone-worker", new_session=True
    )
    result: AgentRunResult = await client.execute_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": coder, "input": "continue", "acp_session": gone.model_dump()},
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=AgentRunResult,
    )
    assert result.output == "back again"
    assert result.acp_session is not None
    assert (result.acp_session.new_session, result.acp_session.loaded_session) == (True, True)
    assert result.acp_session.worker_task_queue != gone.worker_task_queue
    # a standalone AgentRun owns its session: gone with the run
    assert not any(alive(pid) for pid in acp.pids())
    await assert_replays(client, workflow_id)


async def test_cancelling_a_run_mid_prompt_cancels_the_turn_and_leaves_no_agent_process(
    client: Client, workflow_id: str, tmp_path: Path, worker: oma_worker.OmaWorker
) -> None:
    acp = AcpAgent(tmp_path)
    coder = acp.config("coder", [turn({"text": "working"}, {"sleep": 60})], spawn_child=True)
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        {"team": {"name": "t", "agents": [coder]}, "tasks": [task("code", "coder")]},
        id=workflow_id,
        task_queue=TASK_QUEUE,
    )
    # the agent got session/prompt: the turn is under way (the spawn log is
    # written before initialize, so it alone would let the cancel land earlier)
    await until(lambda: len(acp.events("prompt")) == 1, "the agent to receive session/prompt")
    [prompt] = acp.events("prompt")
    pids = acp.pids()
    assert len(pids) == 2 and all(alive(p) for p in pids)
    assert acp.events("turn_end") == []

    await handle.cancel()
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()

    assert isinstance(info.value.cause, CancelledError)
    # the cancel reached the running turn: session/cancel for its session, and
    # the turn (60 s of sleep left) answered cancelled instead of being killed
    assert [e["session_id"] for e in acp.events("cancel")] == [prompt["session_id"]]
    assert [(e["session_id"], e["stop_reason"]) for e in acp.events("turn_end")] == [
        (prompt["session_id"], "cancelled")
    ]
    await until(lambda: not any(alive(p) for p in pids), "the agent's processes to end", 2.0)
    assert len(worker.activities.acp_pool) == 0
    await assert_replays(client, workflow_id)


async def test_a_sigkilled_workers_acp_agent_and_its_child_die_with_it(
    client: Client,
    workflow_id: str,
    tmp_path: Path,
    own_worker: tuple[subprocess.Popen[str], str],
) -> None:
    # a SIGKILLed worker runs no code: neither acp_close_run nor its reaper
    # can end the agent; its process group must die with it by itself
    worker, queue = own_worker
    acp = AcpAgent(tmp_path)
    coder = acp.config("coder", [turn({"text": "working"}, {"sleep": 60})], spawn_child=True)
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN, {"agent": coder, "input": "go"}, id=workflow_id, task_queue=queue
    )
    pids: list[int] = []
    try:
        await until(lambda: len(acp.events("prompt")) == 1, "the agent to receive session/prompt")
        # the pids the agent and its child wrote themselves, not the worker's view
        pids = acp.pids()
        assert len(pids) == 2 and all(alive(p) for p in pids)
        assert set(pids) <= set(descendants(worker.pid))

        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()

        await until(lambda: not any(map(alive, pids)), "the agent's processes to end", 5.0)
    finally:
        await handle.terminate("test over")
        for pid in filter(alive, pids):  # a failed test leaves nothing running
            os.kill(pid, signal.SIGKILL)


async def test_message_list_to_an_acp_agent_fails_before_any_session_opens(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    acp = AcpAgent(tmp_path)
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    with pytest.raises(WorkflowFailureError) as info:
        await client.execute_workflow(
            WorkflowName.AGENT_RUN,
            {"agent": acp.config("coder", [turn({"text": "never"})]), "input": messages},
            id=workflow_id,
            task_queue=TASK_QUEUE,
        )
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "INVALID_MESSAGE"
    assert acp.pids() == []


async def test_a_turn_the_agent_ends_cancelled_fails_the_task_cancelled_like_a_process(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    acp = AcpAgent(tmp_path)
    coder = acp.config("coder", [turn({"text": "half"}, stop_reason="cancelled")])
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [coder, scripted("after", "x")]},
            "tasks": [task("code", "coder"), task("next", "after", "code")],
        },
    )
    assert [(t.id, t.status) for t in result.tasks] == [("code", "failed"), ("next", "skipped")]
    assert result.task("code").error_code == "CANCELLED"
    code = await agent_result(client, workflow_id, "code")
    assert (code.status, code.output, code.error_code) == ("cancelled", "half", "CANCELLED")
    await assert_replays(client, workflow_id)


async def test_a_message_re_sent_under_a_new_message_id_reaches_the_team_once(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    acp = AcpAgent(tmp_path)
    coder = acp.config(
        "coder",
        [
            turn(
                {"text": "Hello", "message_id": "A"},
                {"text": " world", "message_id": "A"},
                {"text": "Hello world", "message_id": "B"},  # the whole of A again
                {"tool_call": {"id": "t1", "title": "Run tests", "kind": "execute"}},
                {"text": "Tests pass.", "message_id": "C"},
            )
        ],
    )
    counter = process("reviewer", "import sys; print(sys.stdin.read().count('Hello world'))")
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [coder, counter]},
            "tasks": [task("code", "coder"), task("review", "reviewer", "code")],
        },
    )
    assert result.success, [t.error for t in result.tasks]
    code = await agent_result(client, workflow_id, "code")
    assert code.output == result.task("code").output == "Hello world\n\nTests pass."
    # the dependent's prompt carries the coder's output once
    assert (result.task("review").output or "").strip() == "1"
    await assert_replays(client, workflow_id)
