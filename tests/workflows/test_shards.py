"""A tasks run of more than ``MAX_RUN_TASKS`` tasks runs in shards: each
connected part of its graph in one ``TeamRun`` child ``<run id>/shard/<n>``.

The limits are lowered here (``MAX_RUN_TASKS`` 4, shards of at most 3
tasks), on a worker of this module's own whose task queue the session-end
replay leaves out: these tests replay their histories under the same limits
(a sharded run replays only under the limits it ran with)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHistory

from oma.cli import show
from oma.cli.debug import words
from oma.cli.summary import print_result
from oma.client import team_run_result
from oma.client.listing import list_team_runs
from oma.core.contracts.names import QueryName, SignalName, WorkflowName
from oma.core.contracts.workflow_ids import shard_workflow_id, task_workflow_id
from oma.core.schema import limits
from oma.core.schema.dag import shard_plan
from oma.core.schema.errors import DagValidationError, InvalidForkError, InvalidRunInputError
from oma.core.schema.results import ShardResult, TeamRunResult
from oma.core.schema.run_input import checked_team_run_input, parse_team_run_input
from oma.core.schema.task import TaskSpec
from oma.records.fork_source import read_source
from oma.records.histories import fetch_histories
from oma.records.history_files import read_history_file
from oma.runtime.dev_server import DevServer
from oma.viewer import model
from oma.viewer.html import render_html
from oma.viewer.model import RunView, ShardView, build_run_view
from oma.worker import build_worker, plugin
from tests.support.approvals import decision
from tests.support.cli import oma_show
from tests.support.paths import HISTORIES
from tests.support.runs import (
    FOREIGN_QUEUE_SUFFIX,
    histories_of,
    process,
    scripted,
    scripted_activities,
    start_team,
    task,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most 4 tasks per ``TeamRun``, shards of at most 3, one at a time
    (the workflows read the limits from the module the test patched: it is
    passed through the sandbox)."""
    monkeypatch.setattr(limits, "MAX_RUN_TASKS", 4)
    monkeypatch.setattr(limits, "SHARD_TASKS", 3)
    monkeypatch.setattr(limits, "MAX_SHARDED_RUN_TASKS", 12)
    monkeypatch.setattr(limits, "SHARDS_AT_ONCE", 1)


@pytest.fixture
async def queue(client: Client) -> AsyncIterator[str]:
    """The task queue of a worker of this test's own (not replayed at the session's end)."""
    name = f"shards-{uuid.uuid4().hex[:8]}{FOREIGN_QUEUE_SUFFIX}"
    async with build_worker(client, name, scripted_activities(name)):
        yield name


def _team(*agents: dict[str, Any]) -> dict[str, Any]:
    return {"name": "sharded", "agents": [scripted("w", "done"), *agents]}


async def _replay_all(client: Client, run_id: str, shards: int) -> int:
    """Replay the run's history, its shards' and their tasks' runs."""
    replayer = plugin.replayer(strict_sandbox=True)
    histories = [await client.get_workflow_handle(run_id).fetch_history()]
    for n in range(1, shards + 1):
        histories += await histories_of(client, shard_workflow_id(run_id, n))
    for history in histories:
        await replayer.replay_workflow(history)
    return len(histories)


async def _shard_result(client: Client, run_id: str, n: int) -> TeamRunResult:
    shard = shard_workflow_id(run_id, n)
    return await team_run_result(client.get_workflow_handle(shard, result_type=TeamRunResult))


def _interleaved() -> list[dict[str, Any]]:
    # parts a (2 tasks), b (2), c (2), d (1), their tasks interleaved
    return [
        task("a1", "w"),
        task("b1", "bad"),
        task("c1", "w"),
        task("a2", "w", "a1"),
        task("b2", "w", "b1"),
        task("d1", "w"),
        task("c2", "w", "c1"),
    ]


