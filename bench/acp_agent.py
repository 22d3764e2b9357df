"""How soon an editor sees a team run through ``oma acp``.

A Temporal dev server and a worker started here, and a real ``oma acp``
process driven by the ACP Python SDK's client side, as an editor drives it.
One prompt: a goal run whose scripted coordinator plans ``--tasks`` tasks in
a chain, each a process agent that sleeps ``--sleep`` seconds. Measured:

- ``first_update_s``: from sending ``session/prompt`` to receiving the first
  ``plan`` update (the run's start, the coordinator's plan, and the
  follower's first reads);
- each task's update lag: from its ``task_complete`` event (the run's own
  time of it, the ``events`` query's ``at``) to the moment the client
  received that task's ``tool_call_update`` with status ``completed``;
- the ``events`` query's latency against the same run while it runs (one
  every ``QUERY_EVERY_S``, beside ``oma acp``'s own): what one read of the
  run costs; and when that plain poller first read each task's end (what
  any client polling the run sees, for comparison).

``update_lag_ratio`` is the median update lag over the median query
latency: how many query round trips an update takes to arrive (``oma acp``
polls every ``oma.acp.follower.POLL_S``). The target: an update
within 0.5 s of its event. The last line is::

    first_update_s=… update_lag_ratio=… update_lag_median_s=… update_lag_max_s=… events_query_s=…

Run from the repository root: ``.venv/bin/python bench/acp_agent.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block  # noqa: E402
from acp.connection import StreamDirection, StreamEvent  # noqa: E402
from acp.schema import AllowedOutcome, RequestPermissionResponse  # noqa: E402

from oma.core.contracts.names import QueryName  # noqa: E402
from oma.core.schema.run_events import RunEvent  # noqa: E402
from oma.runtime.connection import Connection  # noqa: E402
from oma.runtime.dev_server import DevServer, free_port  # noqa: E402
from oma.worker import build_worker  # noqa: E402
from tests.support.runs import worker_activities  # noqa: E402

QUEUE = "oma-bench-acp"
QUERY_EVERY_S = 0.1
OMA = str(Path(sys.executable).parent / "oma")


class Editor:
    """Records when each message arrived (wall clock, UTC)."""

    def __init__(self) -> None:
        self.received: list[tuple[datetime, dict[str, Any]]] = []

    def observe(self, event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING:
            self.received.append((datetime.now(UTC), event.message))

    async def request_permission(self, **_: Any) -> RequestPermissionResponse:
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id="allow_once", outcome="selected")
        )

    async def session_update(self, **_: Any) -> None:
        return None


def team(tasks: int, sleep_s: float) -> dict[str, Any]:
    plan = [
        {
            "title": f"Step {n}",
            "description": f"step {n}",
            "assignee": "sleeper",
            "depends_on": [f"Step {n - 1}"] if n > 1 else [],
        }
        for n in range(1, tasks + 1)
    ]
    sleeper = {
        "name": "sleeper",
        "backend": {
            "kind": "process",
            "command": sys.executable,
            "args": ["-c", f"import time; time.sleep({sleep_s}); print('done')"],
            "input": "none",
        },
    }
    return {
        "team": {"name": "bench", "agents": [sleeper]},
        "coordinator": {
            "provider": "scripted",
            "script": [f"```json\n{json.dumps(plan)}\n```", "All steps done."],
        },
    }


async def measure(tasks: int, sleep_s: float) -> tuple[float, list[float], list[float]]:
    with DevServer(port=free_port()) as server, tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "oma.json").write_text(json.dumps(team(tasks, sleep_s)))
        client = await Connection.local(server.address, QUEUE).connect()
        env = {
            "PATH": os.environ["PATH"],
            "TEMPORAL_ADDRESS": server.address,
            "OMA_TASK_QUEUE": QUEUE,
        }
        async with build_worker(client, QUEUE, worker_activities(QUEUE, "http://127.0.0.1:9")):
            editor = Editor()
            with open(cwd / "oma-acp.stderr", "wb") as log:
                async with spawn_agent_process(
                    editor,
                    OMA,
                    "acp",
                    env=env,
                    cwd=cwd,
                    transport_kwargs={"stderr": log},
                    observers=[editor.observe],
                ) as (conn, _process):
                    await conn.initialize(protocol_version=PROTOCOL_VERSION)
                    sid = (await conn.new_session(cwd=str(cwd))).session_id
                    latencies: list[float] = []
                    seen: dict[str, datetime] = {}
                    timing = asyncio.create_task(time_queries(client, sid, latencies, seen))
                    sent = datetime.now(UTC)
                    await conn.prompt(session_id=sid, prompt=[text_block(f"bench {uuid.uuid4()}")])
                    timing.cancel()
            first_plan = next(
                at
                for at, m in editor.received
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "plan"
            )
            handle = client.get_workflow_handle(sid)
            events: list[RunEvent] = await handle.query(
                QueryName.EVENTS, result_type=list[RunEvent]
            )
            ended = {e.task_id: e.at for e in events if e.type == "task_complete" and e.task_id}
            visible = [(seen[t] - at).total_seconds() for t, at in ended.items() if t in seen]
            shown = [round(x, 3) for x in visible]
            print(f"a plain events poller read each task's end after (s): {shown}")
            lags = []
            for at, m in editor.received:
                update = m.get("params", {}).get("update", {}) if m.get("method") else {}
                if update.get("status") == "completed" and update.get("toolCallId") in ended:
                    lags.append((at - ended.pop(update["toolCallId"])).total_seconds())
            return (first_plan - sent).total_seconds(), lags, latencies


async def time_queries(
    client: Any, workflow_id: str, latencies: list[float], seen: dict[str, datetime]
) -> None:
    """Time an ``events`` query of the running run every ``QUERY_EVERY_S``,
    until cancelled; ``seen``: when each task's end was first read so."""
    handle = client.get_workflow_handle(workflow_id)
    while True:
        start = time.perf_counter()
        try:
            events = await handle.query(QueryName.EVENTS, -1, result_type=list[RunEvent])
            latencies.append(time.perf_counter() - start)
            now = datetime.now(UTC)
            for e in events:
                if e.type == "task_complete" and e.task_id:
                    seen.setdefault(e.task_id, now)
        except Exception:  # not started yet
            pass
        await asyncio.sleep(QUERY_EVERY_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=6, help="tasks in the chain")
    parser.add_argument("--sleep", type=float, default=0.3, help="each task's sleep, in seconds")
    args = parser.parse_args()
    first, lags, latencies = asyncio.run(measure(args.tasks, args.sleep))
    query = statistics.median(latencies)
    lag = statistics.median(lags)
    print(f"tasks={args.tasks} sleep_s={args.sleep} lags_s={[round(x, 3) for x in lags]}")
    print(
        f"first_update_s={first:.3f} update_lag_ratio={lag / query:.1f} "
        f"update_lag_median_s={lag:.3f} update_lag_max_s={max(lags):.3f} "
        f"events_query_s={query:.4f}"
    )


if __name__ == "__main__":
    main()
