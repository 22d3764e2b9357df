"""What waits for a person, found across runs: ``oma approvals`` without a run
id and ``oma list``, through Temporal's visibility, against the session's dev
server (other tests' runs share it: each test looks only at its own)."""

from __future__ import annotations

import json
import os
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from oma.cli.listing import age
from oma.client.listing import list_team_runs, open_approvals
from oma.runtime.dev_server import DevServer, free_port, is_listening
from oma.worker import build_worker
from tests.support.approvals import WAIT_S, eventually, gated_run, start_run, write
from tests.support.cli import OMA, cells, oma, run_cmd, temporal
from tests.support.runs import TASK_QUEUE, process, scripted, task

pytestmark = pytest.mark.usefixtures("worker")


async def listed_ids(client: Client, query: str, count: int) -> list[str]:
    """The workflow ids ``query`` lists, once it lists ``count`` (visibility
    lags the runs a little)."""

    async def probe() -> list[str] | None:
        ids = [w.id async for w in client.list_workflows(query)]
        return ids if len(ids) >= count else None

    return await eventually(probe, f"{count} run(s) listed by {query}", WAIT_S)


async def awaiting(client: Client, *workflow_ids: str) -> None:
    """Once visibility lists every one of ``workflow_ids`` as awaiting approval."""
    ids = " OR ".join(f'WorkflowId="{w}"' for w in workflow_ids)
    await listed_ids(client, f'OmaStatus="awaiting_approval" AND ({ids})', len(workflow_ids))


def dispatch_gated(team: str, *task_ids: str) -> dict[str, Any]:
    return {
        "team": {"name": team, "agents": [scripted("a", "done")]},
        "tasks": [task(t, "a") for t in task_ids],
        "options": {"approvals": {"dispatch": list(task_ids)}},
    }