async def test_a_run_past_the_limit_runs_its_connected_parts_in_shards(
    client: Client, queue: str, workflow_id: str
) -> None:
    run_input = {
        "team": _team(process("bad", "import sys; sys.exit(3)")),
        "tasks": _interleaved(),
    }
    checked_team_run_input(run_input)  # the client's check takes it
    handle = await start_team(client, workflow_id, run_input, task_queue=queue)
    result = await team_run_result(handle)

    assert result.status == "failed" and not result.success
    assert result.tasks == []  # each shard's run holds its tasks
    shards = [(s.run_id, s.first_task, s.tasks, s.status) for s in result.shards]
    assert shards == [
        (shard_workflow_id(workflow_id, 1), "a1", 2, "completed"),
        (shard_workflow_id(workflow_id, 2), "b1", 2, "failed"),
        (shard_workflow_id(workflow_id, 3), "c1", 3, "completed"),
    ]
    failed = result.shards[1]
    assert (failed.completed, failed.failed, failed.skipped) == (0, 1, 1)
    assert [(s.completed, s.failed, s.skipped) for s in (result.shards[0], result.shards[2])] == [
        (2, 0, 0),
        (3, 0, 0),
    ]
    # a failed part stopped nothing else; the last shard's tasks kept the run's order
    last = await _shard_result(client, workflow_id, 3)
    assert [(t.id, t.status, t.output) for t in last.tasks] == [
        ("c1", "completed", "done"),
        ("d1", "completed", "done"),
        ("c2", "completed", "done"),
    ]
    middle = await _shard_result(client, workflow_id, 2)
    assert [t.status for t in middle.tasks] == ["failed", "skipped"]
    # a task's run is a child of its shard's run
    a2 = client.get_workflow_handle(task_workflow_id(shard_workflow_id(workflow_id, 1), "a2"))
    assert (await a2.describe()).status is not None

    events = await handle.query(QueryName.EVENTS)
    kinds = [e["type"] for e in events]
    assert kinds.count("shard_start") == 3 and kinds.count("shard_end") == 3
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    # a fork reads a shard, not the sharded run
    with pytest.raises(InvalidForkError) as refused:
        await read_source(client, workflow_id)
    first = shard_workflow_id(workflow_id, 1)
    said = "ran its tasks in 3 shards, each a TeamRun of its own: fork or reuse a shard's run"
    assert f"{said} ({first}, ...)" in refused.value.message
    # oma list lists the run, not its shards (its result and oma show do)
    listed = [r.workflow_id for r in await list_team_runs(client, limit=100)]
    assert workflow_id in listed
    assert [w for w in listed if w.startswith(f"{workflow_id}/")] == []
    # the run, its 3 shards, the 6 tasks' runs that started (b2 was skipped)
    assert await _replay_all(client, workflow_id, 3) == 1 + 3 + 6


async def test_an_abort_reaches_the_shard_running_and_skips_the_shards_after_it(
    client: Client, queue: str, workflow_id: str
) -> None:
    run_input = {
        "team": _team(),
        "tasks": [
            task("a1", "w"),
            task("gated", "w", "a1"),
            task("b1", "w"),
            task("b2", "w", "b1"),
            task("c1", "w"),
        ],
        "options": {"approvals": {"dispatch": ["gated"]}},
    }
    handle = await start_team(client, workflow_id, run_input, task_queue=queue)
    first = client.get_workflow_handle(shard_workflow_id(workflow_id, 1))
    await _wait_for_request(first, "dispatch-gated")
    # while it runs: the shard it started, and the one it has not
    for _ in range(50):  # (the run's history records its shard's start)
        running = await _view(client, workflow_id)
        if running.shards and running.shards[0].status == "running":
            break
        await asyncio.sleep(0.1)
    assert _shards_of(running) == [
        (first.id, None, 2, "running", None, None, None),
        (shard_workflow_id(workflow_id, 2), None, None, None, None, None, None),
    ]
    await handle.signal(SignalName.ABORT, {"reason": "no longer needed"})
    result = await team_run_result(handle)

    assert result.status == "cancelled" and result.error == "aborted: no longer needed"
    one, two = result.shards
    assert one.status == "cancelled" and (one.completed, one.skipped) == (1, 1)
    assert two.status is None and two.skipped == 3
    assert two.error == "skipped: aborted: no longer needed"
    assert (await _shard_result(client, workflow_id, 1)).error == "aborted: no longer needed"
    assert await _replay_all(client, workflow_id, 1) == 1 + 1 + 1  # the run, a shard, a1


async def _view(client: Client, run_id: str, *, running: bool = False) -> RunView:
    """``oma show``'s view of ``run_id`` from its own histories (``running``:
    as it was before its last event, which closed it)."""
    histories = await fetch_histories(client, run_id, children=False)
    if running:
        last = histories[-1]
        histories[-1] = WorkflowHistory(last.workflow_id, list(last.events)[:-1])
    return await build_run_view(histories, client.data_converter, run_id)


def _shards_of(view: RunView) -> list[tuple[Any, ...]]:
    return [
        (s.run_id, s.first_task, s.tasks, s.status, s.completed, s.failed, s.skipped)
        for s in view.shards
    ]


