"""What a fork costs: a 50-task run, then a fork that runs 1 leaf task again.

Against one embedded dev server and one in-process worker:

1. the source: a ``TeamRun`` of 50 process tasks (``python3 -c``), 49 of
   them in 7 chains of 7 and the leaf after the last task of the first
   chain; each task's output is 2,000 characters that name it;
2. the leaf task alone: a ``TeamRun`` of that one task (no dependencies),
   the floor a fork of one task can hope for;
3. the fork: ``{"fork": {"run_id": <source>, "rerun": ["leaf"]}}``, started
   as the client starts one, to its result.

2 and 3 run ``--repeat`` times each (default 5), alternating, after a warm-up
of each; each is timed from its start to its result (the run closed; what a
client then reads back of the outputs kept by reference, 49 of them for the
fork, is the client's, and is checked after the clock stops); the medians
are compared. Then the histories of the last fork (its
two runs and its child) and of the source (its run and its 50 children) are
fetched and measured as JSON, and each kept output's marker is counted in the
fork's: the 48 outputs no task of the fork reads must not be there at all
(they stay by reference); the one the leaf reads is carried (the state read,
the state it continues as new with, the leaf's prompt).

The last line::

    fork_ratio=<fork median / one-task median> fork_history_bytes=<n> source_history_bytes=<m>

Run from the repository root, with the venv active: ``python bench/fork.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

TASK_QUEUE = "oma-bench-fork"
CHAINS, LENGTH = 7, 7
OUTPUT_CHARS = 2000

AGENT = {
    "name": "worker",
    "backend": {
        "kind": "process",
        "command": "python3",
        "args": [
            "-c",
            "import re, sys; me = re.search(r'TASK=(\\S+)', sys.stdin.read()).group(1); "
            f"print(('OUT-' + me + '-').ljust({OUTPUT_CHARS}, 'x'))",
        ],
    },
}


def source_tasks() -> list[dict[str, Any]]:
    tasks = []
    for c in range(CHAINS):
        for s in range(LENGTH):
            deps = [f"c{c}s{s - 1}"] if s else []
            tasks.append(_task(f"c{c}s{s}", deps))
    tasks.append(_task("leaf", [f"c0s{LENGTH - 1}"]))
    return tasks


def _task(task_id: str, deps: list[str]) -> dict[str, Any]:
    return {
        "id": task_id,
        "title": task_id,
        "description": f"TASK={task_id}",
        "assignee": "worker",
        "depends_on": deps,
    }


async def history_bytes(client: Any, workflow_id: str, *, chain: bool) -> tuple[int, str]:
    """The JSON size of a run's histories (every run of its chain with
    ``chain``, and every child's) and their text."""
    from oma.records.histories import fetch_histories

    if chain:
        histories = await fetch_histories(client, workflow_id)
    else:
        histories = [await client.get_workflow_handle(workflow_id).fetch_history()]
    text = "".join(json.dumps(h.to_json_dict()) for h in histories)
    return len(text.encode()), text


def decoded(text: str) -> str:
    """The histories' text with every payload's data decoded (base64 JSON)."""
    import base64
    import re

    def one(m: re.Match[str]) -> str:
        try:
            return base64.b64decode(m.group(1)).decode("utf-8", "replace")
        except ValueError:
            return m.group(0)

    return re.sub(r'"data": "([A-Za-z0-9+/=]+)"', one, text)


async def main(repeat: int) -> None:
    from oma import worker as oma_worker
    from oma.client import start_team_run, team_run_result
    from oma.client.fork import preview, start_fork
    from oma.core.schema.fork import parse_fork_input
    from oma.core.schema.run_input import checked_team_run_input
    from oma.runtime.connection import Connection
    from oma.runtime.dev_server import DevServer, free_port

    with DevServer(port=free_port()) as server:
        client = await Connection.local(server.address, TASK_QUEUE).connect()
        async with oma_worker.build_worker(client, TASK_QUEUE):
            team = {"name": "bench", "agents": [AGENT]}
            source_id = f"fork-source-{uuid.uuid4().hex[:6]}"
            source_input = checked_team_run_input({"team": team, "tasks": source_tasks()})
            began = time.monotonic()
            handle = await start_team_run(client, source_input, id=source_id, task_queue=TASK_QUEUE)
            source = await team_run_result(handle, client)
            assert source.success, source.error
            print(f"source: {len(source.tasks)} tasks in {time.monotonic() - began:.2f} s")
            one_input = checked_team_run_input({"team": team, "tasks": [_task("leaf", [])]})

            async def one_task() -> float:
                began = time.monotonic()
                wid = f"fork-one-{uuid.uuid4().hex[:6]}"
                h = await start_team_run(client, one_input, id=wid, task_queue=TASK_QUEUE)
                assert (await h.result()).success
                return time.monotonic() - began

            async def a_fork() -> tuple[float, str]:
                began = time.monotonic()
                wid = f"{source_id}-fork-{uuid.uuid4().hex[:6]}"
                fork = parse_fork_input({"fork": {"run_id": source_id, "rerun": ["leaf"]}})
                h = await start_fork(client, fork, id=wid, task_queue=TASK_QUEUE, team="bench")
                result = await h.result()
                took = time.monotonic() - began
                assert result.success and result.forked_from == source_id, result
                await team_run_result(h, client)  # its kept outputs read back: all readable
                return took, wid

            await one_task()
            await a_fork()  # warm-ups
            ones, forks, fork_id = [], [], ""
            for _ in range(repeat):
                ones.append(await one_task())
                took, fork_id = await a_fork()
                forks.append(took)
            one_s, fork_s = statistics.median(ones), statistics.median(forks)
            print(f"one task alone: median {one_s * 1000:.0f} ms of {repeat}")
            print(f"fork of 1 leaf: median {fork_s * 1000:.0f} ms of {repeat}")
            forked = await preview(
                client, parse_fork_input({"fork": {"run_id": source_id, "rerun": ["leaf"]}}), "x"
            )
            fork_bytes, fork_text = await history_bytes(client, fork_id, chain=True)
            source_bytes, _ = await history_bytes(client, source_id, chain=True)
            plain = decoded(fork_text)
            read = set(forked.read)
            kept = [t for t in forked.reused if t not in read]
            copies = sum(plain.count(f"OUT-{t}-") for t in kept)
            carried = {t: plain.count(f"OUT-{t}-") for t in read}
            print(
                f"fork histories: {fork_bytes} bytes; copies of the {len(kept)} kept outputs "
                f"no task reads: {copies}; of those read ({', '.join(read)}): {carried}"
            )
            print(
                f"fork_ratio={fork_s / one_s:.2f} fork_history_bytes={fork_bytes} "
                f"source_history_bytes={source_bytes}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.repeat))