async def test_oma_approvals_without_a_run_id_lists_the_open_requests_of_every_waiting_run(
    client: Client, dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    gated = await start_run(client, f"{workflow_id}-a", dispatch_gated("t", "publish"))
    tool = await start_run(
        client, f"{workflow_id}-b", gated_run(tmp_path, [write("u1", "out.txt", "hi")], "wrote")
    )
    dispatch_request = await gated.request("dispatch-publish")
    tool_request = await tool.request("tool-w-1")
    await awaiting(client, gated.id, tool.id)

    listed = await oma(dev_server, "approvals", "--json")
    assert listed.returncode == 0, listed.stderr
    found = json.loads(listed.stdout)
    ours = [r for r in found["requests"] if r["workflow_id"].startswith(workflow_id)]
    assert [(r["workflow_id"], r["request_id"], r["approves"]) for r in ours] == [
        (gated.id, "dispatch-publish", "dispatch publish"),
        (tool.id, "tool-w-1", "tool file_write (task w)"),
    ]
    # the task's run waits too, but its team run lists (and decides) its request
    # (the command's JSON output: its workflow type as printed, bare)
    assert [(r["workflow_type"], r["task"], r["tool"], r["scope"]) for r in ours] == [
        ("TeamRun", "publish", None, gated.id),
        ("TeamRun", "w", "file_write", f"{tool.id}/w"),
    ]
    assert ours[0]["requested_at"] == dispatch_request.requested_at.isoformat().replace(
        "+00:00", "Z"
    )
    assert ours[1]["request_hash"] == tool_request.request_hash

    table = await oma(dev_server, "approvals")
    assert table.returncode == 0, table.stderr
    rows = [cells(line) for line in table.stdout.splitlines() if workflow_id in line]
    assert [row[:3] for row in rows] == [
        [gated.id, "dispatch-publish", "dispatch publish"],
        [tool.id, "tool-w-1", "tool file_write (task w)"],
    ]
    assert all(row[-1].endswith("s") for row in rows)  # waiting for seconds
    assert "decide with: oma approve|reject RUN REQUEST_ID" in table.stdout

    await gated.decide(dispatch_request)
    await tool.decide(tool_request)
    assert (await gated.result()).status == "completed"
    assert (await tool.result()).status == "completed"
    await listed_ids(client, f'OmaStatus="completed" AND WorkflowId="{tool.id}"', 1)
    after = json.loads((await oma(dev_server, "approvals", "--json")).stdout)
    assert not [r for r in after["requests"] if r["workflow_id"].startswith(workflow_id)]


async def test_a_waiting_run_whose_worker_is_gone_is_named_as_unanswered(
    client: Client, workflow_id: str
) -> None:
    queue = f"{TASK_QUEUE}-gone-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, queue):
        run = await start_run(client, workflow_id, dispatch_gated("t", "x"), task_queue=queue)
        await run.request("dispatch-x")
        await awaiting(client, workflow_id)
    # its worker stopped: the run still says it waits, but nothing answers its query
    found = await open_approvals(client, rpc_timeout=timedelta(seconds=2))
    assert not [r for r in found.requests if r.workflow_id == workflow_id]
    [unanswered] = [u for u in found.unanswered if u.workflow_id == workflow_id]
    assert unanswered.error == (
        "no answer to its pending_approvals query: is a worker polling its task queue?"
    )
    async with build_worker(client, queue):
        await run.abort("done")
        assert (await run.result()).status == "cancelled"


async def test_oma_list_lists_team_runs_newest_first_filtered_by_status_and_team(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    team = f"list-{uuid.uuid4().hex[:8]}"
    # started first and still waiting: the server lists it first (open runs
    # come before closed ones); oma list puts the newer runs above it
    waiting = await start_run(client, f"{workflow_id}-1", dispatch_gated(team, "x"))
    await waiting.request("dispatch-x")
    ok = await start_run(
        client,
        f"{workflow_id}-2",
        {"team": {"name": team, "agents": [scripted("a", "ok")]}, "tasks": [task("t", "a")]},
    )
    assert (await ok.result()).status == "completed"
    failing = {
        "team": {"name": team, "agents": [process("p", "import sys; sys.exit(3)")]},
        "tasks": [task("t", "p")],
    }
    failed = await start_run(client, f"{workflow_id}-3", failing)
    assert (await failed.result()).status == "failed"
    await listed_ids(client, f'OmaTeam="{team}" AND OmaStatus!="running"', 5)  # and children

    async def ids(**filters: Any) -> list[tuple[str, str | None]]:
        listed = await list_team_runs(client, team=team, **filters)
        return [(r.workflow_id, r.status) for r in listed]

    assert await ids() == [
        (failed.id, "failed"),
        (ok.id, "completed"),
        (waiting.id, "awaiting_approval"),
    ]
    assert await ids(limit=2) == [(failed.id, "failed"), (ok.id, "completed")]
    assert await ids(status="awaiting_approval") == [(waiting.id, "awaiting_approval")]
    assert await ids(status="completed") == [(ok.id, "completed")]
    assert await ids(status="rejected") == []

    out = await oma(dev_server, "list", "--team", team, "--limit", "2", "--json")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert [(r["workflow_id"], r["status"], r["team"]) for r in listed] == [
        (failed.id, "failed", team),
        (ok.id, "completed", team),
    ]
    assert (listed[0]["execution_status"], listed[0]["error_code"]) == ("FAILED", "TASK_FAILED")
    table = await oma(dev_server, "list", "--team", team)
    assert table.returncode == 0, table.stderr
    rows = [cells(line) for line in table.stdout.splitlines() if workflow_id in line]
    assert [row[:3] for row in rows] == [
        [failed.id, "failed", team],
        [ok.id, "completed", team],
        [waiting.id, "awaiting_approval", team],
    ]
    await waiting.abort("done")
    await waiting.result()


async def test_a_team_whose_name_a_query_cannot_quote_is_still_found(
    client: Client, workflow_id: str
) -> None:
    # the SQL visibility store matches no escaped quote or backslash: filtered here
    team = f'say "hi" \\ {uuid.uuid4().hex[:6]}'
    run = await start_run(
        client,
        workflow_id,
        {"team": {"name": team, "agents": [scripted("a", "ok")]}, "tasks": [task("t", "a")]},
    )
    assert (await run.result()).status == "completed"
    await listed_ids(client, f'WorkflowId="{workflow_id}" AND OmaStatus="completed"', 1)
    listed = await list_team_runs(client, team=team)
    assert [(r.workflow_id, r.team) for r in listed] == [(workflow_id, team)]


async def test_oma_list_and_approvals_name_a_namespace_without_the_search_attributes(
    dev_server: DevServer, tmp_path: Path
) -> None:
    namespace = f"bare-{uuid.uuid4().hex[:6]}"
    made = await temporal(dev_server, "operator", "namespace", "create", "--namespace", namespace)
    assert made.returncode == 0, made.stderr
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "TEMPORAL_NAMESPACE": namespace}
    for args in (["approvals"], ["list", "--team", "t"]):
        proc = await run_cmd(OMA, *args, cwd=tmp_path, env=env)
        assert proc.returncode == 1, (args, proc.stdout)
        assert proc.stderr.startswith(
            f"error: SEARCH_ATTRIBUTES_MISSING: namespace {namespace!r} cannot be searched by "
            "OMA's search attributes"
        ), proc.stderr
        assert "temporal operator search-attribute create" in proc.stderr
    # without a filter, the list needs none of them
    proc = await run_cmd(OMA, "list", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"no team runs in namespace {namespace!r}" in proc.stdout


async def test_oma_list_and_approvals_with_nothing_listening_fail_and_start_no_server(
    tmp_path: Path,
) -> None:
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "TEMPORAL_ADDRESS": address}
    for args in (["approvals"], ["list"]):
        proc = await run_cmd(OMA, *args, cwd=tmp_path, env=env)
        assert proc.returncode == 1
        assert proc.stderr.startswith(
            f"error: TEMPORAL_UNAVAILABLE: nothing listens on {address}, and {tmp_path} holds "
            "no .oma/temporal.db"
        ), proc.stderr
    assert not is_listening(address)
    assert not (tmp_path / ".oma").exists()


async def test_oma_list_refuses_an_unknown_status_before_connecting(tmp_path: Path) -> None:
    env = {**os.environ, "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}"}
    proc = await run_cmd(OMA, "list", "--status", "done", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        "error: INVALID_INPUT: unknown OmaStatus 'done': one of running, awaiting_approval, "
        "completed, failed, rejected, cancelled, planned, continued_as_new"
    ), proc.stderr


def test_an_age_reads_in_the_largest_units_that_matter() -> None:
    assert [age(s) for s in (0, 59, 60, 3599, 3600, 3660 + 59, 86400 + 7200)] == [
        "0s",
        "59s",
        "1m",
        "59m",
        "1h 00m",
        "1h 01m",
        "1d 2h",
    ]