async def test_oma_show_lists_a_sharded_runs_shards_and_a_shard_its_tasks(
    client: Client,
    queue: str,
    workflow_id: str,
    dev_server: DevServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_input = {
        "team": _team(process("bad", "import sys; sys.exit(3)")),
        "tasks": _interleaved(),
    }
    handle = await start_team(client, workflow_id, run_input, task_queue=queue)
    assert (await team_run_result(handle)).status == "failed"
    one, two, three = (shard_workflow_id(workflow_id, n) for n in (1, 2, 3))

    # the view: its shards, as its result has them (in its failure), and no
    # task of its own; of its payloads it reads its first shard's input (its
    # team), not its whole input (up to 100,000 tasks), nor a shard's result
    read: list[str] = []
    decode = model._Builder.decode

    async def reading(builder: Any, payloads: Any, what: str) -> Any:
        read.append(what)
        return await decode(builder, payloads, what)

    monkeypatch.setattr(model._Builder, "decode", reading)
    view = await _view(client, workflow_id)
    assert read == [f"the input of {one}"]
    assert view.tasks == [] and view.coordinator == [] and view.team == "sharded"
    assert _shards_of(view) == [
        (one, "a1", 2, "completed", 2, 0, 0),
        (two, "b1", 2, "failed", 0, 1, 1),
        (three, "c1", 3, "completed", 3, 0, 0),
    ]
    assert all(s.started_at and s.closed_at for s in view.shards) and view.shard_tasks == 7
    # before its result: what its shard children's events say (a failed shard's
    # result is in its failure; a completed shard completed every task)
    running = await _view(client, workflow_id, running=True)
    assert running.execution_status == "RUNNING" and running.tasks == []
    assert _shards_of(running) == [
        (one, None, 2, "completed", 2, 0, 0),
        (two, "b1", 2, "failed", 0, 1, 1),
        (three, None, 3, "completed", 3, 0, 0),
    ]

    shown = await oma_show(dev_server, workflow_id)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"TeamRun {workflow_id}" in out and "failed" in out
    assert "shards: 7 tasks in 3 shards" in out
    cells = {row[0]: row[1:] for row in _table_rows(out, "│") if row}
    assert cells[one][:6] == ["a1", "2", "completed", "2", "0", "0"]
    assert cells[two][:6] == ["b1", "2", "failed", "0", "1", "1"]
    assert cells[three][:6] == ["c1", "3", "completed", "3", "0", "0"]
    assert f"each shard's tasks: oma show {workflow_id}/shard/<n>" in out
    assert "tasks, in dependency order" not in out and "Outputs" not in out

    page = tmp_path / "run.html"
    written = await oma_show(dev_server, workflow_id, "--html", str(page))
    assert written.returncode == 0, written.stderr
    assert f"TeamRun {workflow_id} (failed), 7 tasks in 3 shards" in written.stdout
    source = page.read_text()
    assert source.count("<tr data-shard=") == 3
    for shard, first in ((one, "a1"), (two, "b1"), (three, "c1")):
        assert f'<tr data-shard="{shard}"><td><code>{shard}</code></td><td><code>{first}' in source
    assert "Task DAG" not in source and "Waterfall" not in source

    one_task = await oma_show(dev_server, workflow_id, "--task", "b1")
    assert one_task.returncode == 1
    assert "ran its tasks in 3 shards" in one_task.stderr
    assert f"oma show {workflow_id}/shard/<n> --task b1" in one_task.stderr

    # a shard's run shows its tasks, and one whole
    shard = await oma_show(dev_server, two)
    assert shard.returncode == 0, shard.stderr
    assert f"TeamRun {two}" in shard.stdout
    assert "b1 (B1) [PROCESS_FAILED]:" in shard.stdout
    assert "b2 (B2): skipped: dependency 'b1'" in shard.stdout
    failed = await oma_show(dev_server, two, "--task", "b1")
    assert failed.returncode == 0, failed.stderr
    assert "task b1" in failed.stdout and "exited with status 3" in failed.stdout
    # a shard's histories alone (exported, without its run's): the shard's view
    alone = await build_run_view(await fetch_histories(client, two), client.data_converter)
    assert alone.workflow_id == two and [t.id for t in alone.tasks] == ["b1", "b2"]


async def _wait_for_request(handle: Any, request_id: str) -> dict[str, Any]:
    """The open request ``request_id`` of the run ``handle``, once it asks."""
    for _ in range(200):
        try:
            pending = await handle.query(QueryName.PENDING_APPROVALS)
        except Exception:  # the shard's run has not started yet
            pending = []
        asked = next((r for r in pending if r.get("request_id") == request_id), None)
        if asked is not None:
            return dict(asked)
        await asyncio.sleep(0.05)
    raise AssertionError(f"{handle.id} never asked {request_id}")


async def test_a_shard_whose_run_cannot_start_fails_alone_and_its_view_says_why(
    client: Client, queue: str, workflow_id: str
) -> None:
    taken = shard_workflow_id(workflow_id, 2)  # a run of that id runs (no worker serves it)
    squatter = await client.start_workflow(
        WorkflowName.TEAM_RUN, {}, id=taken, task_queue=f"nobody{FOREIGN_QUEUE_SUFFIX}"
    )
    try:
        run_input = {"team": _team(), "tasks": _tasks(5)}
        result = await team_run_result(
            await start_team(client, workflow_id, run_input, task_queue=queue)
        )
    finally:
        await squatter.terminate()

    one, two = result.shards
    assert (one.status, one.completed) == ("completed", 3)
    assert (two.status, two.failed) == ("failed", 2) and "its run did not start" in (
        two.error or ""
    )
    # before its result: the start its history refused
    running = await _view(client, workflow_id, running=True)
    assert _shards_of(running) == [
        (one.run_id, None, 3, "completed", 3, 0, 0),
        (taken, None, 2, "failed", 0, 2, 0),
    ]
    assert running.shards[1].error == "its run did not start: workflow already exists"


async def test_a_rejection_in_a_shard_stops_the_run(
    client: Client, queue: str, workflow_id: str
) -> None:
    run_input = {
        "team": _team(),
        "tasks": [task("a1", "w"), task("gated", "w", "a1"), *_tasks(3)],
        "options": {"approvals": {"dispatch": ["gated"]}},
    }
    handle = await start_team(client, workflow_id, run_input, task_queue=queue)
    first = client.get_workflow_handle(shard_workflow_id(workflow_id, 1))
    asked = await _wait_for_request(first, "dispatch-gated")
    await first.signal(
        SignalName.DECIDE, decision(asked["request_id"], asked["request_hash"], "reject")
    )
    result = await team_run_result(handle)

    assert result.status == "rejected" and result.error_code == "APPROVAL_REJECTED"
    assert result.error is not None and result.error.startswith(f"{first.id}: ")
    one, two = result.shards
    assert one.status == "rejected" and two.status is None and two.skipped == 2
    assert await _replay_all(client, workflow_id, 1) == 1 + 1 + 2  # the run, a shard, a1, t0


async def test_a_frozen_plan_past_the_limit_runs_in_shards(
    client: Client, queue: str, workflow_id: str
) -> None:
    run_input = {"team": _team(), "plan": {"version": 1, "goal": "g", "tasks": _tasks(5)}}
    handle = await start_team(client, workflow_id, run_input, task_queue=queue)
    result = await team_run_result(handle)
    assert result.status == "completed"
    assert [(s.first_task, s.completed) for s in result.shards] == [("t0", 3), ("t3", 2)]
    assert await _replay_all(client, workflow_id, 2) == 1 + 2 + 5


async def test_a_sharded_runs_tasks_without_search_attributes_keep_that_in_every_shard(
    client: Client, queue: str, workflow_id: str
) -> None:
    run_input = {
        "team": _team(),
        "tasks": _tasks(5),
        "options": {"task_search_attributes": False},
    }
    handle = await start_team(client, workflow_id, run_input, task_queue=queue)
    assert (await team_run_result(handle)).status == "completed"
    for n, tid in ((1, "t0"), (2, "t4")):
        shard = client.get_workflow_handle(shard_workflow_id(workflow_id, n))
        assert (await shard.describe()).search_attributes["OmaTeam"] == ["sharded"]
        child = client.get_workflow_handle(task_workflow_id(shard_workflow_id(workflow_id, n), tid))
        described = await child.describe()
        assert [k for k in described.search_attributes if k.startswith("Oma")] == []
        assert await described.memo() == {"OmaSearchAttributes": "off"}
    assert await _replay_all(client, workflow_id, 2) == 1 + 2 + 5


def _tasks(n: int, chained: bool = False) -> list[dict[str, Any]]:
    return [task(f"t{i}", "w", *([f"t{i - 1}"] if chained and i else [])) for i in range(n)]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"options": {"approvals": {"round": True}}}, "options.approvals.round needs every task"),
        ({"options": {"models": {"from": "earlier"}}}, "options.models needs every task"),
        (
            {"tasks": [*_tasks(5), {**task("w1", "w"), "memory_scope": "all"}]},
            "task 'w1' memory_scope 'all' needs every task in one run",
        ),
        ({"tasks": _tasks(5, chained=True)}, "task 't0' and the 4 tasks it is connected to"),
        ({"tasks": _tasks(13)}, "a run may have at most 12"),
    ],
)
def test_what_a_sharded_run_cannot_do_is_refused_before_it_starts(
    change: dict[str, Any], said: str
) -> None:
    run_input = {"team": _team(), "tasks": _tasks(5), **change}
    run_input = {k: v for k, v in run_input.items() if v is not None}
    with pytest.raises(InvalidRunInputError) as refused:
        checked_team_run_input(run_input)
    assert said in refused.value.message


