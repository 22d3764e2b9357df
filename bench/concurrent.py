"""Many small runs at once: ``--runs`` team runs (default 200) of 5 tasks
each, started together against one embedded dev server and one in-process
worker (``oma.worker.build_worker``, the settings ``oma worker`` has), every
agent a ``scripted`` LLM agent with a one-response script (instant).

Each run is a diamond: ``a``, then ``b``, ``c`` and ``d`` (which depend on
``a``), then ``e`` (which depends on the three). Every run must complete,
every task of it. It prints the worker's settings that bound it (concurrent
workflow tasks, activities, local activities, cached workflows), each run's
latency (from the client's start to its result: p50, p95 and the longest),
the wall time from the first start to the last result, this process's CPU
(worker and client) and the dev server's, and the workflow tasks of every
history (each ``TeamRun`` and ``AgentRun``): how many failed or timed out
(a deadlock or a task past the 10 s timeout shows there), the longest, and
the longest activation's CPU (``workflow_tasks.py``). The last line is::

    runs=200 completed=200 p50_s=… p95_s=… max_s=… wall_s=…
    failed_workflow_tasks=… longest_workflow_task_ms=… longest_activation_cpu_ms=…

Run from the repository root, with the venv active: ``python bench/concurrent.py``.
"""

from __future__ import annotations

import sys

if __name__ == "concurrent":
    # This file has the standard library's name, and a script run from
    # bench/ (this one too) finds it first when it, or asyncio, imports
    # ``concurrent``: hand the importer the standard library's package.
    import importlib.machinery
    import importlib.util
    import os

    _here = os.path.dirname(os.path.abspath(__file__))
    _path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    _spec = importlib.machinery.PathFinder.find_spec("concurrent", _path)
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["concurrent"] = _module
    _spec.loader.exec_module(_module)
else:
    import argparse
    import asyncio
    import os
    import time
    import uuid
    from typing import Any

    from dag_overhead import process_cpu_s
    from workflow_tasks import ActivationClock, WorkflowTasks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

TASK_QUEUE = "oma-bench-concurrent"
RUN_TIMEOUT_S = 600.0
"""A run whose result has not come by then counts as failed (the bench does not hang)."""


def team_run_input(n: int) -> dict[str, Any]:
    """Run ``n``'s input: the diamond of 5 tasks, one scripted agent each."""
    names = "abcde"
    agents = [
        {"name": f"agent-{t}", "provider": "scripted", "script": [f"{t} done"]} for t in names
    ]
    after = {"a": [], "b": ["a"], "c": ["a"], "d": ["a"], "e": ["b", "c", "d"]}
    tasks = [
        {
            "id": t,
            "title": f"Run {n} task {t}",
            "description": f"do {t}",
            "assignee": f"agent-{t}",
            "depends_on": after[t],
        }
        for t in names
    ]
    return {"team": {"name": f"small-{n}", "agents": agents}, "tasks": tasks}


async def one_run(client: Any, n: int, prefix: str) -> tuple[str, float]:
    """Start run ``n``, await its result; its workflow id and its latency in seconds."""
    from oma.core.schema.results import TeamRunResult
    from tests.support.runs import start_team, team_result

    workflow_id = f"{prefix}-{n:03d}"
    begin = time.perf_counter()
    handle = await start_team(client, workflow_id, team_run_input(n), task_queue=TASK_QUEUE)
    result: TeamRunResult = await asyncio.wait_for(team_result(handle), RUN_TIMEOUT_S)
    latency = time.perf_counter() - begin
    done = [t.id for t in result.tasks if t.status == "completed"]
    if result.status != "completed" or len(done) != 5:
        raise RuntimeError(f"{workflow_id}: {result.status}, tasks completed {done}")
    return workflow_id, latency


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def workflow_tasks(client: Any, workflow_ids: list[str]) -> WorkflowTasks:
    """The workflow tasks of every run and of its children."""
    from tests.support.runs import histories_of

    tasks = WorkflowTasks()
    limit = asyncio.Semaphore(16)

    async def read(workflow_id: str) -> list[Any]:
        async with limit:
            return await histories_of(client, workflow_id)

    for histories in await asyncio.gather(*(read(w) for w in workflow_ids)):
        for history in histories:
            tasks.add(history.workflow_id, history)
    return tasks


