"""Runs as the Web UI and ``temporal workflow list`` show them: search
attributes, summaries and details, and a failed run that ends Failed."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.converter import DataConverter

from oma import worker as oma_worker
from oma.client import OpenMultiAgent, start_run, team_run_result
from oma.core.contracts.names import WorkflowName
from oma.core.schema.results import TeamRunResult
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer
from oma.workflows._visibility import start_attributes
from tests.support.approvals import WAIT_S, eventually
from tests.support.approvals import start_run as start_approval_run
from tests.support.cli import start_with_stock_cli, temporal
from tests.support.runs import (
    TASK_QUEUE,
    assert_replays,
    process,
    run_agent,
    scripted,
    start_team,
    task,
    team_result,
)

pytestmark = pytest.mark.usefixtures("worker")

EXITS_3 = "import sys; sys.stdin.read(); print('Traceback: boom', file=sys.stderr); sys.exit(3)"


def hybrid_dev(team: str, code: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A three-task team run: plan (scripted), code (a process running ``code``), review."""
    agents = [scripted("planner", "the plan", "the review"), process("coder", code)]
    tasks = [
        task("plan", "planner"),
        task("code", "coder", "plan"),
        task("review", "planner", "code"),
    ]
    tasks[1]["title"] = "Write the code"
    return {"name": team, "agents": agents}, tasks


async def listed(dev_server: DevServer, query: str, count: int) -> list[dict[str, Any]]:
    """``temporal workflow list --query`` once it lists ``count`` runs
    (visibility lags the runs a little; 30 s at most)."""
    for _ in range(150):
        out = await temporal(dev_server, "workflow", "list", "--query", query, "-o", "json")
        assert out.returncode == 0, out.stderr
        rows = json.loads(out.stdout or "[]")
        if len(rows) >= count:
            return list(rows)
        await asyncio.sleep(0.2)
    return list(rows)


async def test_a_failed_team_run_ends_failed_and_is_listed_by_its_status(
    client: Client, dev_server: DevServer
) -> None:
    team = f"hybrid-dev-{uuid.uuid4().hex[:6]}"
    oma = OpenMultiAgent(client=client, task_queue=TASK_QUEUE)
    failed_id, ok_id = f"{team}-failed", f"{team}-ok"
    failed = await oma.run_tasks(*hybrid_dev(team, EXITS_3), workflow_id=failed_id)
    ok = await oma.run_tasks(
        *hybrid_dev(team, "import sys; print(sys.stdin.read()[:5])"), workflow_id=ok_id
    )
    # the client reads the result back out of the failure, as before
    assert (failed.success, failed.status, ok.success) == (False, "failed", True)
    assert failed.task("code").error_code == "PROCESS_FAILED"

    # list filters as a user types them: the workflow type bare
    rows = await listed(
        dev_server, f'OmaStatus="failed" AND OmaTeam="{team}" AND WorkflowType="TeamRun"', 1
    )
    assert [r["execution"]["workflowId"] for r in rows] == [failed_id]
    assert rows[0]["status"] == "WORKFLOW_EXECUTION_STATUS_FAILED"
    done = await listed(
        dev_server, f'OmaStatus="completed" AND OmaTeam="{team}" AND WorkflowType="TeamRun"', 1
    )
    assert [r["execution"]["workflowId"] for r in done] == [ok_id]
    assert done[0]["status"] == "WORKFLOW_EXECUTION_STATUS_COMPLETED"
    # its task's run is listed by team, agent and task, failed too
    children = await listed(
        dev_server, f'OmaTeam="{team}" AND OmaTask="code" AND OmaAgent="coder"', 2
    )
    assert sorted((r["execution"]["workflowId"], r["status"]) for r in children) == [
        (f"{failed_id}/code", "WORKFLOW_EXECUTION_STATUS_FAILED"),
        (f"{ok_id}/code", "WORKFLOW_EXECUTION_STATUS_COMPLETED"),
    ]

    # what the run is and how it ended, on its detail page
    details = await client.get_workflow_handle(failed_id).describe()
    assert details.status == WorkflowExecutionStatus.FAILED
    assert details.search_attributes["OmaErrorCode"] == ["TASK_FAILED"]
    current = await client.get_workflow_handle(failed_id).query("__temporal_workflow_metadata")
    assert current.current_details.startswith(f"{team}: 3 tasks, failed: code (PROCESS_FAILED: ")
    assert "exited with status 3" in current.current_details
    child = await client.get_workflow_handle(f"{failed_id}/code").describe()
    assert await child.static_summary() == "coder: Write the code"
    described = await temporal(dev_server, "workflow", "describe", "-w", failed_id)
    assert f"{team}: 3 tasks, failed: code (PROCESS_FAILED" in described.stdout


