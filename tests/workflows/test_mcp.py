"""MCP toolsets: an LLM agent's MCP servers' tools, listed once per agent run
by ``mcp_list_tools``, each call a ``tool_call`` routed to the worker that
holds the server — real servers (``@modelcontextprotocol/server-filesystem``
from npm, tests/support/mcp_server.py on the ``mcp`` SDK, over stdio and streamable
HTTP), the scripted provider, a real dev server, every history replayed."""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

from oma.agent import Agent
from oma.core.contracts.names import ActivityName, WorkflowName
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.results import AgentRunResult
from oma.worker import OmaWorker, build_worker
from tests.support.anthropic_server import AnthropicServer
from tests.support.approvals import Run
from tests.support.mcp_config import mcp_agent, python_server, started
from tests.support.openai_server import OpenAIServer
from tests.support.paths import ROOT
from tests.support.procs import alive, cmdline, dead_soon
from tests.support.runs import (
    TASK_QUEUE,
    agent_result,
    assert_replays,
    collected_unraisable,
    run_agent,
    run_team,
    worker_activities,
)
from tests.support.tool_calls import tool_results, tool_use

pytestmark = pytest.mark.usefixtures("worker")

FILESYSTEM_SERVER = ROOT / "tests/npm/node_modules/.bin/mcp-server-filesystem"


async def activity_types(client: Client, workflow_id: str) -> list[str]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker``."""
    return [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and marker in cmdline(int(p.name)) and alive(int(p.name))
    ]


def processes_in(directory: Path) -> list[int]:
    """Live processes whose working directory is ``directory``."""
    found = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and Path(os.readlink(p / "cwd")) == directory:
                found.append(int(p.name))
        except OSError:
            continue
    return [pid for pid in found if alive(pid)]


async def test_the_filesystem_server_tools_run_as_tool_calls_and_its_process_ends_with_the_run(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("alpha\n")
    agent = mcp_agent(
        [tool_use("u1", "fs__read_text_file", path=str(tmp_path / "notes.txt"))],
        [tool_use("u2", "fs__write_file", path=str(tmp_path / "out.txt"), content="beta")],
        "done",
        servers=[{"name": "fs", "command": str(FILESYSTEM_SERVER), "args": [str(tmp_path)]}],
    )
    result = await run_agent(client, workflow_id, agent, "copy the notes")

    read, wrote = tool_results(result)
    assert (read.content, read.is_error) == ("alpha\n", False)
    assert not wrote.is_error and (tmp_path / "out.txt").read_text() == "beta"
    assert [c.name for c in result.tool_calls] == ["fs__read_text_file", "fs__write_file"]
    assert await activity_types(client, workflow_id) == [
        ActivityName.MCP_LIST_TOOLS,
        ActivityName.TOOL_CALL,
        ActivityName.TOOL_CALL,
        ActivityName.MCP_CLOSE_RUN,
    ]
    assert processes_with(str(tmp_path)) == []
    await assert_replays(client, workflow_id)


async def test_one_stdio_server_keeps_its_state_across_the_calls_of_a_run(
    client: Client, workflow_id: str, worker: OmaWorker
) -> None:
    spawned = worker.activities.mcp_pool.spawn_count
    agent = mcp_agent(
        [tool_use("u1", "t__remember", value="a"), tool_use("u2", "t__pid")],
        [tool_use("u3", "t__remember", value="b")],
        [tool_use("u4", "t__pid")],
        "ok",
        servers=[python_server()],
    )
    result = await run_agent(client, workflow_id, agent, "remember")

    first, pid, second, pid_again = (r.content for r in tool_results(result))
    assert (first, second) == ("a", "a,b")
    assert pid == pid_again
    assert worker.activities.mcp_pool.spawn_count - spawned == 1
    assert not alive(int(str(pid)))
    await assert_replays(client, workflow_id)


async def test_allowed_and_disallowed_tools_narrow_a_servers_tools(
    client: Client, workflow_id: str
) -> None:
    agent = mcp_agent(
        [tool_use("u1", "t__die"), tool_use("u2", "t__remember", value="x")],
        "ok",
        servers=[python_server()],
        disallowed_tools=["t__die"],
    )
    result = await run_agent(client, workflow_id, agent, "go")

    die, remember = tool_results(result)
    assert die.is_error and str(die.content).startswith("there is no tool 't__die'")
    assert "t__remember" in str(die.content) and "t__die," not in str(die.content)
    assert (remember.content, remember.is_error) == ("x", False)


async def test_a_raising_tool_and_a_dying_server_are_errors_the_model_reads(
    client: Client, workflow_id: str
) -> None:
    agent = mcp_agent(
        [tool_use("u0", "t__pid"), tool_use("u1", "t__fail", message="boom")],
        [tool_use("u2", "t__die")],
        [tool_use("u3", "t__pid")],
        "ok",
        servers=[python_server()],
    )
    result = await run_agent(client, workflow_id, agent, "go")

    pid, failed, died, restarted = tool_results(result)
    assert failed.is_error and "fail" in str(failed.content)
    assert died.is_error and str(died.content) == "MCP server 't' exited during tools/call"
    assert str(restarted.content).startswith("[MCP server 't' was started anew")
    new_pid = str(restarted.content).rsplit("\n", 1)[1]
    assert new_pid != pid.content and not alive(int(new_pid))
    await assert_replays(client, workflow_id)


async def history_bytes(client: Client, workflow_id: str) -> bytes:
    """The run's history events as stored (protobuf): payloads are their JSON bytes."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return b"".join(event.SerializeToString() for event in history.events)


