"""An MCP server's life (``oma.activities.mcp.server``): it starts within its
start timeout or is stopped, and its whole process tree dies on every path —
a normal close, a server that never answers ``initialize``, a SIGKILLed
worker — checked by real pids; an HTTP server's refusal names its status;
a custom tool cannot shadow an MCP tool."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from oma.activities.mcp import server as mcp_server
from oma.core.contracts.names import QueryName, WorkflowName
from oma.core.schema.results import AgentRunResult
from tests.support.approvals import Run
from tests.support.mcp_config import mcp_agent, python_server
from tests.support.procs import alive, dead_soon, descendants
from tests.support.runs import assert_replays, run_agent
from tests.support.tool_calls import tool_results, tool_use

pytestmark = [pytest.mark.usefixtures("worker"), pytest.mark.fault]

GONE_WITHIN_S = 5.0
"""How soon the processes of a server whose worker was SIGKILLed are dead."""


async def all_dead(pids: list[int], within_s: float = GONE_WITHIN_S) -> list[int]:
    """The pids still alive after ``within_s`` seconds (empty: all died)."""
    await asyncio.gather(*(dead_soon(pid, within_s) for pid in pids))
    return [pid for pid in pids if alive(pid)]


async def test_a_stdio_servers_child_process_dies_when_the_run_closes_the_server(
    client: Client, workflow_id: str
) -> None:
    agent = mcp_agent(
        [
            tool_use("u1", "t__pid"),
            tool_use("u2", "t__spawn_child"),
            tool_use("u3", "t__spawn_child", new_session=True),
        ],
        "ok",
        servers=[python_server()],
    )
    result = await run_agent(client, workflow_id, agent, "go")

    pids = [int(str(r.content)) for r in tool_results(result)]
    assert len(set(pids)) == 3
    # the server exits when its stdin closes; the children it left, one of
    # them out of its process group, must not outlive it
    assert await all_dead(pids, within_s=1.0) == []
    await assert_replays(client, workflow_id)


async def test_a_server_that_never_answers_initialize_is_stopped_at_its_start_timeout(
    client: Client, workflow_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_server, "START_TIMEOUT_S", 1.0)
    pids = tmp_path / "pids"
    # reads its stdin and never answers; leaves a child behind
    hung = {
        "name": "hung",
        "command": "sh",
        "args": ["-c", f'sleep 600 & echo "$$ $!" >> {pids}; exec cat > /dev/null'],
    }
    with pytest.raises(WorkflowFailureError) as caught:
        await asyncio.wait_for(
            run_agent(client, workflow_id, mcp_agent("ok", servers=[hung]), "go"), 40
        )

    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "MCP_SERVER_FAILED"
    assert cause.message == (
        "MCP server 'hung' did not start: it did not answer initialize within 1 s"
    )
    started = [int(pid) for line in pids.read_text().splitlines() for pid in line.split()]
    assert len(started) == 6  # 3 attempts, each a server and its child
    assert await all_dead(started, within_s=1.0) == []


async def test_a_sigkilled_workers_stdio_server_and_its_child_die_within_seconds(
    client: Client, workflow_id: str, own_worker: tuple[subprocess.Popen[str], str]
) -> None:
    worker, queue = own_worker
    agent = mcp_agent(
        [
            tool_use("u1", "t__pid"),
            tool_use("u2", "t__spawn_child"),
            tool_use("u4", "t__spawn_child", new_session=True),
        ],
        [tool_use("u3", "t__remember", value="b")],
        "ok",
        servers=[python_server()],
    )
    handle = await client.start_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": agent, "input": "go", "approvals": {"tools": ["t__remember"]}},
        id=workflow_id,
        task_queue=queue,
        result_type=AgentRunResult,
    )
    try:
        await Run(handle).request("tool-1")  # the run waits, its server held by the worker
        state = await handle.query(QueryName.STATE, result_type=AgentRunResult)
        server, child, daemon = (int(str(r.content)) for r in tool_results(state))
        tree = descendants(worker.pid)
        assert {server, child, daemon} <= set(tree) and all(map(alive, tree))

        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()

        assert await all_dead(tree) == []
    finally:
        await handle.terminate("test over")


class Refusing(BaseHTTPRequestHandler):
    """Answers every request 401, as a server whose token is wrong or missing."""

    posts: list[str] = []

    def do_POST(self) -> None:
        self.posts.append(self.path)
        self.send_response(401, "Unauthorized")
        self.send_header("WWW-Authenticate", "Bearer")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_DELETE = do_POST

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    Refusing.posts = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    httpd.shutdown()
    httpd.server_close()


async def test_an_http_server_that_refuses_is_named_with_its_status_and_not_retried(
    client: Client, workflow_id: str, refusing_server: str
) -> None:
    agent = mcp_agent("ok", servers=[{"name": "web", "url": refusing_server}])
    with pytest.raises(WorkflowFailureError) as caught:
        await run_agent(client, workflow_id, agent, "go")

    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "MCP_SERVER_FAILED"
    assert cause.message == (
        "MCP server 'web' did not start: it answered initialize with HTTP 401 Unauthorized"
    )
    assert cause.non_retryable
    assert len(Refusing.posts) == 1  # a refusal is not tried again
    await assert_replays(client, workflow_id)


async def test_a_custom_tool_named_like_an_mcp_tool_is_an_input_error(
    client: Client, workflow_id: str
) -> None:
    agent = mcp_agent(
        [tool_use("u1", "t__pid")],
        "ok",
        servers=[python_server()],
        tools=["tests.support.tools:t__pid"],
    )
    with pytest.raises(WorkflowFailureError) as caught:
        await run_agent(client, workflow_id, agent, "go")

    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "INVALID_RUN_INPUT"
    assert cause.message == (
        "agent 'clerk': custom tool 'tests.support.tools:t__pid' has the name of MCP server 't''s "
        "tool 'pid' (t__pid); rename the function or the server"
    )
    await assert_replays(client, workflow_id)
