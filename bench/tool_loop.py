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
    counts too);
(d) the same loop of the largest size with the ``anthropic`` provider,
    against a local Messages API (``tests/support/anthropic_server.py``, in a
    process of its own): its ``llm_turn`` activities read the conversation
    through the run's ``conversation`` query, counted here (a turn should
    read only the messages added since the previous one).

For (b) and (d) it prints every workflow task's time (``WorkflowTaskStarted``
to ``WorkflowTaskCompleted``, local activities included) and this process's
CPU (worker and client): a workflow task's time must not grow with the
conversation (target: the longest far under the 10 s workflow task timeout).
The last line is::

    tool_call_ratio=… history_ratio_20=… history_ratio_100=… history_ratio_300=…
    longest_workflow_task_20_ms=… … longest_workflow_task_api_300_ms=…
    conversation_messages_read_per_turn=… parallel_5x1s_s=…

Run from the repository root, with the venv active: ``python bench/tool_loop.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

from temporalio import activity
from temporalio.client import Interceptor, OutboundInterceptor, QueryWorkflowInput
from workflow_tasks import WorkflowTasks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from oma.core.contracts.names import ActivityName, QueryName, WorkflowName  # noqa: E402

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
    # the model of (d): asks for page n after n tool results, as many as
    # its first message says ("read N pages"), then answers
    "oma_bench_model": """
import sys

from tests.support.anthropic_server import AnthropicServer, TextReply, ToolUseReply


def first_text(message):
    content = message["content"]
    return content if isinstance(content, str) else content[0]["text"]


def answer(body):
    messages = body["messages"]
    pages = int(first_text(messages[0]).split()[1])
    done = sum(message["role"] == "user" for message in messages) - 1
    if done < pages:
        return ToolUseReply("page", {"number": done}, id=f"toolu_{done:04d}")
    return TextReply("read them all")


with AnthropicServer(answer, keep_requests=False) as api:
    print(api.base_url, flush=True)
    sys.stdin.read()
""",
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


async def history_ratio(client: Any, calls: int) -> tuple[float, int, int, WorkflowTasks]:
    """Run the loop; ``(history bytes / conversation bytes, history,
    conversation, its workflow tasks)``."""
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
        WorkflowName.AGENT_RUN,
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
    tasks = WorkflowTasks().add(wid, history)
    conversation: list[Any] = []
    while True:  # in slices: a query answer is capped like any payload (2 MB)
        part = await handle.query(QueryName.CONVERSATION, {"start": len(conversation)})
        if not part:
            break
        conversation += part
    content_bytes = len(json.dumps(conversation))
    return history_bytes / content_bytes, history_bytes, content_bytes, tasks


class ConversationReads(Interceptor):
    """A client interceptor counting the ``conversation`` queries made through
    the client (the worker's: its ``llm_turn`` activities') and the messages
    they returned."""

    def __init__(self) -> None:
        self.queries = 0
        self.messages = 0

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Counting(next, self)


class _Counting(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, reads: ConversationReads) -> None:
        super().__init__(next)
        self._reads = reads

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        result = await super().query_workflow(input)
        if input.query == QueryName.CONVERSATION:
            self._reads.queries += 1
            self._reads.messages += len(result)
        return result


async def model_loop(client: Any, calls: int) -> WorkflowTasks:
    """(d): the loop of ``calls`` tool calls with the ``anthropic`` provider;
    its workflow tasks."""
    agent = {
        "name": "reader",
        "provider": "anthropic",
        "tools": ["oma_bench_tools:page"],
        "max_turns": calls + 1,
        "max_repeated_tool_calls": calls + 1,
    }
    wid = f"bench-model-{calls}-{uuid.uuid4().hex[:8]}"
    result = await client.execute_workflow(
        WorkflowName.AGENT_RUN,
        {"agent": agent, "input": f"read {calls} pages"},
        id=wid,
        task_queue=TASK_QUEUE,
    )
    assert result["status"] == "completed" and result["turns"] == calls + 1, result
    history = await client.get_workflow_handle(wid).fetch_history()
    return WorkflowTasks().add(wid, history)


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
        WorkflowName.AGENT_RUN, {"agent": agent, "input": "nap"}, id=wid, task_queue=TASK_QUEUE
    )
    events = (await client.get_workflow_handle(wid).fetch_history()).events
    first, last = events[0].event_time.ToDatetime(), events[-1].event_time.ToDatetime()
    return (last - first).total_seconds()


