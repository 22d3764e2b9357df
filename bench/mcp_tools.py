"""What an MCP tool call costs on Temporal, against one embedded dev server
and one in-process worker, on the filesystem MCP server
(``@modelcontextprotocol/server-filesystem``, installed by ``make
tests/npm/node_modules/.installed``) over stdio:

(a) per call: ``read_text_file`` of a small file as a ``tool_call`` activity
    (the run's server in the worker's ``McpServerPool``, the call routed to
    the worker's own task queue) against an activity of the same shape that
    calls the same kind of server directly with the ``mcp`` SDK
    (``ClientSession.call_tool`` on a session it holds open), each called
    ``--calls`` times in sequence by a plain workflow, in 4 interleaved
    rounds, both served by the same worker on its own task queue (target
    ratio at most 1.3); the bare SDK call without Temporal is printed for
    scale;
(b) server restarts across an ``AgentRun`` whose scripted model makes 50
    MCP tool calls (one per turn): the servers the worker started, minus the
    one the run needs (target 0).

The last line is::

    mcp_tool_call_ratio=… mcp_restarts_50=…

Run from the repository root, with the venv active: ``python bench/mcp_tools.py``
(not ``mcp.py``: a script's directory comes first on ``sys.path`` and would
hide the ``mcp`` SDK).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from typing import Any

from temporalio import activity

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from oma.core.contracts.names import ActivityName, WorkflowName  # noqa: E402

TASK_QUEUE = "oma-bench-mcp"
FLOOR_QUEUE = "oma-bench-mcp-floor"
ROUNDS = 4
SERVER = os.path.join(ROOT, "tests/npm/node_modules/.bin/mcp-server-filesystem")

FLOOR_MODULE = """
from datetime import timedelta

from temporalio import workflow


@workflow.defn(name="BenchMcpCalls")
class Calls:
    \"\"\"``count`` calls of activity ``name`` with ``arg`` on ``queue``, in sequence.\"\"\"

    @workflow.run
    async def run(self, name: str, arg: dict, count: int, queue: str) -> int:
        for _ in range(count):
            await workflow.execute_activity(
                name, arg, task_queue=queue, start_to_close_timeout=timedelta(minutes=1)
            )
        return count
"""


class Direct:
    """One ``ClientSession`` on its own filesystem server, held open (the floor)."""

    def __init__(self) -> None:
        self.stack = AsyncExitStack()
        self.session: Any = None

    async def open(self, directory: str) -> None:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=SERVER, args=[directory])
        read, write = await self.stack.enter_async_context(stdio_client(params))
        self.session = await self.stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()

    @activity.defn(name="bench_mcp_direct")
    async def call(self, arg: dict[str, Any]) -> dict[str, Any]:
        """What ``tool_call`` returns, from the SDK called directly."""
        result = await self.session.call_tool(arg["mcp"]["tool"], arg["input"])
        text = "\n".join(block.text for block in result.content)
        return {"content": text, "is_error": bool(result.is_error), "truncated": False}


async def timed_calls(client: Any, name: str, arg: dict[str, Any], count: int, queue: str) -> float:
    start = time.perf_counter()
    await client.execute_workflow(
        "BenchMcpCalls",
        args=[name, arg, count, queue],
        id=f"bench-mcp-{name}-{uuid.uuid4().hex[:8]}",
        task_queue=FLOOR_QUEUE,
    )
    return time.perf_counter() - start


async def restarts(client: Any, pool: Any, directory: str, calls: int) -> int:
    """Servers started beyond the run's one, over an ``AgentRun`` of ``calls`` MCP calls."""
    from oma.core.schema.results import AgentRunResult

    for n in range(calls):
        with open(os.path.join(directory, f"page{n}.txt"), "w") as f:
            f.write(f"page {n}\n")
    script: list[Any] = [
        [
            {
                "type": "tool_use",
                "id": f"u{n}",
                "name": "fs__read_text_file",
                "input": {"path": os.path.join(directory, f"page{n}.txt")},
            }
        ]
        for n in range(calls)
    ]
    agent = {
        "name": "reader",
        "provider": "scripted",
        "script": [*script, "read them all"],
        "mcp_servers": [{"name": "fs", "command": SERVER, "args": [directory]}],
        "max_turns": calls + 1,
    }
    before = pool.spawn_count
    result: AgentRunResult = await client.execute_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": agent, "input": "read every page"},
        id=f"bench-mcp-run-{uuid.uuid4().hex[:8]}",
        task_queue=TASK_QUEUE,
        result_type=AgentRunResult,
    )
    assert result.status == "completed", result.error
    failed = [c for c in result.tool_calls if c.status != "completed"]
    assert len(result.tool_calls) == calls and not failed, failed[:1]
    return pool.spawn_count - before - 1