async def test_the_mcp_listing_and_the_system_prompt_are_in_the_history_once(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    for n in range(3):
        anthropic_server.reply_tool_use("t__tool0007", {"query": f"q{n}"}, id=f"toolu_{n}")
    anthropic_server.reply_text("found them")
    prompt = f"You are the archivist {uuid.uuid4().hex}."
    agent = {
        "name": "archivist",
        "provider": "anthropic",
        "system_prompt": prompt,
        "mcp_servers": [python_server("t", "--tools", "40")],
    }
    result = await run_agent(client, workflow_id, agent, "search the archive")

    assert [r.content for r in tool_results(result)] == ["7: q0", "7: q1", "7: q2"]
    # every turn was given the whole listing and the prompt...
    requests = anthropic_server.requests
    assert len(requests) == 4
    for request in requests:
        assert len(request.body["tools"]) == 47 and prompt in json.dumps(request.body["system"])
    # ...which the history holds once: the listing in mcp_list_tools' result,
    # the prompt in the run's input
    history = await history_bytes(client, workflow_id)
    assert history.count(b"Numbered tool 0031: searches shelf 31") == 1
    assert history.count(prompt.encode()) == 1
    await assert_replays(client, workflow_id)


async def start_slow_call(
    client: Client, workflow_id: str, tmp_path: Path
) -> tuple[WorkflowHandle[Any, Any], Path, int]:
    """Start an AgentRun whose one tool call sleeps 60 s in the Python MCP
    server; return its handle, the call's marker file and the server's pid
    once the call has started."""
    marker = tmp_path / "slow"
    agent = mcp_agent(
        [tool_use("u1", "t__slow", seconds=60, marker=str(marker))], "ok", servers=[python_server()]
    )
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": agent, "input": "go"},
        id=workflow_id,
        task_queue=TASK_QUEUE,
    )
    return handle, marker, await started(marker)