async def bench(address: str, server_pid: int | None, runs: int, slots: dict[str, int]) -> str:
    from oma import worker as oma_worker
    from oma.runtime.connection import Connection

    client = await Connection.local(address, TASK_QUEUE).connect()
    clock = ActivationClock()
    worker = oma_worker.build_worker(client, TASK_QUEUE, plugins=[clock], **slots)
    config = worker.workers[0].config(active_config=True)
    settings = {
        key: config.get(key)
        for key in (
            "max_concurrent_workflow_tasks",
            "max_concurrent_activities",
            "max_concurrent_local_activities",
            "max_cached_workflows",
        )
    }
    shown = ", ".join(f"{k}={'SDK default (100)' if v is None else v}" for k, v in settings.items())
    print(f"worker: {shown}", flush=True)
    prefix = f"bench-small-{uuid.uuid4().hex[:6]}"
    async with worker:
        await one_run(client, 0, f"{prefix}-warm-up")
        clock.by_type.clear()
        cpu, server = time.process_time(), process_cpu_s(server_pid)
        start = time.perf_counter()
        results = await asyncio.gather(
            *(one_run(client, n, prefix) for n in range(runs)), return_exceptions=True
        )
        wall = time.perf_counter() - start
        cpu, server = time.process_time() - cpu, process_cpu_s(server_pid) - server
    failures = [r for r in results if isinstance(r, BaseException)]
    done = [r for r in results if not isinstance(r, BaseException)]
    for failure in failures[:5]:
        print(f"failed: {failure!r}", flush=True)
    latencies = [latency for _, latency in done]
    tasks = await workflow_tasks(client, [w for w, _ in done])
    longest_cpu = max((a.longest_s for a in clock.by_type.values()), default=0.0)
    print(
        f"{len(done)} of {runs} runs completed (5 tasks each) in {wall:.1f} s; latency p50 "
        f"{quantile(latencies, 0.5):.1f} s, p95 {quantile(latencies, 0.95):.1f} s, the "
        f"longest {max(latencies):.1f} s; CPU: this process {cpu:.1f} s, the dev server "
        f"{server:.1f} s",
        flush=True,
    )
    print(f"their histories: {tasks.line()}", flush=True)
    for failure in tasks.failures[:10]:
        print(f"  workflow task {failure}", flush=True)
    for kind, a in sorted(clock.by_type.items()):
        print(f"{kind} activations: {a.line()}", flush=True)
    return (
        f"runs={runs} completed={len(done)} p50_s={quantile(latencies, 0.5):.2f} "
        f"p95_s={quantile(latencies, 0.95):.2f} max_s={max(latencies):.2f} wall_s={wall:.2f} "
        f"failed_workflow_tasks={tasks.failed} "
        f"longest_workflow_task_ms={tasks.longest_s * 1000:.0f} "
        f"longest_activation_cpu_ms={longest_cpu * 1000:.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="team runs started at once")
    parser.add_argument(
        "--workflow-tasks",
        type=int,
        help="the worker's max_concurrent_workflow_tasks (default: the SDK's, as oma worker)",
    )
    args = parser.parse_args()
    slots = {"max_concurrent_workflow_tasks": args.workflow_tasks} if args.workflow_tasks else {}

    from oma.runtime.dev_server import DevServer, free_port

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}", flush=True)
    with DevServer(port=free_port()) as server:
        proc = getattr(server, "_proc", None)
        line = asyncio.run(bench(server.address, proc.pid if proc else None, args.runs, slots))
    print(line, flush=True)


if __name__ == "__main__":
    main()
