"""Model turns answered from a recording are marked where a person looks: a
``recorded`` mark per task and a line under the totals in `oma fork`'s output
and `oma show`, ``recorded_turns`` in their ``--json``, and the mark on the
HTML page. A fork with ``--on-miss fallback`` whose second task missed shows
which task ran on the recording and which called the provider."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from temporalio.client import Client

from oma.runtime.dev_server import DevServer
from tests.support.cli import OMA, run_cmd, table_rows
from tests.support.recorded import QUEUE, own_api_and_worker, run_on_queue, team_input
from tests.support.runs import assert_replays

pytestmark = pytest.mark.e2e

RECORDED_LINE = (
    "recorded: 1 model turn answered from the recording, no provider called (the tokens are "
    "the recording's, the cost zero)"
)


async def test_a_forks_recorded_turns_are_marked_in_oma_fork_oma_show_json_and_html(
    client: Client, workflow_id: str, dev_server: DevServer, tmp_path: Path
) -> None:
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": QUEUE}
    async with own_api_and_worker(client) as api:
        api.reply_text("alpha")
        api.reply_text("beta")
        assert (await run_on_queue(client, workflow_id, team_input())).success
        api.reset()
        api.reply_text("gamma")
        api.reply_text("gamma")

        async def fork(fork_id: str, *more: str) -> str:
            proc = await run_cmd(
                OMA,
                "fork",
                workflow_id,
                "--no-worker",
                "--workflow-id",
                fork_id,
                "--models",
                "recorded",
                "--on-miss",
                "fallback",
                "--from",
                "t1",
                "--set",
                "t2.description=do t2 otherwise",
                *more,
                env=env,
            )
            assert proc.returncode == 0, proc.stderr
            return proc.stdout

        printed = await fork(f"{workflow_id}-f")
        as_json = json.loads(await fork(f"{workflow_id}-j", "--json"))
        assert len(api.requests) == 2  # only the misses (t2) called the provider

    rows = {row[0]: row for row in table_rows(printed)}
    assert rows["t1"][3] == "completed, recorded"
    assert rows["t2"][3] == "completed"
    assert RECORDED_LINE in printed.splitlines()
    assert [(t["id"], t["recorded_turns"]) for t in as_json["tasks"]] == [("t1", 1), ("t2", 0)]
    assert as_json["recorded_turns"] == 1

    fork_id = f"{workflow_id}-f"
    shown = await run_cmd(OMA, "show", fork_id, env={**env, "COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    assert RECORDED_LINE in shown.stdout.splitlines()
    t1 = next(line for line in shown.stdout.splitlines() if line.strip().startswith("t1 "))
    assert re.search(r"completed, recorded", t1), t1
    t2 = next(line for line in shown.stdout.splitlines() if line.strip().startswith("t2 "))
    assert "recorded" not in t2, t2

    # the command's JSON output: an activity's kind as printed, bare
    view = json.loads((await run_cmd(OMA, "show", fork_id, "--json", env=env)).stdout)
    assert [(t["id"], t["recorded_turns"]) for t in view["tasks"]] == [("t1", 1), ("t2", 0)]
    assert view["recorded_turns"] == 1
    turns = [
        a
        for t in view["tasks"]
        for r in t["runs"]
        for a in r["activities"]
        if a["kind"] == "llm_turn"
    ]
    assert [(a["label"].endswith(" (recorded)"), a["recorded_from"]) for a in turns] == [
        (True, f"{workflow_id}/t1"),
        (False, None),
    ]

    one = await run_cmd(OMA, "show", fork_id, "--task", "t1", env=env)
    assert "recorded: 1 model turn(s), no provider called" in one.stdout.splitlines()

    page = tmp_path / "fork.html"
    written = await run_cmd(OMA, "show", fork_id, "--html", str(page), env=env)
    assert written.returncode == 0, written.stderr
    html = page.read_text()
    assert '<span class="mark">recorded</span>' in html
    assert "<b>recorded model turns</b> 1" in html
    await assert_replays(client, fork_id)