def test_a_goal_run_plans_at_most_max_run_tasks() -> None:
    goal_run = parse_team_run_input({"team": _team(), "goal": "g"})
    with pytest.raises(InvalidRunInputError) as refused:
        goal_run.check_tasks([TaskSpec.model_validate(t) for t in _tasks(5)])
    assert "the plan has 5 tasks; a goal run may have at most 4" in refused.value.message


def test_a_sharded_run_checks_its_graph_as_any_run() -> None:
    run_input = {"team": _team(), "tasks": [*_tasks(5), task("x", "w", "nowhere")]}
    with pytest.raises(DagValidationError):
        checked_team_run_input(run_input)


@pytest.mark.parametrize(
    ("run_input", "code"),
    [
        (
            {"team": _team(), "tasks": _tasks(6), "options": {"approvals": {"round": True}}},
            "INVALID_RUN_INPUT",
        ),
        ({"team": _team(), "tasks": [*_tasks(5), task("x", "w", "nowhere")]}, "INVALID_TASK_GRAPH"),
        ({"team": _team(), "tasks": [*_tasks(5), {"id": "x"}]}, "INVALID_RUN_INPUT"),
    ],
    ids=["round", "graph", "shape"],
)
async def test_the_workflow_refuses_a_sharded_run_the_stock_cli_started(
    client: Client, queue: str, workflow_id: str, run_input: dict[str, Any], code: str
) -> None:
    with pytest.raises(Exception) as checked:  # the client's check, which the run makes too
        checked_team_run_input(run_input)
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN, run_input, id=workflow_id, task_queue=queue
    )
    with pytest.raises(Exception) as failed:
        await handle.result()
    cause = failed.value.__cause__
    assert getattr(cause, "type", None) == code, cause
    assert getattr(checked.value, "code", None) == code
    assert getattr(cause, "message", None) == getattr(checked.value, "message", None)
    history = await handle.fetch_history()
    # checked there, not in a workflow task (then, started without the search
    # attributes, the run asks whether the namespace has them)
    assert _activities(history) == ["plan_shards", "registered_search_attributes"]
    assert await _replay_all(client, workflow_id, 0) == 1


