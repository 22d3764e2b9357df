"""How late model text reaches ``oma run``'s live view.

One ``TeamRun`` of one task on an ``anthropic`` agent, against a Temporal dev
server and a worker started here, with the model played by the local
Messages API server of the tests (``tests/support/anthropic_server.py``): it streams
``--words`` one-word ``text_delta`` events ``--delay`` seconds apart,
recording when it wrote each. Meanwhile a reader does what the live view
does (``oma.client.progress.latest_output`` of the task's ``AgentRun`` every
``PEEK_INTERVAL_S`` seconds); each time it reads a word not read before, the
latency is the time since the server wrote that word's delta: the heartbeat
(``Heartbeat.changed``), the worker's throttle, the server, and the reader's
polling. (The live view redraws right after each read, so its screen lags
the read by the time to render.)

Prints the latencies' median, 90th percentile and maximum; the last line is::

    text_to_view_median_s=… p90_s=… max_s=… reads=…

Run from the repository root: ``.venv/bin/python bench/live.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from oma.cli.live import PEEK_INTERVAL_S  # noqa: E402
from oma.client.progress import latest_output  # noqa: E402
from oma.core.contracts.names import WorkflowName  # noqa: E402
from oma.core.contracts.workflow_ids import task_workflow_id  # noqa: E402
from oma.runtime.connection import Connection  # noqa: E402
from oma.runtime.dev_server import DevServer, free_port  # noqa: E402
from oma.worker import build_worker  # noqa: E402
from tests.support.anthropic_server import AnthropicServer, TextReply  # noqa: E402
from tests.support.runs import worker_activities  # noqa: E402

QUEUE = "oma-bench-live"


async def measure(words: int, delay_s: float) -> list[float]:
    with DevServer(port=free_port()) as server, AnthropicServer() as api:
        text = "".join(f"w{i:03d} " for i in range(words))
        api.reply(TextReply(text, pieces=words, delay_s=delay_s))
        client = await Connection.local(server.address, QUEUE).connect()
        async with build_worker(client, QUEUE, worker_activities(QUEUE, api.base_url)):
            run_id = f"bench-live-{uuid.uuid4().hex[:8]}"
            run_input = {
                "team": {"name": "b", "agents": [{"name": "m", "provider": "anthropic"}]},
                "tasks": [{"id": "t", "title": "T", "description": "say it", "assignee": "m"}],
            }
            handle = await client.start_workflow(
                WorkflowName.TEAM_RUN, run_input, id=run_id, task_queue=QUEUE
            )
            child = task_workflow_id(run_id, "t")
            seen: set[int] = set()
            latencies: list[float] = []
            ended = asyncio.create_task(handle.result())
            while not ended.done():
                try:
                    out = await latest_output(client, child)
                except Exception:
                    out = ""
                read_at = time.monotonic()
                last = out.split()[-1] if out.split() else ""
                if last.startswith("w") and (i := int(last[1:])) not in seen:
                    seen.add(i)
                    sent = api.requests[0].sent_at[2 + i]  # message_start, block start
                    latencies.append(read_at - sent)
                await asyncio.sleep(PEEK_INTERVAL_S)
            await ended
        return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=60)
    parser.add_argument("--delay", type=float, default=0.1, help="seconds between deltas")
    args = parser.parse_args()
    latencies = asyncio.run(measure(args.words, args.delay))
    if not latencies:
        raise SystemExit("no text was read while the turn streamed")
    ordered = sorted(latencies)
    median = statistics.median(ordered)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    print(f"{len(ordered)} reads of new text; latency from the delta to the view:")
    print(f"  median {median:.3f} s, p90 {p90:.3f} s, max {ordered[-1]:.3f} s")
    print(
        f"text_to_view_median_s={median:.3f} p90_s={p90:.3f} "
        f"max_s={ordered[-1]:.3f} reads={len(ordered)}"
    )


if __name__ == "__main__":
    main()
