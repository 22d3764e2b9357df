"""What a person reads of a run that stops early: `oma show` of a run
cancelled with `temporal workflow cancel` gives each task the reason the run's
`state` query gives; while an abort drains, `oma show`, the run's details and
`oma run`'s bar say it is being aborted, and a second `oma abort` says one is
pending instead of sending another."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError

from oma.core.contracts.names import QueryName
from oma.core.schema.results import TeamRunResult
from oma.runtime.dev_server import DevServer
from tests.support.cli import input_file, oma, temporal
from tests.support.runs import assert_replays, process, start_team, task, team_result
from tests.support.terminal import Terminal

pytestmark = pytest.mark.usefixtures("worker")


def waits_for(go: Path) -> str:
    """A process that waits until ``go`` exists, then prints ``done``."""
    return (
        "import os, sys, time\n"
        "sys.stdin.read()\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    time.sleep(0.05)\n"
        "print('done')\n"
    )


async def state(client: Client, workflow_id: str) -> TeamRunResult:
    handle = client.get_workflow_handle(workflow_id)
    return await handle.query(QueryName.STATE, result_type=TeamRunResult)


async def until(client: Client, workflow_id: str, statuses: dict[str, str]) -> None:
    """Wait until the run's tasks have ``statuses`` (task id -> status)."""
    for _ in range(400):
        try:
            tasks = {t.id: t.status.value for t in (await state(client, workflow_id)).tasks}
        except Exception:  # the run has not taken its first workflow task yet
            tasks = {}
        if all(tasks.get(k) == v for k, v in statuses.items()):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{workflow_id}: tasks never reached {statuses}: {tasks}")


async def details(client: Client, workflow_id: str) -> str:
    metadata = await client.get_workflow_handle(workflow_id).query("__temporal_workflow_metadata")
    return str(metadata.current_details)


async def test_oma_show_of_a_run_cancelled_with_temporal_gives_each_task_the_states_reason(
    client: Client, dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    lint = "import sys; sys.stdin.read(); sys.exit(2)"
    run_input: dict[str, Any] = {
        "team": {
            "name": "t",
            "agents": [process("slow", waits_for(tmp_path / "never")), process("linter", lint)],
        },
        "tasks": [
            task("code", "slow"),
            task("review", "slow", "code"),
            task("lint", "linter"),
            task("fixup", "slow", "lint"),
        ],
    }
    handle = await start_team(client, workflow_id, run_input)
    await until(client, workflow_id, {"code": "in_progress", "lint": "failed"})

    sent = await temporal(dev_server, "workflow", "cancel", "--workflow-id", workflow_id)
    assert sent.returncode == 0, sent.stderr
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    queried = {
        t.id: (t.status.value, t.error_code, t.error)
        for t in (await state(client, workflow_id)).tasks
    }

    shown = await oma(dev_server, "show", workflow_id, "--json")
    assert shown.returncode == 0, shown.stderr
    view = {
        t["id"]: (t["status"], t["error_code"], t["error"])
        for t in json.loads(shown.stdout)["tasks"]
    }
    assert view == queried
    assert view["code"] == ("failed", "CANCELLED", "cancelled with the run")
    assert view["review"] == ("skipped", None, "skipped: the run was cancelled")
    assert view["fixup"] == ("skipped", None, "skipped: dependency 'lint' (Lint) failed")

    text = (await oma(dev_server, "show", workflow_id)).stdout
    failures = text[text.index("Failures") :].splitlines()
    at = failures.index("code (Code) [CANCELLED]:")
    assert failures[at + 1] == "  cancelled with the run"
    assert "  review (Review): skipped: the run was cancelled" in failures
    assert "  fixup (Fixup): skipped: dependency 'lint' (Lint) failed" in failures
    assert "(no error recorded)" not in text
    await assert_replays(client, workflow_id)


async def test_an_abort_draining_is_said_and_a_second_oma_abort_says_it_is_pending(
    client: Client, dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    run_input = {
        "team": {"name": "t", "agents": [process("slow", waits_for(go))]},
        "tasks": [task("code", "slow"), task("review", "slow", "code")],
    }
    handle = await start_team(client, workflow_id, run_input)
    try:
        await until(client, workflow_id, {"code": "in_progress"})
        first = await oma(dev_server, "abort", workflow_id, "--reason", "no longer needed")
        assert first.returncode == 0, first.stderr
        assert f"abort sent to TeamRun {workflow_id}" in first.stdout

        stopping = "t: 2 tasks, stopping (aborted: no longer needed): the tasks in flight settle"
        for _ in range(200):  # the signal reaches the run with its next workflow task
            if (said := await details(client, workflow_id)).startswith(stopping):
                break
            await asyncio.sleep(0.05)
        assert said == f"{stopping}; 0 settled"

        shown = await oma(dev_server, "show", workflow_id)
        assert shown.returncode == 0, shown.stderr
        [line] = [line for line in shown.stdout.splitlines() if line.startswith("aborting")]
        assert line.startswith("aborting: no longer needed (abort signal at +")
        assert line.endswith(
            "s): no new task starts, the tasks in flight settle, the rest are skipped"
        )

        second = await oma(dev_server, "abort", workflow_id, "--reason", "again")
        assert second.returncode == 0, second.stderr
        assert second.stdout.startswith(
            f"TeamRun {workflow_id} is already being aborted: an abort (no longer needed) "
            "reached it at "
        ), second.stdout
        assert "abort sent" not in second.stdout
    finally:
        go.touch()
    result = await team_result(handle)
    assert (result.status, result.error) == ("cancelled", "aborted: no longer needed")
    signals = [
        e
        for e in (await handle.fetch_history()).events
        if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    assert len(signals) == 1, "the second oma abort sent nothing"
    await assert_replays(client, workflow_id)


async def test_the_live_view_says_the_run_is_being_aborted_while_it_drains(
    client: Client, dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    run_input = {
        "team": {"name": "t", "agents": [process("slow", waits_for(go))]},
        "tasks": [task("code", "slow"), task("review", "slow", "code")],
    }
    run_file = input_file(tmp_path, run_input)
    term = Terminal(dev_server, "run", "--no-worker", "--workflow-id", workflow_id, run_file)
    try:
        await until(client, workflow_id, {"code": "in_progress"})
        aborted = await oma(dev_server, "abort", workflow_id, "--reason", "no longer needed")
        assert aborted.returncode == 0, aborted.stderr
        # on the bar's line (cut at the screen's edge, never wrapped: a reason is any length)
        await term.wait_for(r"0/2 tasks settled +aborting \(no longer needed\)")
        go.touch()
        assert await term.exit_code() == 1, term.screen
    finally:
        go.touch()
        term.kill()