async def test_the_failure_carries_the_whole_result_for_temporal_workflow_result(
    client: Client, dev_server: DevServer
) -> None:
    team = f"hybrid-dev-{uuid.uuid4().hex[:6]}"
    wid = f"{team}-result"
    await OpenMultiAgent(client=client, task_queue=TASK_QUEUE).run_tasks(
        *hybrid_dev(team, EXITS_3), workflow_id=wid
    )
    out = await temporal(dev_server, "workflow", "result", "-w", wid, "-o", "json")
    closed = json.loads(out.stdout)
    assert closed["status"] == "FAILED"
    failure = closed["closeEvent"]["workflowExecutionFailedEventAttributes"]["failure"]
    info = failure["applicationFailureInfo"]
    assert (info["type"], info["nonRetryable"]) == ("TASK_FAILED", True)
    assert failure["message"].startswith(f"{team}: 3 tasks, failed: code (PROCESS_FAILED")
    # the partial result, whole, in the failure's details
    carried = info["details"][0]
    assert (carried["success"], carried["status"]) == (False, "failed")
    assert [(t["id"], t["status"]) for t in carried["tasks"]] == [
        ("plan", "completed"),
        ("code", "failed"),
        ("review", "skipped"),
    ]
    assert carried["tasks"][0]["output"] == "the plan"


async def test_the_web_ui_api_lists_failed_runs(client: Client, dev_server: DevServer) -> None:
    team = f"hybrid-dev-{uuid.uuid4().hex[:6]}"
    wid = f"{team}-api"
    await OpenMultiAgent(client=client, task_queue=TASK_QUEUE).run_tasks(
        *hybrid_dev(team, EXITS_3), workflow_id=wid
    )
    await listed(dev_server, f'OmaTeam="{team}" AND OmaStatus="failed"', 1)
    query = urllib.parse.quote(
        f'OmaStatus="failed" AND OmaTeam="{team}" AND WorkflowType="TeamRun"'
    )
    url = (
        f"http://127.0.0.1:{dev_server.http_port}/api/v1/namespaces/default/workflows?query={query}"
    )
    body = await asyncio.to_thread(lambda: json.load(urllib.request.urlopen(url, timeout=10)))
    assert [(e["execution"]["workflowId"], e["status"]) for e in body["executions"]] == [
        (wid, "WORKFLOW_EXECUTION_STATUS_FAILED")
    ]


async def test_a_namespace_without_the_attributes_starts_runs_without_them(
    client: Client, dev_server: DevServer
) -> None:
    namespace = f"bare-{uuid.uuid4().hex[:6]}"
    made = await temporal(dev_server, "operator", "namespace", "create", "--namespace", namespace)
    assert made.returncode == 0, made.stderr
    bare = await Client.connect(dev_server.address, namespace=namespace)
    wid = f"no-attributes-{uuid.uuid4().hex[:6]}"
    handle = await start_run(
        bare,
        WorkflowName.TEAM_RUN,
        {},
        id=wid,
        task_queue="nobody-polls",
        result_type=TeamRunResult,
        search_attributes=start_attributes(team="t"),
    )
    described = await handle.describe()
    await handle.terminate()
    assert "OmaStatus" not in described.search_attributes