async def test_a_cancelled_run_cancels_the_slow_call_and_its_server_dies(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    handle, marker, pid = await start_slow_call(client, workflow_id, tmp_path)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()

    assert await dead_soon(pid)
    assert not Path(str(marker) + ".done").exists()
    assert ActivityName.MCP_CLOSE_RUN in await activity_types(client, workflow_id)
    await assert_replays(client, workflow_id)


async def test_a_terminated_runs_server_is_reaped(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    handle, _, pid = await start_slow_call(client, workflow_id, tmp_path)
    await handle.terminate("test")

    assert await dead_soon(pid)


async def test_a_failed_runs_server_dies_with_it(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    marker = tmp_path / "quick"
    agent = mcp_agent(  # no final answer: the run fails with SCRIPT_EXHAUSTED
        [tool_use("u1", "t__slow", seconds=0, marker=str(marker))], servers=[python_server()]
    )
    with pytest.raises(WorkflowFailureError) as failure:
        await run_agent(client, workflow_id, agent, "go")

    assert isinstance(failure.value.cause, ApplicationError)
    assert failure.value.cause.type == "SCRIPT_EXHAUSTED"
    assert not alive(await started(marker))
    assert (await activity_types(client, workflow_id))[-1] == ActivityName.MCP_CLOSE_RUN


@pytest.fixture
def http_server() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.mcp_server", "--http", str(port)],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the HTTP MCP server did not start"
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.kill()
    proc.wait()


async def test_an_http_servers_headers_come_from_the_workers_environment(
    client: Client, workflow_id: str, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMA_TEST_MCP_AUTH", "Bearer s3cret")
    monkeypatch.setenv("OMA_CREDENTIALS", f"OMA_TEST_MCP_AUTH={http_server.removesuffix('/mcp')}")
    agent = mcp_agent(
        [tool_use("u1", "web__authorization"), tool_use("u2", "web__remember", value="h")],
        "ok",
        servers=[
            {"name": "web", "url": http_server, "headers": {"Authorization": "OMA_TEST_MCP_AUTH"}}
        ],
    )
    result = await run_agent(client, workflow_id, agent, "go")

    auth, remember = tool_results(result)
    assert (auth.content, remember.content) == ("Bearer s3cret", "h")
    history = json.dumps([json.loads(m.model_dump_json()) for m in result.messages]) + str(
        await client.get_workflow_handle(workflow_id).fetch_history()
    )
    assert "OMA_TEST_MCP_AUTH" in history and "s3cret" not in history.replace(auth.content, "")
    await assert_replays(client, workflow_id)


@pytest.mark.parametrize(
    ("server", "error"),
    [
        ({"name": "a__b", "command": "x"}, "no '__'"),
        ({"name": "a.b", "command": "x"}, "letters, digits"),
        ({"name": "x" * 41, "command": "x"}, "at most 40 characters"),
        ({"name": "a"}, "either 'command' (stdio) or 'url' (HTTP)"),
        ({"name": "a", "command": "x", "url": "http://h"}, "either 'command'"),
        ({"name": "a", "url": "http://h", "headers": {"Authorization": "Bearer abc"}}, "NAME"),
        ({"name": "a", "url": "http://h", "args": ["x"]}, "for stdio servers"),
    ],
)
def test_a_bad_server_is_an_input_error_before_the_run(server: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match="MCP server") as err:
        AgentConfig.model_validate(mcp_agent("ok", servers=[server]))
    assert error in str(err.value)


def test_allowed_tools_must_name_a_declared_server() -> None:
    with pytest.raises(ValidationError, match="allowed_tools names 'fs__read'"):
        AgentConfig.model_validate(
            mcp_agent("ok", servers=[python_server()], allowed_tools=["fs__read"])
        )
    AgentConfig.model_validate(mcp_agent("ok", servers=[python_server()], allowed_tools=["t__pid"]))


def test_two_servers_of_one_name_are_an_input_error() -> None:
    with pytest.raises(ValidationError, match=r"MCP server name\(s\) \['t'\] repeat"):
        AgentConfig.model_validate(mcp_agent("ok", servers=[python_server(), python_server()]))


@pytest.mark.fault
@pytest.mark.usefixtures("short_routing_waits")
async def test_a_lost_server_worker_has_the_next_call_start_a_new_server_elsewhere(
    client: Client, workflow_id: str, anthropic_server: AnthropicServer
) -> None:
    # the run waits on a gated call while the worker holding its server stops
    queue = f"mcp-lost-{uuid.uuid4().hex[:8]}"
    agent = mcp_agent(
        [tool_use("u1", "t__pid")],
        [tool_use("u2", "t__remember", value="b")],
        "ok",
        servers=[python_server()],
    )
    first = build_worker(client, queue, worker_activities(queue, anthropic_server.base_url))
    async with first:
        handle = await client.start_workflow(
            WorkflowName.AGENT_RUN,
            {"agent": agent, "input": "go", "approvals": {"tools": ["t__remember"]}},
            id=workflow_id,
            task_queue=queue,
            result_type=AgentRunResult,
        )
        run = Run(handle)
        request = await run.request("tool-1")
    # the stopped worker's run is collected without a workflow event loop: its
    # cleanup (closing the run's MCP servers) must not call the workflow API
    with collected_unraisable() as unraisable:
        gc.collect()
    assert unraisable == []
    second = build_worker(client, queue, worker_activities(queue, anthropic_server.base_url))
    async with second:
        await run.decide(request)
        result = await handle.result()

    pid, remembered = tool_results(result)
    assert not alive(int(str(pid.content)))
    assert str(remembered.content) == (
        "[MCP server 't' was started anew for this call (the earlier one exited or its "
        "worker was lost): whatever it held is gone]\nb"
    )
    assert first.activities.mcp_pool.spawn_count == 1
    assert second.activities.mcp_pool.spawn_count == 1
    assert len(second.activities.mcp_pool) == 0  # closed at the run's end
    # the call routed to the lost worker's queue timed out unstarted, then ran anew
    assert (await activity_types(client, workflow_id)).count(ActivityName.TOOL_CALL) == 3
    await assert_replays(client, workflow_id)


async def test_a_gated_mcp_tool_waits_for_its_decision_like_a_builtin_one(
    client: Client, workflow_id: str
) -> None:
    agent = mcp_agent([tool_use("u1", "t__remember", value="z")], "ok", servers=[python_server()])
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": agent, "input": "go", "approvals": {"tools": ["t__remember"]}},
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=AgentRunResult,
    )
    run = Run(handle)
    request = await run.request("tool-1")
    assert request.boundary == "tool" and '"t__remember"' in json.dumps(request.content)
    await run.decide(request, "reject")
    result = await handle.result()

    (rejected,) = tool_results(result)
    assert rejected.is_error and "rejected" in str(rejected.content)
    assert ActivityName.TOOL_CALL not in await activity_types(client, workflow_id)


async def test_the_mcp_example_team_runs_with_the_scripted_provider(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    # the example as written, its server the npm one the tests install
    # (npx would fetch it) and its cwd a fresh directory
    run_input = json.loads((ROOT / "examples/mcp-team-scripted.json").read_text())
    for agent in run_input["team"]["agents"]:
        for server in agent["mcp_servers"]:
            assert server["args"][-1] == "."
            server |= {"command": str(FILESYSTEM_SERVER), "args": ["."], "cwd": str(tmp_path)}
    result = await run_team(client, workflow_id, run_input)

    assert [(t.id, t.status) for t in result.tasks] == [
        ("write", "completed"),
        ("review", "completed"),
    ]
    assert (tmp_path / "NOTES.md").read_text().startswith("# Notes\n")
    review = await agent_result(client, workflow_id, "review")
    assert "slugify() folds accents" in str(tool_results(review)[0].content)
    assert processes_in(tmp_path) == []
    await assert_replays(client, workflow_id)


async def test_a_server_that_cannot_start_is_tried_three_times_and_its_stderr_is_quoted(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    broken = {
        "name": "fs",
        "command": "sh",
        "args": [
            "-c",
            f"echo started >> {starts}; echo 'npm ERR! 404 no such package' >&2; exit 1",
        ],
    }

    with pytest.raises(WorkflowFailureError) as caught:
        await run_agent(client, workflow_id, mcp_agent("ok", servers=[broken]), "go")

    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "MCP_SERVER_FAILED"
    assert cause.message.startswith("MCP server 'fs' did not start: ")
    assert cause.message.endswith("; its stderr ends:\nnpm ERR! 404 no such package")
    # a first start may be flaky (npx installing): Temporal tried the listing 3 times
    assert starts.read_text().splitlines() == ["started"] * 3
    await assert_replays(client, workflow_id)


async def test_the_mcp_example_team_runs_on_an_openai_compatible_model(
    client: Client, workflow_id: str, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    # examples/mcp-team.json as written, but for the model's address (the
    # local Chat Completions server, answering as the model would) and the server
    run_input = json.loads((ROOT / "examples/mcp-team.json").read_text())
    for agent in run_input["team"]["agents"]:
        assert (agent["provider"], agent["base_url"]) == ("openai", "https://api.openai.com/v1")
        agent["base_url"] = openai_server.base_url
        for server in agent["mcp_servers"]:
            server |= {"command": str(FILESYSTEM_SERVER), "args": ["."], "cwd": str(tmp_path)}
    openai_server.reset()
    notes = "# Notes\n\n- slugify() folds accents with NFKD.\n"
    openai_server.reply_tool_call("fs__write_file", {"path": "NOTES.md", "content": notes})
    openai_server.reply_tool_call("fs__list_directory", {"path": "."}, id="call_02")
    openai_server.reply_text("NOTES.md is written.")
    openai_server.reply_tool_call("fs__read_text_file", {"path": "NOTES.md"}, id="call_03")
    openai_server.reply_text("The notes are clear.")

    result = await run_team(client, workflow_id, run_input)

    assert [(t.id, t.status, t.output) for t in result.tasks] == [
        ("write", "completed", "NOTES.md is written."),
        ("review", "completed", "The notes are clear."),
    ]
    assert (tmp_path / "NOTES.md").read_text() == notes
    # the reviewer's request offered only its allowed tools, as functions
    review_request = openai_server.requests[3].body
    assert sorted(t["function"]["name"] for t in review_request["tools"]) == [
        "fs__list_directory",
        "fs__read_text_file",
    ]
    # gpt-4.1-mini is in the price table, so the budget has something to count
    assert result.cost_unknown == [] and result.total_cost_usd > 0
    assert processes_in(tmp_path) == []
    await assert_replays(client, workflow_id)


async def test_an_in_process_agent_keeps_its_servers_until_it_is_closed() -> None:
    agent = Agent(
        mcp_agent(
            [tool_use("u1", "t__remember", value="a")],
            [tool_use("u2", "t__pid")],
            "ok",
            servers=[python_server()],
        )
    )
    result = await agent.run("go")
    remembered, pid = tool_results(result)

    assert (remembered.content, result.output) == ("a", "ok")
    assert alive(int(str(pid.content)))  # the Agent's, until close()
    await agent.close()
    assert not alive(int(str(pid.content)))
