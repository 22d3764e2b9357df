"""What an LLM agent's tool loop costs on Temporal, against one embedded dev
server and one in-process worker:

(a) per tool call: a no-op custom tool as a ``tool_call`` activity against a
    bare no-op activity of the same shape (the same input and output sizes),
    each called ``--calls`` times in sequence by a plain workflow (target
    ratio at most 1.3);
(b) history bytes (the events' stored size) of an ``AgentRun`` whose
    scripted model makes 20, 100 and 300 tool calls (one per turn) that each
    return 10 KB, against the JSON of the conversation itself (target at most
    3x at every size; the 300-call run must complete);
(c) wall time of 5 concurrent 1-second tool calls in one turn (target at
    most 1.5 s; the run's first and last events, so the turn around them
    counts too).

The last line is::

    tool_call_ratio=… history_ratio_20=… history_ratio_100=… history_ratio_300=… parallel_5x1s_s=…

Run from the repository root, with the venv active: ``python bench/tool_loop.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from typing import Any

from temporalio import activity

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

TASK_QUEUE = "oma-bench-tools"
PAGE_BYTES = 10_000

# The custom tools and the floor workflow live in modules of their own,
# written to a temporary directory (the worker loads tools by import path,
# and the workflow sandbox re-imports a workflow's module per run).
MODULES = {
    "oma_bench_tools": f'''
import asyncio


def noop(page: str) -> str:
    """Returns its input."""
    return page


def page(number: int) -> str:
    """About {PAGE_BYTES} bytes of text."""
    return f"page {{number}}\\n" + "x" * {PAGE_BYTES}


async def nap(seconds: float, n: int) -> str:
    """Sleeps."""
    await asyncio.sleep(seconds)
    return f"slept {{n}}"
''',
    "oma_bench_tool_floor": """
from datetime import timedelta

from temporalio import workflow


@workflow.defn(name="BenchCalls")
class Calls:
    \"\"\"``count`` calls of activity ``name`` with ``arg``, one after the other.\"\"\"

    @workflow.run
    async def run(self, name: str, arg: dict, count: int) -> int:
        for _ in range(count):
            await workflow.execute_activity(
                name, arg, start_to_close_timeout=timedelta(minutes=1)
            )
        return count
""",
}


@activity.defn(name="bench_bare")
async def bare(arg: dict[str, Any]) -> dict[str, Any]:
    """The floor: returns what ``tool_call`` returns for the no-op tool, built by hand."""
    return {"content": arg["input"]["page"], "is_error": False, "truncated": False}


def tool_use(tool_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": args}


async def timed_calls(client: Any, name: str, arg: dict[str, Any], count: int) -> float:
    start = time.perf_counter()
    await client.execute_workflow(
        "BenchCalls",
        args=[name, arg, count],
        id=f"bench-calls-{name}-{uuid.uuid4().hex[:8]}",
        task_queue=TASK_QUEUE,
    )
    return time.perf_counter() - start


async def history_ratio(client: Any, calls: int) -> tuple[float, int, int]:
    """Run the loop; ``(history bytes / conversation bytes, history, conversation)``."""
    from oma.core.schema.results import AgentRunResult

    script: list[Any] = [[tool_use(f"u{n}", "page", number=n)] for n in range(calls)]
    agent = {
        "name": "reader",
        "provider": "scripted",
        "script": [*script, "read them all"],
        "tools": ["oma_bench_tools:page"],
        "max_turns": calls + 1,
        "max_repeated_tool_calls": calls + 1,
    }
    wid = f"bench-history-{calls}-{uuid.uuid4().hex[:8]}"
    result: AgentRunResult = await client.execute_workflow(
        "AgentRun",
        {"agent": agent, "input": "read every page"},
        id=wid,
        task_queue=TASK_QUEUE,
        result_type=AgentRunResult,
    )
    assert result.status == "completed", result.error
    handle = client.get_workflow_handle(wid)
    history = await handle.fetch_history()
    # the events as the server stores them (protobuf), not their JSON export,
    # whose base64 payloads are a third larger
    history_bytes = sum(event.ByteSize() for event in history.events)
    conversation: list[Any] = []
    while True:  # in slices: a query answer is capped like any payload (2 MB)
        part = await handle.query("conversation", {"start": len(conversation)})
        if not part:
            break
        conversation += part
    content_bytes = len(json.dumps(conversation))
    return history_bytes / content_bytes, history_bytes, content_bytes


async def parallel(client: Any) -> float:
    """Seconds from the AgentRun's start to its end: one turn of 5 one-second calls."""
    turn = [tool_use(f"u{n}", "nap", seconds=1.0, n=n) for n in range(5)]
    agent = {
        "name": "napper",
        "provider": "scripted",
        "script": [turn, "rested"],
        "tools": ["oma_bench_tools:nap"],
    }
    wid = f"bench-parallel-{uuid.uuid4().hex[:8]}"
    await client.execute_workflow(
        "AgentRun", {"agent": agent, "input": "nap"}, id=wid, task_queue=TASK_QUEUE
    )
    events = (await client.get_workflow_handle(wid).fetch_history()).events
    first, last = events[0].event_time.ToDatetime(), events[-1].event_time.ToDatetime()
    return (last - first).total_seconds()