async def test_a_run_started_with_the_stock_cli_is_listed_by_its_status(
    client: Client, dev_server: DevServer
) -> None:
    # no --search-attribute: the run asks whether the namespace has them
    team = f"stock-{uuid.uuid4().hex[:6]}"
    wid = f"{team}-run"
    agents, tasks = hybrid_dev(team, EXITS_3)
    run_input = json.dumps({"team": agents, "tasks": tasks})
    await start_with_stock_cli(dev_server, "TeamRun", wid, "--input", run_input)
    result = await team_run_result(client.get_workflow_handle(wid, result_type=TeamRunResult))
    assert result.status == "failed"

    rows = await listed(dev_server, f'OmaStatus="failed" AND OmaTeam="{team}"', 2)
    assert sorted(r["execution"]["workflowId"] for r in rows) == [wid, f"{wid}/code"]
    await assert_replays(client, wid)


async def test_a_stock_cli_run_on_a_namespace_without_the_attributes_sets_none(
    client: Client, dev_server: DevServer
) -> None:
    namespace = f"bare-{uuid.uuid4().hex[:6]}"
    made = await temporal(dev_server, "operator", "namespace", "create", "--namespace", namespace)
    assert made.returncode == 0, made.stderr
    bare = await Connection.local(dev_server.address, "bare-q", namespace=namespace).connect()
    agents, tasks = hybrid_dev("t", "import sys; print(sys.stdin.read()[:5])")
    async with oma_worker.build_worker(bare, "bare-q"):
        # what `temporal workflow start` sends: the input, no search attributes
        handle = await bare.start_workflow(
            WorkflowName.TEAM_RUN,
            {"team": agents, "tasks": tasks},
            id=f"bare-{uuid.uuid4().hex[:6]}",
            task_queue="bare-q",
            result_type=TeamRunResult,
        )
        result = await handle.result()
    assert result.success
    described = await handle.describe()
    assert "OmaStatus" not in described.search_attributes


async def status_of(client: Client, workflow_id: str, run_id: str | None = None) -> list[str]:
    described = await client.get_workflow_handle(workflow_id, run_id=run_id).describe()
    return list(described.search_attributes.get("OmaStatus", []))


async def test_an_execution_that_continued_as_new_says_so_and_the_last_one_how_it_ended(
    client: Client, workflow_id: str
) -> None:
    chain = [task(f"s{n}", "w", *([f"s{n - 1}"] if n else [])) for n in range(12)]
    handle = await start_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [scripted("w", "ok")]},
            "tasks": chain,
            "options": {"history_event_limit": 100},
        },
    )
    result = await team_result(handle)
    assert result.status == "completed"
    assert handle.first_execution_run_id is not None
    first = handle.first_execution_run_id
    assert await status_of(client, workflow_id, first) == ["continued_as_new"]
    assert await status_of(client, workflow_id) == ["completed"]
    await assert_replays(client, workflow_id)


async def test_a_task_cancelled_while_its_tool_call_waits_for_approval_says_cancelled(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    write = {"type": "tool_use", "id": "u1", "name": "file_write"}
    writer = {
        "name": "writer",
        "provider": "scripted",
        "script": [[write | {"input": {"path": "out.txt", "content": "hi"}}], "done"],
        "tools": ["readwrite"],
        "cwd": str(tmp_path),
    }
    run = await start_approval_run(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [writer]},
            "tasks": [task("w", "writer")],
            "options": {"approvals": {"tools": ["file_write"]}},
        },
    )
    await run.request("tool-w-1")
    await run.handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await run.handle.result()
    assert await status_of(client, workflow_id) == ["cancelled"]
    assert await status_of(client, f"{workflow_id}/w") == ["cancelled"]
    await assert_replays(client, workflow_id)


def upserted(events: Any) -> list[list[str]]:
    """The attributes each ``UpsertWorkflowSearchAttributes`` event of a history set."""
    return [
        sorted(
            e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        )
        for e in events
        if e.HasField("upsert_workflow_search_attributes_event_attributes")
    ]


