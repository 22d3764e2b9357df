"""How much a ``TeamRun`` task costs over the plain-Temporal floor.

Runs, against one embedded dev server and one in-process worker:

1. a ``TeamRun`` of ``chains`` independent chains of ``length`` tasks, every
   agent a ``scripted`` LLM agent with a one-response script (instant; at most
   ``AGENTS`` of them), with ``options.max_concurrency = chains`` (at most
   ``MAX_CONCURRENCY``; past ``MAX_RUN_TASKS`` tasks the run runs in shards,
   ``TeamRun`` children, whose histories and workflow tasks count as the run's);
2. floor (a): a plain workflow running the same shape of no-op activities;
3. floor (b): a plain workflow running the same shape of no-op child workflows;
4. the same ``TeamRun`` as 1 with encryption on: a client and a worker (on a
   task queue of its own) with the AES-GCM payload codec of ``oma.runtime.codec``
   (a fresh key), every payload and failure attribute encrypted;
5. ``team_run_bare``: the same ``TeamRun`` as 1 with
   ``options.task_search_attributes`` false: its tasks' runs carry no search
   attribute (the four of 1 cost the server a visibility write's worth each).

It does so at each size of ``--sizes`` (default 200, 800 and 5,000 tasks),
for the runners of ``--runners`` (default all five); the floors skip a size
past ``FLOOR_MAX_TASKS`` (their one history would pass Temporal's 51,200
events) or ``FLOOR_MAX_CHAINS`` (the server's limits of pending steps), and
say so. The dev server keeps its histories in memory, or with ``--db-file`` in a
SQLite file as ``oma run``'s embedded server does (as fast, with its
write-ahead log; an in-memory server holding a 100,000-task run's histories
fills the memory). The OMA runs keep large payloads in a payload store of their own (a
temporary directory, or ``payloads`` beside ``--db-file``), as the embedded
dev server does; each
measurement prints the bytes it stored (``store_bytes``) and this process's
peak RSS so far (``peak_rss_mb``: the worker and the client).
Each gets a small warm-up run first. For each it prints the wall time, the
milliseconds per task, the history events per task (every run of the parent,
which continues as new past ``options.history_event_limit`` events, plus every
child's), the longest history of the parent, the CPU per task of this
process (worker and client) and of the dev server, and the parent's workflow
tasks: the longest (``WorkflowTaskStarted`` to ``Completed``, a worker's wait
for a thread included) and its activations' CPU (median, p99 and the longest,
which is a run's first: it reads the run's input; ``workflow_tasks.py``). A
workflow task's work must not grow with the run's size, and the longest must
stay far under the 10 s workflow task timeout. On a small machine the run
is CPU-bound, worker and server sharing the cores, so other load on the
machine moves the wall times: compare the CPU columns too, or use
``--repeat`` (medians; ``--repeat-up-to`` repeats only the smaller sizes, for
a largest one that takes an hour). The summary ends with one line per size,
of what was measured at it::

    tasks=<n> per_task_ms=<x> events_per_task=<v> peak_rss_mb=<m> store_bytes=<b>
    team_run_histories=<runs> longest_team_run_history=<events>
    longest_team_run_workflow_task_ms=<w> longest_team_run_activation_cpu_ms=<a>
    team_run_activation_cpu_p99_ms=<p> ratio_vs_smallest=<x/x of the smallest size>
    ratio_vs_first_mean=<x/the mean x of the first shape, when listed again>
    floor_activity_ms=<y> floor_child_ms=<z> ratio_vs_child_floor=<x/z>
    cpu_ratio_vs_child_floor=<c> bare_per_task_ms=<b> bare_events_per_task=<v>
    ratio_bare_vs_child_floor=<b/z> bare_ratio_vs_smallest=<b/b of the smallest size>
    encrypted_per_task_ms=<e> ratio_encrypted_vs_plain=<e/x>

A shape listed twice in ``--sizes`` is measured twice, in its place each
time. Listing the first shape again last (``10x100,1000x100,10x100``)
brackets the largest run: its ``ratio_vs_first_mean`` compares it with the
mean of the first shape's measurements before and after it, taken in a fresh
database and in the grown one, so that neither the machine's speed drifting
over an hour nor the dev server's database growing with earlier runs passes
for a cost of the size (``ratio_vs_smallest`` keeps the first measurement
alone). ``cpu_ratio_vs_child_floor`` is the same ratio of the CPU per task (this
process's and the dev server's together): it moves less than the wall time
with other load on the machine. The per-task overhead must not grow with
the size; ``ratio_encrypted_vs_plain`` is what the payload codec costs.

Run from the repository root, with the venv active: ``python bench/dag_overhead.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from workflow_tasks import ActivationClock, Activations, WorkflowTasks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from oma.core.contracts.names import WorkflowName  # noqa: E402

TASK_QUEUE = "oma-bench"
ENCRYPTED_TASK_QUEUE = "oma-bench-encrypted"
WARMUP_SHAPE = (2, 2)
MAX_CONCURRENT_WORKFLOW_TASKS = 100
MAX_CONCURRENT_ACTIVITIES = 100


def run_timeout(tasks: int) -> timedelta:
    """A measured workflow that has not finished by then fails (say, a workflow
    task failing over and over) instead of hanging the benchmark."""
    return timedelta(seconds=max(300, tasks * 0.2))


DEFAULT_SIZES = "20x10,40x20,50x100"
"""200, 800 and 5,000 tasks: the per-task overhead must not grow with the size."""

AGENTS = 10
"""The most agents a run's team has: chain ``c`` runs on ``agent-<c % AGENTS>``
(a wide fan-out is one team of ten, not a hundred thousand agents)."""

FLOOR_MAX_TASKS = 8_000
"""The floors run one workflow that starts every step itself, with no
continue-as-new: a step takes up to six events of its history (a workflow
task for each step that ends alone, as in a chain), so past about 8,000 steps
it would pass Temporal's 51,200 events (a 10,000-step floor of 100 chains was
terminated so), and larger sizes skip them (said in the output)."""

FLOOR_MAX_CHAINS = 2_000
"""The floors start every chain's first step at once: past 2,000 chains the
server refuses the workflow task on every attempt (its per-workflow limits of
2,000 pending children, ``PendingChildWorkflowsLimitExceeded``, and of 2,000
pending activities), so wider shapes skip them too. A ``TeamRun`` starts at
most ``max_concurrency`` (at most ``MAX_CONCURRENCY``, 1,000) at once."""

Shape = tuple[int, int]
"""``(chains, length)``: ``chains`` independent chains of ``length`` sequential steps."""


@activity.defn(name="bench_noop")
async def noop() -> None:
    """Does nothing."""


# The floor workflows. The workflow sandbox re-imports a workflow's module for
# every workflow instance it creates (compiling it from source when no .pyc
# can be written, as with PYTHONDONTWRITEBYTECODE=1), so the no-op child lives
# in a module of its own holding nothing else, and the two parents in another:
# otherwise each floor child would pay for compiling and decorating this whole
# file, and the floor would look dearer than a real no-op child is. They are
# written to a temporary directory at start-up and imported from there.
FLOOR_MODULES = {
    "oma_bench_floor_child": '''
from temporalio import workflow


@workflow.defn(name="BenchFloorChild")
class FloorChild:
    """A child workflow that does nothing and returns."""

    @workflow.run
    async def run(self) -> None:
        return None
''',
    "oma_bench_floor": '''
import asyncio
from datetime import timedelta

from temporalio import workflow


@workflow.defn(name="BenchFloorActivities")
class FloorActivities:
    """``chains`` chains in parallel; each step one no-op activity."""

    @workflow.run
    async def run(self, chains: int, length: int) -> int:
        async def chain() -> None:
            for _ in range(length):
                await workflow.execute_activity(
                    "bench_noop", start_to_close_timeout=timedelta(minutes=1)
                )

        await asyncio.gather(*(chain() for _ in range(chains)))
        return chains * length


@workflow.defn(name="BenchFloorChildren")
class FloorChildren:
    """``chains`` chains in parallel; each step one no-op child workflow."""

    @workflow.run
    async def run(self, chains: int, length: int) -> int:
        parent = workflow.info().workflow_id

        async def chain(c: int) -> None:
            for i in range(length):
                await workflow.execute_child_workflow("BenchFloorChild", id=f"{parent}/c{c}-t{i}")

        await asyncio.gather(*(chain(c) for c in range(chains)))
        return chains * length
''',
}


def floor_workflows(directory: str) -> list[type]:
    """Write the floor modules to ``directory``, import them, return their workflows."""
    for name, source in FLOOR_MODULES.items():
        with open(os.path.join(directory, f"{name}.py"), "w") as f:
            f.write(source.lstrip())
    sys.path.insert(0, directory)
    child = importlib.import_module("oma_bench_floor_child")
    parents = importlib.import_module("oma_bench_floor")
    return [parents.FloorActivities, parents.FloorChildren, child.FloorChild]


def team_run_input(chains: int, length: int, task_attributes: bool = True) -> dict[str, Any]:
    """A ``TeamRun`` input: scripted agents (a one-response script), chain
    ``c`` on ``agent-<c % AGENTS>``, each task depending on the previous
    task of its chain; at most ``MAX_CONCURRENCY`` tasks at once; its tasks'
    runs with search attributes or (``task_attributes`` false) without."""
    from oma.core.schema.limits import MAX_CONCURRENCY

    agents = [
        {"name": f"agent-{c}", "provider": "scripted", "script": ["ok"]}
        for c in range(min(chains, AGENTS))
    ]
    tasks = [
        {
            "id": f"c{c}-t{i}",
            "title": f"C{c} t{i}",
            "description": "answer ok",
            "assignee": f"agent-{c % AGENTS}",
            "depends_on": [f"c{c}-t{i - 1}"] if i else [],
        }
        for c in range(chains)
        for i in range(length)
    ]
    return {
        "team": {"name": "bench", "agents": agents},
        "tasks": tasks,
        "options": {
            "max_concurrency": min(chains, MAX_CONCURRENCY),
            "task_search_attributes": task_attributes,
        },
    }


class Measurement:
    """One timed run: wall time, history events and CPU used, the parent's
    workflow tasks and their activations."""

    def __init__(
        self,
        name: str,
        tasks: int,
        seconds: float,
        counts: tuple[int, int, int, int],
        cpu: Any,
        workflow_tasks: tuple[WorkflowTasks, Activations],
        memory: tuple[float, int],
    ) -> None:
        self.name, self.tasks, self.seconds = name, tasks, seconds
        self.events, self.histories, self.runs, self.longest = counts
        self.worker_cpu_s, self.server_cpu_s = cpu
        self.workflow_tasks, self.activations = workflow_tasks
        self.peak_rss_mb, self.store_bytes = memory

    @property
    def ms_per_task(self) -> float:
        return self.seconds * 1000 / self.tasks

    def line(self) -> str:
        per = 1000 / self.tasks
        return (
            f"{self.name:<15} tasks={self.tasks:<5} total_s={self.seconds:7.3f} "
            f"ms_per_task={self.ms_per_task:7.2f} "
            f"events_per_task={self.events / self.tasks:6.2f} "
            f"({self.events} events in {self.histories} histories, the workflow's own "
            f"{self.runs} run(s), the longest {self.longest} events) "
            f"cpu_ms_per_task worker={self.worker_cpu_s * per:.2f} "
            f"server={self.server_cpu_s * per:.2f} "
            f"peak_rss_mb={self.peak_rss_mb:.0f} store_bytes={self.store_bytes}\n"
            f"{'':<15} its workflow tasks: {self.workflow_tasks.line()}\n"
            f"{'':<15} their activations: {self.activations.line()}"
        )


async def count_events(
    client: Any, workflow_id: str, tasks: WorkflowTasks | None = None
) -> tuple[tuple[int, int, int, int], WorkflowTasks]:
    """Events in the history of ``workflow_id`` plus those of every child it
    started (read from its ``ChildWorkflowExecutionStarted`` events), over
    every run of it (continue-as-new), a sharded run's shards counted as
    the run is (their runs, their children); returns ``(events, histories,
    team runs, events in the longest team run's history)`` and the workflow
    tasks of the team runs (added to ``tasks``)."""
    from oma.records.executions import started_children

    runs = await run_histories(client, workflow_id)
    tasks = tasks if tasks is not None else WorkflowTasks()
    for run in runs:
        tasks.add(workflow_id, run)
    children = started_children(runs)
    shards = [c for c in children if SHARD_ID.search(c.workflow_id)]
    limit = asyncio.Semaphore(16)

    async def child_events(execution: Any) -> int:
        async with limit:
            handle = client.get_workflow_handle(execution.workflow_id, run_id=execution.run_id)
            return len((await handle.fetch_history()).events)

    counts = await asyncio.gather(*(child_events(x) for x in children if x not in shards))
    parents = [len(run.events) for run in runs]
    events, histories = sum(parents) + sum(counts), len(runs) + len(counts)
    team_runs, longest = len(runs), max(parents)
    for shard in shards:
        (e, h, r, most), _ = await count_events(client, shard.workflow_id, tasks)
        events, histories, team_runs, longest = (
            events + e,
            histories + h,
            team_runs + r,
            max(longest, most),
        )
    return (events, histories, team_runs, longest), tasks


SHARD_ID = re.compile(r"/shard/\d+$")
"""A sharded run's shard: a ``TeamRun`` child (``oma.core.contracts.workflow_ids``)."""


async def run_histories(client: Any, workflow_id: str) -> list[Any]:
    """The history of every run of ``workflow_id``, in order (continue-as-new:
    ``oma.records.histories.execution_chain`` from its latest)."""
    from oma.records.histories import execution_chain

    return await execution_chain(client, workflow_id, None)


async def run_team(
    client: Any,
    chains: int,
    length: int,
    task_queue: str = TASK_QUEUE,
    task_attributes: bool = True,
) -> str:
    from oma.core.schema.results import TeamRunResult

    wf_id = f"bench-team-{uuid.uuid4().hex[:8]}"
    result = await client.execute_workflow(
        WorkflowName.TEAM_RUN,
        team_run_input(chains, length, task_attributes),
        id=wf_id,
        task_queue=task_queue,
        execution_timeout=run_timeout(chains * length),
        result_type=TeamRunResult,
    )
    # a sharded run's tasks are its shards' (its own result lists none)
    completed = sum(s.completed for s in result.shards) or sum(
        t.status == "completed" for t in result.tasks
    )
    if not result.success or completed != chains * length:
        raise RuntimeError(f"TeamRun {wf_id} did not complete every task: {result.status}")
    return wf_id


async def run_floor(client: Any, workflow_type: str, chains: int, length: int) -> str:
    wf_id = f"bench-{workflow_type.lower()}-{uuid.uuid4().hex[:8]}"
    done = await client.execute_workflow(
        workflow_type,
        args=[chains, length],
        id=wf_id,
        task_queue=TASK_QUEUE,
        result_type=int,
        execution_timeout=run_timeout(chains * length),
    )
    if done != chains * length:
        raise RuntimeError(f"{wf_id} ran {done} steps, expected {chains * length}")
    return wf_id


def process_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds used so far by process ``pid`` (0.0 if unknown)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


RUNNERS: dict[str, Any] = {
    "team_run": lambda clients, c, n: run_team(clients["plain"], c, n),
    "team_run_bare": lambda clients, c, n: run_team(clients["plain"], c, n, task_attributes=False),
    "floor_activity": lambda clients, c, n: run_floor(
        clients["plain"], "BenchFloorActivities", c, n
    ),
    "floor_child": lambda clients, c, n: run_floor(clients["plain"], "BenchFloorChildren", c, n),
    "team_run_codec": lambda clients, c, n: run_team(
        clients["encrypted"], c, n, ENCRYPTED_TASK_QUEUE
    ),
}
"""Each takes the clients (``plain``, ``encrypted``) and a shape."""

WORKFLOW_TYPES = {
    "team_run": WorkflowName.TEAM_RUN,
    "team_run_bare": WorkflowName.TEAM_RUN,
    "floor_activity": "BenchFloorActivities",
    "floor_child": "BenchFloorChildren",
    "team_run_codec": WorkflowName.TEAM_RUN,
}
"""The type of each runner's parent workflow, whose activations are timed."""

CLOCK = ActivationClock()
"""Times every activation of the bench's workers (cleared before each measurement)."""


def store_size(directory: str) -> int:
    """Bytes of every file under ``directory`` (the payload store)."""
    return sum(
        os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(directory) for f in files
    )


def peak_rss_mb() -> float:
    """This process's (the worker's and the client's) peak resident set so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def measure(
    clients: dict[str, Any], name: str, shape: Shape, server_pid: int | None
) -> Measurement:
    """Run ``name`` on ``shape``; time it, then count its history events."""
    chains, length = shape
    client = clients["encrypted" if name == "team_run_codec" else "plain"]
    store0 = store_size(clients["store"])
    CLOCK.by_type.clear()
    cpu0, server0 = time.process_time(), process_cpu_s(server_pid)
    start = time.perf_counter()
    wf_id = await RUNNERS[name](clients, chains, length)
    seconds = time.perf_counter() - start
    cpu = (time.process_time() - cpu0, process_cpu_s(server_pid) - server0)
    activations = CLOCK.by_type[WORKFLOW_TYPES[name]]
    memory = (peak_rss_mb(), store_size(clients["store"]) - store0)
    counts, tasks = await count_events(client, wf_id)
    return Measurement(name, chains * length, seconds, counts, cpu, (tasks, activations), memory)


async def bench(
    address: str,
    server_pid: int | None,
    shapes: list[Shape],
    floors: list[type],
    repeat: int,
    repeat_up_to: int,
    runners: list[str],
    store_dir: str,
) -> list[dict[str, Measurement]]:
    """Warm up, then measure each of ``runners`` on every shape (the floors
    up to ``FLOOR_MAX_TASKS``), ``repeat`` rounds in turn (a shape of more
    than ``repeat_up_to`` tasks, when that is not 0, once); returns, per
    shape, the median measurement of each runner. The OMA clients and
    workers keep large payloads in the payload store ``store_dir``."""
    from temporalio.worker import Worker

    from oma import worker as oma_worker
    from oma.runtime.codec import new_key, parse_keys
    from oma.runtime.connection import Connection
    from oma.runtime.payload_store import PayloadStore
    from oma.worker.plugin import OmaPlugin

    store = PayloadStore.parse(f"file://{store_dir}")
    client = await Connection.local(address, TASK_QUEUE).connect(
        plugins=[OmaPlugin(codec_keys=None, payload_store=store)]
    )
    encrypted = await Connection.local(address, ENCRYPTED_TASK_QUEUE).connect(
        plugins=[OmaPlugin(codec_keys=parse_keys(new_key("bench")), payload_store=store)]
    )
    clients: dict[str, Any] = {"plain": client, "encrypted": encrypted, "store": store_dir}
    # One worker on one task queue serves the OMA workflows and activities and
    # the floors alike, with the same slots for all three measurements. Its
    # ACP session queue is not polled: no task here runs an ACP agent.
    activities = oma_worker.Activities(session_task_queue=oma_worker.session_task_queue(TASK_QUEUE))
    w = Worker(
        oma_worker.serving_client(client, activities),
        task_queue=TASK_QUEUE,
        workflows=floors,
        activities=[noop],
        max_concurrent_workflow_tasks=MAX_CONCURRENT_WORKFLOW_TASKS,
        max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
        plugins=[CLOCK],
    )
    encrypted_activities = oma_worker.Activities(
        session_task_queue=oma_worker.session_task_queue(ENCRYPTED_TASK_QUEUE)
    )
    encrypted_worker = Worker(
        oma_worker.serving_client(encrypted, encrypted_activities),
        task_queue=ENCRYPTED_TASK_QUEUE,
        max_concurrent_workflow_tasks=MAX_CONCURRENT_WORKFLOW_TASKS,
        max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
        plugins=[CLOCK],
    )
    rows: list[dict[str, Measurement]] = []
    try:
        async with w, encrypted_worker:
            for name in runners:
                m = await measure(clients, name, WARMUP_SHAPE, server_pid)
                print(f"warm-up  {m.line()}", flush=True)
            for shape in shapes:
                print(f"shape: {shape[0]} chains x {shape[1]} tasks", flush=True)
                names = [
                    n
                    for n in runners
                    if not n.startswith("floor")
                    or (shape[0] * shape[1] <= FLOOR_MAX_TASKS and shape[0] <= FLOOR_MAX_CHAINS)
                ]
                if skipped := [n for n in runners if n not in names]:
                    print(
                        f"  skipped past FLOOR_MAX_TASKS or FLOOR_MAX_CHAINS: {', '.join(skipped)}",
                        flush=True,
                    )
                rounds: dict[str, list[Measurement]] = {name: [] for name in names}
                times = repeat if not repeat_up_to or shape[0] * shape[1] <= repeat_up_to else 1
                for r in range(times):
                    # each round starts one later: no runner is always the
                    # one that meets the machine's load first
                    for name in names[r % len(names) :] + names[: r % len(names)]:
                        m = await measure(clients, name, shape, server_pid)
                        print(f"  {m.line()}", flush=True)
                        rounds[name].append(m)
                rows.append({name: median(ms) for name, ms in rounds.items()})
                if times > 1:
                    for m in rows[-1].values():
                        print(f"  median {m.line()}", flush=True)
    finally:
        await activities.acp_pool.close_all()
        await encrypted_activities.acp_pool.close_all()
    return rows


def median(measurements: list[Measurement]) -> Measurement:
    """The measurement with the median wall time (the lower middle one of an even count)."""
    ordered = sorted(measurements, key=lambda m: m.seconds)
    return ordered[(len(ordered) - 1) // 2]


def parse_sizes(text: str) -> list[Shape]:
    """``"20x10,50x4"`` -> ``[(20, 10), (50, 4)]``."""
    shapes = []
    for part in text.split(","):
        chains, _, length = part.strip().lower().partition("x")
        shapes.append((int(chains), int(length)))
    return shapes


def group_alive(pgid: int) -> bool:
    """Whether any process is left in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def live_children() -> list[int]:
    """Pids of this process's children that are still running (not zombies)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.append(int(entry))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default=DEFAULT_SIZES,
        help="comma-separated CHAINSxLENGTH shapes measured in turn, e.g. 20x10,50x4 "
        f"(default {DEFAULT_SIZES}: 200, 800 and 5,000 tasks)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of the measurements, in turn; the summary reports "
        "each one's median (default 1)",
    )
    parser.add_argument(
        "--repeat-up-to",
        type=int,
        default=0,
        metavar="TASKS",
        help="repeat only the sizes of at most TASKS tasks; larger ones are measured "
        "once (default 0: repeat every size)",
    )
    parser.add_argument(
        "--runners",
        default=",".join(RUNNERS),
        help=f"comma-separated runners to measure (default every one: {','.join(RUNNERS)})",
    )
    parser.add_argument(
        "--server-log",
        default="",
        metavar="FILE",
        help="append the dev server's output to FILE (default: none kept)",
    )
    parser.add_argument(
        "--db-file",
        default="",
        metavar="FILE",
        help="keep the dev server's histories in the SQLite database FILE, as the "
        "embedded server of `oma run` does, and the payload store beside it "
        "(default: in memory, the store in a temporary directory; FILE must not exist)",
    )
    args = parser.parse_args()
    shapes = parse_sizes(args.sizes)
    runners = [n.strip() for n in args.runners.split(",") if n.strip()]
    if unknown := [n for n in runners if n not in RUNNERS]:
        parser.error(f"unknown runner(s) {', '.join(unknown)}: give some of {', '.join(RUNNERS)}")

    from oma.runtime.dev_server import DevServer, free_port, is_listening
    from oma.runtime.payload_store import EMBEDDED_STORE

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}", flush=True)

    floor_dir = tempfile.mkdtemp(prefix="oma-bench-floor-")
    log_file = Path(args.server_log) if args.server_log else None
    db_file = Path(args.db_file) if args.db_file else None
    if db_file is not None and db_file.exists():
        parser.error(f"--db-file {db_file} exists: give a new file")
    # beside a kept database the store is kept too, where `oma run` keeps it:
    # `oma show` can read the runs afterwards
    store_dir = str(db_file.parent / EMBEDDED_STORE) if db_file else f"{floor_dir}/payloads"
    os.makedirs(store_dir, exist_ok=True)
    server = DevServer(port=free_port(), log_file=log_file, db_file=db_file)

    def interrupted(signum: int, _frame: Any) -> None:
        # Unwinding through asyncio.run can wait forever on the worker's
        # shutdown; stop the server and leave at once instead.
        print(f"interrupted by signal {signum}: stopping the dev server", file=sys.stderr)
        server.stop()
        shutil.rmtree(floor_dir, ignore_errors=True)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    try:
        floors = floor_workflows(floor_dir)
        server.start()
        # the server runs in its own session: its pid is its process group id
        proc = getattr(server, "_proc", None)
        server_pid = proc.pid if proc is not None else None
        rows = asyncio.run(
            bench(
                server.address,
                server_pid,
                shapes,
                floors,
                max(1, args.repeat),
                args.repeat_up_to,
                runners,
                store_dir,
            )
        )
    finally:
        server.stop()
        shutil.rmtree(floor_dir, ignore_errors=True)

    left = live_children()
    if (server_pid and group_alive(server_pid)) or left or is_listening(server.address):
        raise SystemExit(f"not shut down: children {left}, server at {server.address}")
    print(f"shutdown: worker stopped, dev server (pid {server_pid}) gone, no child left")

    teams = [row["team_run"] for row in rows if "team_run" in row]
    smallest = min(teams, key=lambda m: m.tasks) if teams else None
    bares = [row["team_run_bare"] for row in rows if "team_run_bare" in row]
    smallest_bare = min(bares, key=lambda m: m.tasks) if bares else None
    firsts = [
        r["team_run"]
        for s, r in zip(shapes, rows, strict=True)
        if s == shapes[0] and "team_run" in r
    ]
    first_mean = sum(m.ms_per_task for m in firsts) / len(firsts) if len(firsts) > 1 else None
    for row in rows:
        print(summary(row, smallest, smallest_bare, first_mean), flush=True)


def summary(
    row: dict[str, Measurement],
    smallest: Measurement | None,
    smallest_bare: Measurement | None = None,
    first_mean_ms: float | None = None,
) -> str:
    """The closing line of one size: what was measured of it; ``first_mean_ms``
    is the mean ms per task of the first shape, when it was measured more than
    once."""
    any_m = next(iter(row.values()))
    said = [f"tasks={any_m.tasks}"]
    team, child = row.get("team_run"), row.get("floor_child")
    if team is not None:
        said += [
            f"per_task_ms={team.ms_per_task:.2f}",
            f"events_per_task={team.events / team.tasks:.2f}",
            f"peak_rss_mb={team.peak_rss_mb:.0f} store_bytes={team.store_bytes}",
            f"team_run_histories={team.runs} longest_team_run_history={team.longest}",
            f"longest_team_run_workflow_task_ms={team.workflow_tasks.longest_s * 1000:.0f}",
            f"longest_team_run_activation_cpu_ms={team.activations.longest_s * 1000:.0f}",
            f"team_run_activation_cpu_p99_ms={team.activations.p99_s * 1000:.1f}",
        ]
        if smallest is not None:
            said.append(f"ratio_vs_smallest={team.ms_per_task / smallest.ms_per_task:.2f}")
        if first_mean_ms is not None:
            said.append(f"ratio_vs_first_mean={team.ms_per_task / first_mean_ms:.2f}")
    if (activity := row.get("floor_activity")) is not None:
        said.append(f"floor_activity_ms={activity.ms_per_task:.2f}")
    if child is not None:
        said.append(f"floor_child_ms={child.ms_per_task:.2f}")
        if team is not None:
            cpu = (team.worker_cpu_s + team.server_cpu_s) / (
                child.worker_cpu_s + child.server_cpu_s
            )
            said.append(f"ratio_vs_child_floor={team.ms_per_task / child.ms_per_task:.2f}")
            said.append(f"cpu_ratio_vs_child_floor={cpu:.2f}")
    elif team is not None:
        said.append("floor_child=skipped")
    if (bare := row.get("team_run_bare")) is not None:
        said.append(f"bare_per_task_ms={bare.ms_per_task:.2f}")
        said.append(f"bare_events_per_task={bare.events / bare.tasks:.2f}")
        if child is not None:
            said.append(f"ratio_bare_vs_child_floor={bare.ms_per_task / child.ms_per_task:.2f}")
        if smallest_bare is not None:
            ratio = bare.ms_per_task / smallest_bare.ms_per_task
            said.append(f"bare_ratio_vs_smallest={ratio:.2f}")
    if (codec := row.get("team_run_codec")) is not None:
        said.append(f"encrypted_per_task_ms={codec.ms_per_task:.2f}")
        if team is not None:
            said.append(f"ratio_encrypted_vs_plain={codec.ms_per_task / team.ms_per_task:.2f}")
    return " ".join(said)


if __name__ == "__main__":
    main()