async def bench(address: str, calls: int, sizes: list[int]) -> str:
    import oma_bench_tool_floor  # type: ignore[import-not-found]
    from temporalio.worker import Worker

    from oma import worker as oma_worker
    from oma.core.schema.tools import ToolCallInput, ToolRef
    from oma.runtime.connection import Connection

    client = await Connection.local(address, TASK_QUEUE).connect()
    activities = oma_worker.Activities(session_task_queue=oma_worker.session_task_queue(TASK_QUEUE))
    worker = Worker(
        oma_worker.serving_client(client, activities),
        task_queue=TASK_QUEUE,
        workflows=[oma_bench_tool_floor.Calls],
        activities=[bare],
        max_concurrent_activities=50,
    )
    page = "x" * 100
    tool_arg = ToolCallInput(
        agent="bench",
        tool=ToolRef(name="noop", source="oma_bench_tools:noop"),
        tool_use_id="u1",
        input={"page": page},
    ).model_dump(mode="json")
    async with worker:
        await timed_calls(client, "tool_call", tool_arg, 5)  # warm-up: imports, caches
        await timed_calls(client, "bench_bare", tool_arg, 5)
        tool_s = await timed_calls(client, "tool_call", tool_arg, calls)
        bare_s = await timed_calls(client, "bench_bare", tool_arg, calls)
        ratio = tool_s / bare_s
        print(
            f"(a) {calls} calls: tool_call {tool_s * 1000 / calls:.2f} ms/call, bare activity "
            f"{bare_s * 1000 / calls:.2f} ms/call, ratio {ratio:.2f}",
            flush=True,
        )
        ratios: dict[int, float] = {}
        for size in sizes:
            start = time.perf_counter()
            ratios[size], history_bytes, content_bytes = await history_ratio(client, size)
            print(
                f"(b) {size} tool calls: history {history_bytes:,} bytes, conversation "
                f"{content_bytes:,} bytes, ratio {ratios[size]:.2f} "
                f"({time.perf_counter() - start:.1f} s)",
                flush=True,
            )
        wall = await parallel(client)
        print(f"(c) 5 concurrent 1-second tool calls in one turn: {wall:.2f} s", flush=True)
    await activities.acp_pool.close_all()
    history = " ".join(f"history_ratio_{size}={r:.2f}" for size, r in ratios.items())
    return f"tool_call_ratio={ratio:.2f} {history} parallel_5x1s_s={wall:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per (a) measurement")
    parser.add_argument("--sizes", default="20,100,300", help="tool calls per (b) run")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    from oma.runtime.dev_server import DevServer, free_port

    directory = tempfile.mkdtemp(prefix="oma-bench-tools-")
    for name, source in MODULES.items():
        with open(os.path.join(directory, f"{name}.py"), "w") as f:
            f.write(source.lstrip())
    sys.path.insert(0, directory)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}", flush=True)
    try:
        with DevServer(port=free_port()) as server:
            line = asyncio.run(bench(server.address, args.calls, sizes))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(line, flush=True)


if __name__ == "__main__":
    main()