async def bench(address: str, calls: int, directory: str) -> str:

    from oma import worker as oma_worker
    from oma.runtime.connection import Connection

    with open(os.path.join(directory, "notes.txt"), "w") as f:
        f.write("alpha\n" * 10)
    client = await Connection.local(address, TASK_QUEUE).connect()
    direct = Direct()
    await direct.open(directory)

    class WithFloor(oma_worker.Activities):
        """The worker's activities and the floor, served alike (same worker,
        data converter and task queue)."""

        def session_activities(self) -> list[Any]:
            return [*super().session_activities(), direct.call]

    activities = WithFloor(session_task_queue=oma_worker.session_task_queue(TASK_QUEUE))
    try:
        return await _measure(client, activities, direct, directory, calls)
    finally:
        await activities.mcp_pool.close_all()
        await direct.stack.aclose()


async def _measure(client: Any, activities: Any, direct: Direct, directory: str, calls: int) -> str:
    import oma_bench_mcp_floor  # type: ignore[import-not-found]
    from temporalio.worker import Worker

    from oma import worker as oma_worker
    from oma.core.contracts.tools import ToolCallInput
    from oma.core.schema.mcp import McpCall, McpServerConfig
    from oma.core.schema.tools import ToolRef

    # the workflow that makes the calls, on a queue of its own
    floor = Worker(client, task_queue=FLOOR_QUEUE, workflows=[oma_bench_mcp_floor.Calls])
    worker = oma_worker.build_worker(client, TASK_QUEUE, activities)
    server = McpServerConfig(name="fs", command=SERVER, args=[directory])
    arg = ToolCallInput(
        agent="bench",
        tool=ToolRef(name="fs__read_text_file", source="mcp:fs"),
        tool_use_id="u1",
        input={"path": os.path.join(directory, "notes.txt")},
        mcp=McpCall(run_key="bench/run", server=server, tool="read_text_file"),
    ).model_dump(mode="json")
    queue = activities.session_task_queue
    async with worker, floor:
        await timed_calls(
            client, ActivityName.TOOL_CALL, arg, 5, queue
        )  # warm-up; starts the server
        await timed_calls(client, "bench_mcp_direct", arg, 5, queue)
        tool_s = direct_s = 0.0
        for _ in range(ROUNDS):  # interleaved, so that a drift of the machine's load hits both
            tool_s += await timed_calls(client, ActivityName.TOOL_CALL, arg, calls // ROUNDS, queue)
            direct_s += await timed_calls(client, "bench_mcp_direct", arg, calls // ROUNDS, queue)
        calls = calls // ROUNDS * ROUNDS
        start = time.perf_counter()
        for _ in range(calls):
            await direct.call(arg)
        sdk_s = time.perf_counter() - start
        ratio = tool_s / direct_s
        print(
            f"(a) {calls} calls: tool_call {tool_s * 1000 / calls:.2f} ms/call, activity calling "
            f"the SDK directly {direct_s * 1000 / calls:.2f} ms/call, ratio {ratio:.2f} "
            f"(the SDK alone, no Temporal: {sdk_s * 1000 / calls:.2f} ms/call)",
            flush=True,
        )
        extra = await restarts(client, activities.mcp_pool, directory, 50)
        print(f"(b) 50 MCP calls in one AgentRun: {extra} server restarts", flush=True)
    return f"mcp_tool_call_ratio={ratio:.2f} mcp_restarts_50={extra}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per (a) measurement")
    args = parser.parse_args()
    if not os.path.exists(SERVER):
        sys.exit(f"{SERVER} is missing: run `make tests/npm/node_modules/.installed`")

    from oma.runtime.dev_server import DevServer, free_port

    directory = tempfile.mkdtemp(prefix="oma-bench-mcp-")
    with open(os.path.join(directory, "oma_bench_mcp_floor.py"), "w") as f:
        f.write(FLOOR_MODULE.lstrip())
    sys.path.insert(0, directory)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}", flush=True)
    try:
        with DevServer(port=free_port()) as server:
            line = asyncio.run(bench(server.address, args.calls, os.path.realpath(directory)))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(line, flush=True)


if __name__ == "__main__":
    main()