def _activities(history: WorkflowHistory) -> list[str]:
    """The types of the activities ``history`` scheduled, in order."""
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


def _started_input(history: WorkflowHistory) -> dict[str, Any]:
    payload = history.events[0].workflow_execution_started_event_attributes.input.payloads[0]
    data: dict[str, Any] = json.loads(payload.data)
    return data


async def test_a_sharded_run_splits_its_tasks_in_an_activity_and_passes_them_on_as_given(
    client: Client, queue: str, workflow_id: str
) -> None:
    template = {**task("m-{k}", "w"), "title": "M {k}", "description": "do {k}"}
    run_input = {
        "team": _team(),
        "tasks": [task("g1", "w"), task("g2", "w", "m-b")],  # a given task after a made one
        "task_template": template,
        "items": [{"k": "a"}, {"k": "b"}, {"k": "c"}],
        "options": {"approvals": {"dispatch": ["m-a"]}},
    }
    checked_team_run_input(run_input)
    handle = await start_team(client, workflow_id, run_input, task_queue=queue)
    second = client.get_workflow_handle(shard_workflow_id(workflow_id, 2))
    asked = await _wait_for_request(second, "dispatch-m-a")
    await second.signal(
        SignalName.DECIDE, decision(asked["request_id"], asked["request_hash"], "approve")
    )
    result = await team_run_result(handle)

    assert result.success, result.error
    assert [(s.first_task, s.tasks, s.status) for s in result.shards] == [
        ("g1", 3, "completed"),  # the parts {g1} and {g2, m-b}
        ("m-a", 2, "completed"),  # {m-a} and {m-c}
    ]
    history = await handle.fetch_history()
    assert _activities(history) == ["plan_shards"]
    scheduled = next(
        e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
    )
    said = words.recorded(scheduled, workflow_id)  # oma debug's words for it
    assert said.startswith("checking the run's tasks and splitting them into shards"), said
    # each shard gets its tasks as given: the made ones as the template and their items
    one = _started_input((await histories_of(client, shard_workflow_id(workflow_id, 1)))[0])
    two = _started_input((await histories_of(client, second.id))[0])
    assert [t["id"] for t in one["tasks"]] == ["g1", "g2"] and one["items"] == [{"k": "b"}]
    assert one["task_template"] == template and one["options"]["approvals"]["dispatch"] == []
    assert "tasks" not in two and two["items"] == [{"k": "a"}, {"k": "c"}]
    assert two["options"]["approvals"]["dispatch"] == ["m-a"]  # the name shard 2 knows
    last = await _shard_result(client, workflow_id, 1)
    assert [t.id for t in last.tasks] == ["g1", "g2", "m-b"]  # the run's order
    assert await _replay_all(client, workflow_id, 2) == 1 + 2 + 5