async def test_a_team_run_records_one_patch_marker_and_its_tasks_runs_none(
    client: Client, workflow_id: str
) -> None:
    # two events per patch id and a repeat of the start's attributes were
    # paid by every task's run (issue 22: the per-task overhead); a task's run
    # takes the team run's patch from its input (AgentRunInput.patched), an
    # AgentRun started alone records it
    handle = await start_team(
        client,
        workflow_id,
        {"team": {"name": "t", "agents": [scripted("w", "ok")]}, "tasks": [task("one", "w")]},
    )
    assert (await team_result(handle)).status == "completed"
    alone = await run_agent(client, f"{workflow_id}-alone", scripted("w", "ok"), "hi")
    assert alone.status == "completed"
    for wid, patch_markers, patch_upserts in (
        (workflow_id, 1, [["TemporalChangeVersion"]]),
        (f"{workflow_id}-alone", 1, [["TemporalChangeVersion"]]),
        (f"{workflow_id}/one", 0, []),
    ):
        events = (await client.get_workflow_handle(wid).fetch_history()).events
        markers = [
            e.marker_recorded_event_attributes.marker_name
            for e in events
            if e.HasField("marker_recorded_event_attributes")
        ]
        assert markers.count("core_patch") == patch_markers, wid
        # the patch's TemporalChangeVersion, then how the run ended
        assert upserted(events) == [*patch_upserts, ["OmaStatus"]], wid
    child = (await client.get_workflow_handle(f"{workflow_id}/one").describe()).search_attributes
    assert {k: child[k] for k in ("OmaStatus", "OmaTeam", "OmaAgent", "OmaTask")} == {
        "OmaStatus": ["completed"],
        "OmaTeam": ["t"],
        "OmaAgent": ["w"],
        "OmaTask": ["one"],
    }
    assert await assert_replays(client, workflow_id) == 2
    assert await assert_replays(client, f"{workflow_id}-alone") == 1


async def test_tasks_without_search_attributes_start_and_end_without_them(
    client: Client, workflow_id: str
) -> None:
    # four attributes on each task's run cost the server a visibility write's
    # worth each: options.task_search_attributes turns them off (issue 38)
    handle = await start_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [scripted("w", "ok", "no")]},
            "tasks": [task("one", "w"), task("two", "w", "one")],
            "options": {"task_search_attributes": False},
        },
    )
    assert (await team_result(handle)).status == "completed"
    for tid in ("one", "two"):
        child = client.get_workflow_handle(f"{workflow_id}/{tid}")
        described = await child.describe()
        assert not [k for k in described.search_attributes if k.startswith("Oma")], tid
        assert await described.memo() == {"OmaSearchAttributes": "off"}
        events = (await child.fetch_history()).events
        # nothing set, and no activity asked whether the namespace has them
        assert upserted(events) == [], tid
        assert not [e for e in events if e.HasField("activity_task_scheduled_event_attributes")]
    team_attributes = (await handle.describe()).search_attributes
    assert (team_attributes["OmaStatus"], team_attributes["OmaTeam"]) == (["completed"], ["t"])
    assert await assert_replays(client, workflow_id) == 3


async def test_a_stock_cli_run_sets_the_identity_it_did_not_start_with(
    client: Client, dev_server: DevServer
) -> None:
    wid = f"stock-identity-{uuid.uuid4().hex[:6]}"
    run_input = json.dumps(
        {"team": {"name": "t", "agents": [scripted("w", "ok")]}, "tasks": [task("one", "w")]}
    )
    await start_with_stock_cli(dev_server, "TeamRun", wid, "--input", run_input)
    handle = client.get_workflow_handle(wid, result_type=TeamRunResult)
    assert (await team_run_result(handle)).status == "completed"
    events = (await handle.fetch_history()).events
    assert ["OmaStatus", "OmaTeam"] in upserted(events)
    described = await handle.describe()
    assert described.search_attributes["OmaTeam"] == ["t"]
    await assert_replays(client, wid)


def statuses_set(events: Any) -> list[str]:
    """Every ``OmaStatus`` a history's upserts set, in order."""
    converter = DataConverter.default.payload_converter
    return [
        converter.from_payload(fields["OmaStatus"], str)
        for e in events
        if e.HasField("upsert_workflow_search_attributes_event_attributes")
        and "OmaStatus"
        in (
            fields
            := e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        )
    ]


