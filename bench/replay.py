"""How long ``oma replay`` takes on a large run: a full replay against the
state at an event (``oma replay --at``).

Runs one ``TeamRun`` of ``--chains`` independent chains of ``--length``
scripted tasks (default 50 x 100: 5,000 tasks, ``bench/dag_overhead.py``'s
shape) on an embedded dev server with an in-process worker, takes the
longest history of its continue-as-new chain (the run continues as new past
``options.history_event_limit`` events), and measures, in ``--repeat``
rounds that take them in turn (medians):

- ``replay_s``: the full replay of that history, as ``oma replay FILE``
  checks it (``oma.cli.debug.session.replay``: the product's converter and
  the worker's sandbox; ``sdk_replay_s``: the same with the SDK's plain
  ``Replayer`` and the product's plugin, ``oma.worker.plugin.replayer``);
- ``at_event_s``: the state at the last task completion of that history
  (``oma replay FILE --at task_complete:<task>``: the history cut there and
  replayed with a probe, then the run's queries), the worst case of ``--at``;
- ``at_middle_s``: the same at the history's middle event.

The last line::

    tasks=<n> events=<longest history> sdk_replay_s=<s> replay_s=<r> at_event_s=<a>
    at_middle_s=<m> at_event_vs_replay=<a/r>

``at_event_vs_replay`` stays at or under 1: replaying to an event costs no
more than replaying the whole history.

Run from the repository root, with the venv active: ``python bench/replay.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.dag_overhead import TASK_QUEUE, run_histories, run_timeout, team_run_input  # noqa: E402
from oma.core.contracts.names import QueryName, WorkflowName  # noqa: E402


async def make_run(address: str, chains: int, length: int) -> Any:
    """Run the ``TeamRun``; the longest history of its chain."""
    import uuid

    from temporalio.worker import Worker

    from oma import worker as oma_worker
    from oma.core.schema.results import TeamRunResult
    from oma.runtime.connection import Connection
    from oma.worker.plugin import OmaPlugin

    client = await Connection.local(address, TASK_QUEUE).connect(
        plugins=[OmaPlugin(codec_keys=None)]
    )
    activities = oma_worker.Activities(session_task_queue=oma_worker.session_task_queue(TASK_QUEUE))
    worker = Worker(
        oma_worker.serving_client(client, activities),
        task_queue=TASK_QUEUE,
        max_concurrent_workflow_tasks=64,
        max_concurrent_activities=64,
    )
    wf_id = f"bench-replay-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    try:
        async with worker:
            result = await client.execute_workflow(
                WorkflowName.TEAM_RUN,
                team_run_input(chains, length),
                id=wf_id,
                task_queue=TASK_QUEUE,
                execution_timeout=run_timeout(chains * length),
                result_type=TeamRunResult,
            )
    finally:
        await activities.acp_pool.close_all()
    if not result.success:
        raise RuntimeError(f"TeamRun {wf_id} did not succeed: {result.status}")
    runs = await run_histories(client, wf_id)
    print(
        f"ran {chains * length} tasks in {time.perf_counter() - started:.1f} s: "
        f"{len(runs)} run(s), histories of {[len(r.events) for r in runs]} events",
        flush=True,
    )
    return max(runs, key=lambda r: len(r.events))


def last_completed_task(history: Any) -> str:
    """The task whose ``AgentRun`` completed last in ``history``."""
    from oma.core.contracts.workflow_ids import team_run_id_of

    initiated: dict[int, str] = {}
    last = ""
    for event in history.events:
        if event.HasField("start_child_workflow_execution_initiated_event_attributes"):
            wid = event.start_child_workflow_execution_initiated_event_attributes.workflow_id
            initiated[event.event_id] = wid
        elif event.HasField("child_workflow_execution_completed_event_attributes"):
            done = event.child_workflow_execution_completed_event_attributes
            wid = initiated.get(done.initiated_event_id, "")
            if team_run_id_of(wid):
                last = wid.rsplit("/", 1)[-1]
    return last


def tasks_of(history: Any) -> int:
    """How many tasks the run of ``history`` has (its input's ``tasks``)."""
    import json

    from oma.records.history_files import started

    raw = started(history).input.payloads[0].data
    return len(json.loads(raw).get("tasks") or [])


async def timed(runners: list[Any], repeat: int) -> list[float]:
    """The median seconds of each of ``runners`` over ``repeat`` rounds, the
    runners taken in turn within each round (a machine's drift then weighs
    on all of them alike)."""
    times: list[list[float]] = [[] for _ in runners]
    for _ in range(repeat):
        for i, runner in enumerate(runners):
            started = time.perf_counter()
            await runner()
            times[i].append(time.perf_counter() - started)
    return [statistics.median(t) for t in times]


async def measure(history: Any, repeat: int) -> tuple[float, float, float, float]:
    from oma.cli.debug.history import Debugged, resolve
    from oma.cli.debug.session import replay
    from oma.cli.debug.state import state_at
    from oma.worker import plugin
    from oma.worker.replay_probe import ReplayProbe

    debugged = Debugged(history, "bench")  # (history's workflow id: the run's)

    async def sdk() -> None:
        await plugin.replayer(None).replay_workflow(history)

    async def full() -> None:
        result = await replay(debugged, ReplayProbe(keep=False))
        assert result.replay_failure is None, result.replay_failure

    task = last_completed_task(history)
    last = resolve(debugged, f"task_complete:{task}")
    middle = resolve(debugged, str(len(history.events) // 2))

    async def at_last() -> None:
        found = await state_at(debugged, last)
        assert found.answers[QueryName.STATE]["tasks"], found.answers

    async def at_middle() -> None:
        await state_at(debugged, middle)

    print(f"--at task_complete:{task} is event {last.event_id}", flush=True)
    sdk_s, full_s, last_s, middle_s = await timed([sdk, full, at_last, at_middle], repeat)
    return sdk_s, full_s, last_s, middle_s


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--chains", type=int, default=50)
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--history",
        metavar="FILE",
        help="measure this exported history (JSON) instead of running one (save one with --save)",
    )
    parser.add_argument("--save", metavar="FILE", help="write the run's history there")
    args = parser.parse_args()

    from pathlib import Path

    from oma.cli.debug.history import read_file
    from oma.runtime.dev_server import DevServer, free_port

    if args.history:
        history = read_file(Path(args.history), None).history
    else:
        server = DevServer(port=free_port())
        server.start()
        try:
            history = asyncio.run(make_run(server.address, args.chains, args.length))
        finally:
            server.stop()
        if args.save:
            Path(args.save).write_text(history.to_json())
    sdk_s, replay_s, at_event_s, at_middle_s = asyncio.run(measure(history, max(1, args.repeat)))
    print(
        f"tasks={tasks_of(history)} events={len(history.events)} sdk_replay_s={sdk_s:.3f} "
        f"replay_s={replay_s:.3f} at_event_s={at_event_s:.3f} at_middle_s={at_middle_s:.3f} "
        f"at_event_vs_replay={at_event_s / replay_s:.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