async def bench(address: str, model_url: str, calls: int, sizes: list[int]) -> str:
    import oma_bench_tool_floor  # type: ignore[import-not-found]
    from temporalio.client import Client
    from temporalio.worker import Worker

    from oma import worker as oma_worker
    from oma.core.contracts.tools import ToolCallInput
    from oma.core.schema.tools import ToolRef
    from oma.runtime.connection import Connection
    from tests.support.runs import worker_activities

    client = await Connection.local(address, TASK_QUEUE).connect()
    activities = worker_activities(TASK_QUEUE, model_url)
    reads = ConversationReads()
    counted = Client(**{**client.config(), "interceptors": [reads]})
    worker = Worker(
        oma_worker.serving_client(counted, activities),
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
        await timed_calls(client, ActivityName.TOOL_CALL, tool_arg, 5)  # warm-up: imports, caches
        await timed_calls(client, "bench_bare", tool_arg, 5)
        tool_s = await timed_calls(client, ActivityName.TOOL_CALL, tool_arg, calls)
        bare_s = await timed_calls(client, "bench_bare", tool_arg, calls)
        ratio = tool_s / bare_s
        print(
            f"(a) {calls} calls: tool_call {tool_s * 1000 / calls:.2f} ms/call, bare activity "
            f"{bare_s * 1000 / calls:.2f} ms/call, ratio {ratio:.2f}",
            flush=True,
        )
        ratios: dict[int, float] = {}
        longest: dict[int, float] = {}
        for size in sizes:
            start, cpu = time.perf_counter(), time.process_time()
            ratios[size], history_bytes, content_bytes, tasks = await history_ratio(client, size)
            longest[size] = tasks.longest_s
            print(
                f"(b) {size} tool calls: history {history_bytes:,} bytes, conversation "
                f"{content_bytes:,} bytes, ratio {ratios[size]:.2f} "
                f"({time.perf_counter() - start:.1f} s, {time.process_time() - cpu:.1f} s "
                f"CPU of this process); {tasks.line()}",
                flush=True,
            )
        wall = await parallel(client)
        print(f"(c) 5 concurrent 1-second tool calls in one turn: {wall:.2f} s", flush=True)
        size = max(sizes)
        start, cpu = time.perf_counter(), time.process_time()
        tasks = await model_loop(client, size)
        turns = size + 1
        print(
            f"(d) {size} tool calls, anthropic provider: {turns} turns read "
            f"{reads.messages:,} messages in {reads.queries} conversation queries "
            f"({reads.messages / turns:.1f} a turn; the last turn's conversation holds "
            f"{2 * size + 1}) "
            f"({time.perf_counter() - start:.1f} s, {time.process_time() - cpu:.1f} s CPU of "
            f"this process); {tasks.line()}",
            flush=True,
        )
    await activities.acp_pool.close_all()
    history = " ".join(f"history_ratio_{n}={r:.2f}" for n, r in ratios.items())
    longest_ms = " ".join(
        f"longest_workflow_task_{n}_ms={seconds * 1000:.0f}" for n, seconds in longest.items()
    )
    return (
        f"tool_call_ratio={ratio:.2f} {history} {longest_ms} "
        f"longest_workflow_task_api_{size}_ms={tasks.longest_s * 1000:.0f} "
        f"conversation_messages_read_per_turn={reads.messages / turns:.1f} "
        f"parallel_5x1s_s={wall:.2f}"
    )


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
    model = subprocess.Popen(
        [sys.executable, "-c", "import oma_bench_model"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, directory])},
    )
    try:
        assert model.stdout is not None
        model_url = model.stdout.readline().strip()
        with DevServer(port=free_port()) as server:
            line = asyncio.run(bench(server.address, model_url, args.calls, sizes))
    finally:
        model.kill()
        model.wait()
        shutil.rmtree(directory, ignore_errors=True)
    print(line, flush=True)


if __name__ == "__main__":
    main()
