"""Record the run ``examples/test_recorded_team.py`` replays offline.

Runs ``examples/recorded/brief-run.json`` (two Anthropic agents) on an
embedded dev server against the local Messages API of the tests
(``tests/support/anthropic_server.py``, the real ``anthropic`` SDK), and writes the
histories of the ``TeamRun`` and of its ``AgentRun`` children, as ``temporal
workflow show --output json`` would, to ``examples/recorded/brief/``. A user
records their own the same way, from a run on Claude.

    .venv/bin/python -m tests.support.record_example
"""

from __future__ import annotations

import asyncio
import json

from oma import worker as oma_worker
from oma.activities.recordings import fetch
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer, free_port
from tests.support.anthropic_server import AnthropicServer
from tests.support.paths import ROOT
from tests.support.runs import start_team, team_result, worker_activities

EXAMPLES = ROOT / "examples" / "recorded"
QUEUE = "oma-record-example"
RUN_ID = "brief-recorded"
ANSWERS = (
    "1. A durable run survives crashes. 2. Its history is its checkpoint. "
    "3. Workers replay it to resume.",
    "Durable execution writes every step of a run to its history, so a crashed run resumes "
    "where it stopped instead of starting over.",
)


async def record(address: str) -> None:
    run_input = json.loads((EXAMPLES / "brief-run.json").read_text())
    client = await Connection.local(address, QUEUE).connect()
    with AnthropicServer() as api:
        for answer in ANSWERS:
            api.reply_text(answer, input_tokens=120, output_tokens=40)
        async with oma_worker.build_worker(client, QUEUE, worker_activities(QUEUE, api.base_url)):
            result = await team_result(await start_team(client, RUN_ID, run_input, QUEUE))
    assert result.success, result
    out = EXAMPLES / "brief"
    out.mkdir(exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    for history in await fetch(client, RUN_ID):
        name = history.workflow_id.replace("/", "__")
        (out / f"{name}.json").write_text(json.dumps(history.to_json_dict(), indent=2) + "\n")
        print(f"{out / name}.json: {len(history.events)} events")


def main() -> None:
    with DevServer(port=free_port()) as server:
        asyncio.run(record(server.address))


if __name__ == "__main__":
    main()