async def current_details(client: Client, workflow_id: str) -> str:
    metadata = await client.get_workflow_handle(workflow_id).query("__temporal_workflow_metadata")
    return str(metadata.current_details)


async def status_becomes(client: Client, workflow_id: str, status: str) -> None:
    async def probe() -> bool | None:
        return True if await status_of(client, workflow_id) == [status] else None

    await eventually(probe, f"OmaStatus of {workflow_id} to be {status}", WAIT_S)


WAITS_FOR_RELEASE = (
    "import pathlib, sys, time; sys.stdin.read(); flag = pathlib.Path(sys.argv[1])\n"
    "while not flag.exists(): time.sleep(0.05)\n"
    "print('released')"
)


async def test_a_run_waiting_on_a_dispatch_approval_says_awaiting_approval_until_decided(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    run = await start_approval_run(
        client,
        workflow_id,
        {
            "team": {
                "name": "t",
                "agents": [
                    scripted("w", "drafted"),
                    process("p", WAITS_FOR_RELEASE, args=["-c", WAITS_FOR_RELEASE, str(release)]),
                ],
            },
            "tasks": [
                task("draft", "w"),
                task("publish", "w", "draft"),
                task("after", "p", "publish"),
            ],
            "options": {"approvals": {"dispatch": ["publish"]}},
        },
    )
    request = await run.request("dispatch-publish")
    await status_becomes(client, workflow_id, "awaiting_approval")
    # the details name the request: the Web UI's detail page, `temporal workflow describe`
    assert await current_details(client, workflow_id) == (
        "t: 3 tasks, awaiting approval: dispatch-publish; 1 settled"
    )
    rows = await listed_by(client, f'WorkflowId="{workflow_id}" AND OmaStatus="awaiting_approval"')
    assert rows == [workflow_id]

    await run.decide(request)
    # `after` waits for its release: the run runs, and no request is open
    await run.state_where(lambda s: s.task("after").status == "in_progress", "after to start")
    await status_becomes(client, workflow_id, "running")
    assert await current_details(client, workflow_id) == "t: 3 tasks, running (2 settled)"

    release.write_text("go")
    assert (await run.result()).status == "completed"
    events = (await run.handle.fetch_history()).events
    assert statuses_set(events) == ["awaiting_approval", "running", "completed"]
    await assert_replays(client, workflow_id)


async def listed_by(client: Client, query: str) -> list[str]:
    """The workflow ids ``query`` lists, once it lists any (visibility lags a little)."""

    async def probe() -> list[str] | None:
        ids = [w.id async for w in client.list_workflows(query)]
        return ids or None

    return await eventually(probe, f"a run listed by {query}", WAIT_S)


async def test_a_task_waiting_on_a_tool_approval_makes_its_team_run_await_approval(
    client: Client, workflow_id: str, tmp_path: Path
) -> None:
    write = {"type": "tool_use", "id": "u1", "name": "file_write"}
    writer = {
        "name": "writer",
        "provider": "scripted",
        "script": [[write | {"input": {"path": "out.txt", "content": "hi"}}], "done"],
        "tools": ["readwrite"],
        "cwd": str(tmp_path),
    }
    run = await start_approval_run(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [writer]},
            "tasks": [task("w", "writer")],
            "options": {"approvals": {"tools": ["file_write"]}},
        },
    )
    request = await run.request("tool-w-1")
    # the request is the task's run's, forwarded to the team run: both wait
    await status_becomes(client, workflow_id, "awaiting_approval")
    await status_becomes(client, f"{workflow_id}/w", "awaiting_approval")
    assert await current_details(client, workflow_id) == (
        "t: 1 task, awaiting approval: tool-w-1 (file_write); 0 settled"
    )
    assert await current_details(client, f"{workflow_id}/w") == (
        "awaiting approval: tool-w-1 (file_write)"
    )

    await run.decide(request)
    assert (await run.result()).status == "completed"
    for wid in (workflow_id, f"{workflow_id}/w"):
        events = (await client.get_workflow_handle(wid).fetch_history()).events
        assert statuses_set(events) == ["awaiting_approval", "running", "completed"], wid
    await assert_replays(client, workflow_id)