@pytest.mark.parametrize("strict", [False, True], ids=["worker_sandbox", "strict_sandbox"])
async def test_a_sharded_run_recorded_before_its_shards_were_planned_apart_replays(
    strict: bool,
) -> None:
    # recorded by the code before _patches.SHARDS_PLANNED_APART, under this
    # module's limits: the run checked and split its input in its first
    # workflow task (_interleaved's run of test_a_run_past_the_limit_...)
    history = read_history_file(HISTORIES / "sharded" / "team_run_sharded_read_in_workflow.json")
    assert _activities(history) == []
    await plugin.replayer(strict_sandbox=strict).replay_workflow(history)


def test_shards_keep_parts_whole_and_the_run_order() -> None:
    specs = [TaskSpec.model_validate(t) for t in _interleaved()]
    assert shard_plan(specs) == [[0, 3], [1, 4], [2, 5, 6]]


def test_a_running_sharded_runs_views_say_what_is_not_known_yet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    view = RunView(
        workflow_id="big",
        execution_status="RUNNING",
        status="running",
        team="t",
        started_at=start,
        shards=[
            ShardView(run_id="big/shard/1", status="running", tasks=1000, started_at=start),
            ShardView(run_id="big/shard/2"),
        ],
    )

    show.print_view(view)
    out = capsys.readouterr().out
    rows = _table_rows(out, "│ big/")
    assert rows == [
        ["big/shard/1", "?", "1000", "running", "?", "?", "?", ""],
        ["big/shard/2", "?", "?", "not started", "?", "?", "?", ""],
    ]
    assert "shards: ? tasks in 2 shards" in out
    assert "each shard's tasks: oma show big/shard/<n>" in out

    page = render_html(view)
    assert "<b>tasks</b> ? in 2 shards" in page
    assert (
        '<tr data-shard="big/shard/2"><td><code>big/shard/2</code></td><td><code>?</code>' in page
    )
    assert ">not started</span>" in page


def test_oma_run_prints_a_sharded_runs_shards_as_oma_show_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shards = [
        ShardResult(
            run_id="big/shard/1", status="completed", tasks=2, first_task="a1", completed=2
        ),
        ShardResult(run_id="big/shard/2", tasks=3, first_task="b1", skipped=3, error="skipped: x"),
    ]
    print_result(TeamRunResult(success=False, status="cancelled", tasks=[], shards=shards))
    out = capsys.readouterr().out
    rows = _table_rows(out, "│ big/")
    assert rows == [
        ["big/shard/1", "a1", "2", "completed", "2", "0", "0", ""],
        ["big/shard/2", "b1", "3", "not started", "0", "0", "3", "skipped: x"],
    ]
    assert "TeamRun: cancelled, in 2 shards" in out
    assert "each shard's tasks: oma show <shard run>" in out


def _table_rows(out: str, marked: str) -> list[list[str]]:
    """The cells of each boxed table row of ``out`` that holds ``marked``."""
    rows = [line for line in out.splitlines() if marked in line]
    return [[c.strip() for c in line.split("│")[1:-1]] for line in rows]
