"""LLM agents that act: the tool loop on Temporal, each call a ``tool_call``
activity — real tools on temporary directories, the scripted provider and the
real ``anthropic`` SDK against the local Messages API server, a real dev
server, every history replayed."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError

from oma.agent import Agent
from oma.core.contracts.names import ActivityName, QueryName, WorkflowName
from oma.core.schema.results import AgentRunResult
from tests.support.anthropic_server import AnthropicServer, ToolUseReply
from tests.support.paths import ROOT
from tests.support.procs import alive
from tests.support.runs import TASK_QUEUE, agent_result, assert_replays, run_agent, run_team, task
from tests.support.tool_calls import tool_use, turn_results

pytestmark = pytest.mark.usefixtures("worker")


def scripted_with_tools(tmp_path: Path, *script: Any, **config: Any) -> dict[str, Any]:
    return {
        "name": "reviewer",
        "provider": "scripted",
        "script": list(script),
        "tools": ["readonly", "tests.support.tools:add", "tests.support.tools:explode"],
        "cwd": str(tmp_path),
        **config,
    }


async def tool_activities(client: Client, workflow_id: str) -> list[str]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == ActivityName.TOOL_CALL
    ]


async def test_a_scripted_agent_reads_a_file_and_calls_a_custom_tool_each_as_an_activity(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    agent = scripted_with_tools(
        tmp_path,
        [tool_use("u1", "file_read", path="notes.txt"), tool_use("u2", "add", a=2, b=3)],
        "notes say alpha; 2 + 3 = 5",
    )
    result = await run_agent(client, workflow_id, agent, "review the notes")

    assert result.output == "notes say alpha; 2 + 3 = 5"
    read, added = turn_results(result)
    assert (read.tool_use_id, read.is_error) == ("u1", False)
    assert read.content == "     1\talpha\n     2\tbeta"
    assert (added.tool_use_id, added.content, added.is_error) == ("u2", "5", False)
    assert [(c.name, c.status) for c in result.tool_calls] == [
        ("file_read", "completed"),
        ("add", "completed"),
    ]
    assert await tool_activities(client, workflow_id) == [
        ActivityName.TOOL_CALL,
        ActivityName.TOOL_CALL,
    ]
    await assert_replays(client, workflow_id)


async def test_a_path_escaping_the_cwd_and_a_raising_tool_are_errors_the_model_reads(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    (tmp_path / "secret.txt").write_text("the secret")
    (cwd / "link.txt").symlink_to(tmp_path / "secret.txt")
    agent = scripted_with_tools(
        cwd,
        [
            tool_use("u1", "file_read", path="../secret.txt"),
            tool_use("u2", "file_read", path="link.txt"),
            tool_use("u3", "explode", reason="boom"),
        ],
        "could not",
    )
    result = await run_agent(client, workflow_id, agent, "read the secret")

    dotdot, link, explode = turn_results(result)
    assert dotdot.is_error and "outside the working directory" in str(dotdot.content)
    assert link.is_error and "outside the working directory" in str(link.content)
    assert "the secret" not in str(dotdot.content) + str(link.content)
    assert (explode.is_error, explode.content) == (True, "RuntimeError: boom")
    assert result.output == "could not"
    await assert_replays(client, workflow_id)


async def test_the_anthropic_model_gets_the_tools_and_its_parallel_calls_run(
    client: Client, workflow_id: str, tmp_path: Path, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    (tmp_path / "a.py").write_text("print('hi')\n")
    anthropic_server.reply(
        ToolUseReply(
            "grep",
            {"pattern": "print"},
            id="toolu_a",
            text="Looking.",
            pieces=4,
            also=(("toolu_b", "explode", {"reason": "no"}), ("toolu_c", "glob", {})),
        )
    )
    anthropic_server.reply_text("a.py prints hi")
    agent = {
        "name": "reviewer",
        "provider": "anthropic",
        "tools": ["readonly", "tests.support.tools:explode"],
        "cwd": str(tmp_path),
    }
    result = await run_agent(client, workflow_id, agent, "what prints?")

    first, second = anthropic_server.requests
    assert [t["name"] for t in first.body["tools"]] == ["file_read", "glob", "grep", "explode"]
    explode_tool = first.body["tools"][3]
    assert explode_tool["description"] == "Always fails, saying why."
    assert explode_tool["input_schema"]["required"] == ["reason"]
    sent = second.body["messages"][-1]
    assert sent["role"] == "user"
    assert [(b["tool_use_id"], b.get("is_error", False)) for b in sent["content"]] == [
        ("toolu_a", False),
        ("toolu_b", True),
        ("toolu_c", True),  # glob without its pattern: invalid input, told to the model
    ]
    assert sent["content"][0]["content"] == "a.py:1:print('hi')"
    assert "pattern" in sent["content"][2]["content"]
    assert result.output == "a.py prints hi"
    assert result.token_usage.input_tokens == 20
    await assert_replays(client, workflow_id)


async def test_tool_calls_cut_off_by_max_tokens_never_run_and_the_run_fails_after_a_bound(
    client: Client, workflow_id: str, tmp_path: Path, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    marker = tmp_path / "ran"
    for _ in range(3):
        anthropic_server.reply(
            ToolUseReply("bash", {"command": f"touch {marker}"}, stop_reason="max_tokens")
        )
    agent = {"name": "a", "provider": "anthropic", "tools": ["full"], "cwd": str(tmp_path)}
    with pytest.raises(WorkflowFailureError) as failed:
        await run_agent(client, workflow_id, agent, "go")
    assert getattr(failed.value.cause, "type", None) == "TOOL_CALL_TRUNCATED"
    assert not marker.exists()
    await assert_replays(client, workflow_id)


async def test_cancelling_the_run_kills_a_long_bash_and_its_children(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    agent = scripted_with_tools(
        tmp_path,
        [tool_use("u1", "bash", command=f"sleep 60 & echo $! > {pid_file}; wait")],
        "never",
        tools=["full"],
    )
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": agent, "input": "sleep"},
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=AgentRunResult,
    )
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.05)
    sleeper = int(pid_file.read_text())
    assert alive(sleeper)

    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    for _ in range(60):
        if not alive(sleeper):
            break
        await asyncio.sleep(0.05)
    assert not alive(sleeper), "the backgrounded sleep outlived the cancelled tool call"
    await assert_replays(client, workflow_id)


async def test_the_in_process_agent_runs_the_same_tools(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("gamma\n")
    agent = Agent(
        scripted_with_tools(
            tmp_path, [tool_use("u1", "grep", pattern="gam")], "found gamma in notes.txt"
        )
    )
    events = [e async for e in agent.stream("find gamma")]
    assert [e.type for e in events] == ["agent_start", "tool_call", "text_delta", "done"]
    done = events[-1]
    assert done.result.output == "found gamma in notes.txt"
    [found] = turn_results(done.result)
    assert found.content == "notes.txt:1:gamma"


async def test_a_long_tool_loop_sends_the_conversation_by_reference_and_history_grows_linearly(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    calls = 30
    for n in range(calls):
        anthropic_server.reply_tool_use("page", {"number": n}, id=f"toolu_{n}")
    anthropic_server.reply_text("read them all")
    agent = {
        "name": "reader",
        "provider": "anthropic",
        "tools": ["tests.support.tools:page"],
        "max_turns": calls + 1,
    }
    result = await run_agent(client, workflow_id, agent, "read every page")

    assert result.output == "read them all"
    # the model got the whole conversation every turn ...
    last = anthropic_server.requests[-1].body["messages"]
    assert len(last) == 1 + 2 * calls
    assert last[-1]["content"][0]["content"].startswith(f"page {calls - 1}\n")
    # ... while each llm_turn input in the history holds a reference, not the messages
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    turn_inputs = [
        e.activity_task_scheduled_event_attributes.input.payloads[0].data
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == ActivityName.LLM_TURN
    ]
    assert len(turn_inputs) == calls + 1
    assert max(len(data) for data in turn_inputs) < 2_000
    content = sum(len(json.dumps(m)) for m in last)
    assert history.to_json_dict() and len(json.dumps(history.to_json_dict())) < 3 * content
    # the result keeps the latest part of a long conversation; the query has it all
    assert result.messages_omitted > 0
    assert len(result.messages) + result.messages_omitted == 2 + 2 * calls
    handle = client.get_workflow_handle(workflow_id)
    everything = await handle.query(
        QueryName.CONVERSATION, {"start": 0}, result_type=list[dict[str, Any]]
    )
    assert len(everything) == 2 + 2 * calls
    # as `temporal workflow query --type conversation` asks it: with no argument
    assert (
        await handle.query(QueryName.CONVERSATION, result_type=list[dict[str, Any]]) == everything
    )
    await assert_replays(client, workflow_id)


async def test_a_team_token_budget_stops_a_tool_loop_in_the_middle_of_its_task(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    script = [[tool_use(f"u{i}", "add", a=i)] for i in range(9)]
    agent = scripted_with_tools(tmp_path, *script, "done", max_turns=10)
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [agent]},
            "tasks": [task("loop", "reviewer")],
            "options": {"max_token_budget": 20},
        },
    )
    assert (result.status, result.error_code, result.budget_exceeded) == (
        "failed",
        "BUDGET_EXCEEDED",
        True,
    )
    loop = result.task("loop")
    assert loop.error_code == "BUDGET_EXCEEDED"
    used = loop.token_usage.input_tokens + loop.token_usage.output_tokens
    assert 20 <= used < 30, used
    await assert_replays(client, workflow_id)


async def test_the_demo_reviewer_reads_the_code_the_coder_wrote(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    demo = json.loads((ROOT / "examples" / "hybrid-team-scripted.json").read_text())
    coder, reviewer = demo["team"]["agents"][1], demo["team"]["agents"][2]
    coder["backend"]["cwd"] = reviewer["cwd"] = str(tmp_path)
    coder["backend"]["args"] = [str(ROOT / "examples" / "agents" / "coder.py")]
    result = await run_team(client, workflow_id, demo)

    assert result.success, [t.error for t in result.tasks]
    review = await agent_result(client, workflow_id, "review")
    assert [(c.name, c.status) for c in review.tool_calls] == [
        ("file_read", "completed"),
        ("grep", "completed"),
    ]
    read, grepped = turn_results(review)
    assert '    15\t    return re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")' in str(
        read.content
    )
    assert str(grepped.content).count("test_slugify.py:") == 7
    assert "slugify.py:15" in review.output
    await assert_replays(client, workflow_id)


async def test_the_in_process_agent_reviews_each_tool_call_with_on_tool_call(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("delta\n")
    seen: list[Any] = []

    def review(request: Any) -> str:
        seen.append(request)
        return "approve" if request.content["tool"] == "file_read" else "reject"

    script = [
        [tool_use("u1", "file_read", path="notes.txt"), tool_use("u2", "deploy", environment="x")],
        "read, not deployed",
    ]
    config = scripted_with_tools(
        tmp_path, *script, tools=["readonly", "tests.support.tools:deploy"]
    )
    result = await Agent(config, on_tool_call=review).run("go")
    read, deploy = turn_results(result)
    assert (read.is_error, deploy.is_error, deploy.content) == (
        False,
        True,
        "not run: on_tool_call rejected it",
    )
    assert [(r.boundary, r.content["input"]) for r in seen] == [
        ("tool", {"path": "notes.txt"}),
        ("tool", {"environment": "x"}),
    ]
    unreviewed = await Agent(config).run("go")
    assert turn_results(unreviewed)[1].content.startswith("not run: deploy is consequential")


async def test_the_in_process_agent_reviews_a_turns_calls_one_at_a_time_in_order(
    tmp_path: Path,
) -> None:
    # the calls of a turn run together; a reviewer slow on the first once saw
    # the second first (a plain callback runs in a thread of its own)
    (tmp_path / "notes.txt").write_text("delta\n")
    seen: list[str] = []
    reviewing: list[str] = []

    def review(request: Any) -> str:
        tool = request.content["tool"]
        reviewing.append(tool)
        assert len(reviewing) == 1, reviewing  # alone
        if tool == "file_read":
            time.sleep(0.05)
        seen.append(tool)
        reviewing.remove(tool)
        return "approve"

    script = [
        [tool_use("u1", "file_read", path="notes.txt"), tool_use("u2", "deploy", environment="x")],
        "done",
    ]
    config = scripted_with_tools(
        tmp_path, *script, tools=["readonly", "tests.support.tools:deploy"]
    )
    await Agent(config, on_tool_call=review).run("go")
    assert seen == ["file_read", "deploy"]


@pytest.mark.parametrize(
    ("tool", "attempts", "expected"),
    [("flaky", 3, "worked on attempt 3"), ("flakier", 2, "ConnectionError: attempt 2 failed")],
)
async def test_a_custom_tool_declaring_retries_is_tried_again_and_its_last_error_is_read(
    client: Client, workflow_id: str, tmp_path: Path, tool: str, attempts: int, expected: str
) -> None:
    marker = tmp_path / "tries"
    agent = scripted_with_tools(
        tmp_path,
        [tool_use("u1", tool, marker=str(marker))],
        "done",
        tools=[f"tests.support.tools:{tool}"],
    )
    result = await run_agent(client, workflow_id, agent, "go")
    [answer] = turn_results(result)
    assert (answer.content, answer.is_error) == (expected, attempts == 2)
    assert marker.read_text() == "x" * attempts
    await assert_replays(client, workflow_id)


async def test_each_turn_of_a_tool_loop_reads_the_last_ones_prompt_from_the_cache(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    anthropic_server.reply(
        ToolUseReply("page", {"number": 1}, id="toolu_1", cache_creation_input_tokens=1200)
    )
    anthropic_server.reply_text(
        "read it", cache_read_input_tokens=1200, cache_creation_input_tokens=30
    )
    agent = {
        "name": "reader",
        "provider": "anthropic",
        "system_prompt": "You read pages.",
        "tools": ["tests.support.tools:page"],
    }

    result = await run_agent(client, workflow_id, agent, "read page 1")

    first, second = (r.body for r in anthropic_server.requests)
    # each turn's breakpoint sits on its last block: turn 2's prefix is turn 1's prompt
    assert first["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert second["messages"][-1]["content"][-1]["type"] == "tool_result"
    assert second["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in second["messages"][0]["content"][-1]
    usage = result.token_usage
    assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (1230, 1200)
    await assert_replays(client, workflow_id)
