"""Rolling new workflow code out under runs in flight (docs/operations.md):
``oma replay --open`` names the open runs the new code would break, and on
versioned workers the runs waiting for an approval on the old build finish
there while new runs take the new build. The two builds are
``tests.support.builds``: the code as it is, and a ``TeamRun`` that pauses on a timer
before each task (``NEW_BUILD_TIMER``), a change made without a patch."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.common import WorkerDeploymentVersion

from oma.core.schema.errors import WorkerDeploymentInvalidError
from oma.runtime.deployment import BUILD_ID_VAR, DEPLOYMENT_NAME_VAR, deployment_from_env
from oma.runtime.dev_server import DevServer
from oma.worker import plugin
from tests.support.approvals import WAIT_S, Run, eventually, result_within, start_run
from tests.support.builds import NEW_BUILD_TIMER
from tests.support.cli import OMA, run_cmd, temporal
from tests.support.paths import ROOT
from tests.support.procs import Processes
from tests.support.runs import FOREIGN_QUEUE_SUFFIX, TASK_QUEUE, histories_of, scripted, task

ROLLOUT_S = 60.0
"""How long a run of the rollout gets to finish once it is approved."""


def approval_input(chain: int = 0) -> dict[str, Any]:
    """``draft``, then ``publish`` once a reviewer approves its dispatch, then
    a chain of ``chain`` tasks; with a chain, the run continues as new past
    100 events (``history_event_limit``), about 11 tasks in."""
    after = ["publish", *(f"s{i}" for i in range(chain))]
    options: dict[str, Any] = {"approvals": {"dispatch": ["publish"]}}
    if chain:
        options["history_event_limit"] = 100
    return {
        "team": {"name": "rollout", "agents": [scripted("w", "ok")]},
        "tasks": [
            task("draft", "w"),
            task("publish", "w", "draft"),
            *(task(f"s{i}", "w", after[i]) for i in range(chain)),
        ],
        "options": options,
    }


def env_for(dev_server: DevServer, task_queue: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (DEPLOYMENT_NAME_VAR, BUILD_ID_VAR)}
    return {**env, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": task_queue, **extra}


async def oma_as(
    build: str, dev_server: DevServer, *args: str, task_queue: str = TASK_QUEUE
) -> subprocess.CompletedProcess[str]:
    """``oma ARGS`` with ``build``'s workflow code (``tests.support.builds``)."""
    command = [OMA] if build == "old" else [sys.executable, "-m", "tests.support.builds", build]
    return await run_cmd(*command, *args, cwd=ROOT, env=env_for(dev_server, task_queue))


async def waiting_runs(client: Client, workflow_id: str, count: int, **started: Any) -> list[Run]:
    """``count`` runs of ``approval_input``, each waiting for its ``publish`` approval."""
    runs = [
        await start_run(client, f"{workflow_id}-{n}", approval_input(**started))
        for n in range(count)
    ]
    for run in runs:
        await run.request("dispatch-publish")
    return runs


async def approve(run: Run) -> None:
    assert (await run.decide(await run.request("dispatch-publish"))).decision == "approve"


def broken_rows(stdout: str) -> dict[str, str]:
    """The lines of ``oma replay --open``'s table, by the workflow id they start with."""
    rows = [line for line in stdout.splitlines() if re.search(r"\bevent \d+ ", line)]
    return {line.split()[0]: line for line in rows}


def builds(history: WorkflowHistory) -> set[str]:
    """The build ids of the workers that completed the history's workflow tasks."""
    return {
        e.workflow_task_completed_event_attributes.deployment_version.build_id
        for e in history.events
        if e.HasField("workflow_task_completed_event_attributes")
    }


def new_build_pauses(history: WorkflowHistory) -> int:
    """How many timers of the new build (``NEW_BUILD_TIMER``) the history started."""
    return sum(
        1
        for e in history.events
        if e.HasField("timer_started_event_attributes")
        and e.user_metadata.summary.data
        and json.loads(e.user_metadata.summary.data) == NEW_BUILD_TIMER
    )


async def test_oma_replay_open_names_the_open_runs_new_code_would_break(
    client: Client, worker: Any, dev_server: DevServer, workflow_id: str
) -> None:
    runs = await waiting_runs(client, workflow_id, 2)
    only = " OR ".join(f'WorkflowId="{run.id}"' for run in runs)

    same = await oma_as("old", dev_server, "replay", "--open", "--query", only)
    assert same.returncode == 0, same.stderr
    assert f"replayed 2 open TeamRun and AgentRun run(s) matching {only!r}" in same.stdout
    assert same.stdout.rstrip().endswith("against this code: 0 would break"), same.stdout

    changed = await oma_as("new", dev_server, "replay", "--open", "--query", only)
    assert changed.returncode == 1, changed.stderr
    rows = broken_rows(changed.stdout)
    assert sorted(rows) == sorted(run.id for run in runs), changed.stdout
    for run in runs:
        # the new build pauses where the old one started draft's child
        assert re.search(
            r"TeamRun +unversioned +event \d+ StartChildWorkflowExecutionInitiated", rows[run.id]
        ), rows[run.id]
    assert "2 would break" in changed.stdout
    assert "REPLAY_MISMATCH: 2 of 2 open run(s) no longer replay" in changed.stderr

    bounded = await oma_as("old", dev_server, "replay", "--open", "--query", only, "--limit", "1")
    assert bounded.returncode == 0, bounded.stderr
    assert "replayed 1 open" in bounded.stdout
    assert "stopped at --limit 1: more open runs match" in bounded.stdout

    # unversioned workers of the code they started with carry them on
    for run in runs:
        await approve(run)
        assert (await result_within(run, ROLLOUT_S)).status == "completed"


async def test_oma_replay_open_refuses_a_query_the_server_refuses(
    dev_server: DevServer,
) -> None:
    refused = await oma_as("old", dev_server, "replay", "--open", "--query", "WorkflowId ==")
    assert refused.returncode == 2, refused.stderr
    assert "INVALID_INPUT: the server refused the query 'WorkflowId =='" in refused.stderr
    both = await oma_as("old", dev_server, "replay", "run.json", "--open")
    assert both.returncode == 2
    assert "--open replays the open runs, alone: give no run and no other mode" in both.stderr


async def set_current(dev_server: DevServer, deployment: str, build: str) -> None:
    """Make ``build`` the current version of ``deployment``, as an operator
    does, once its worker has polled (the server knows a version from then)."""

    async def made_current() -> bool | None:
        done = await temporal(
            dev_server,
            *("worker", "deployment", "set-current-version", "--yes"),
            *("--deployment-name", deployment, "--build-id", build),
        )
        return True if done.returncode == 0 else None

    await eventually(made_current, f"{deployment}:{build} to become current", WAIT_S)


async def start_worker(
    processes: Processes,
    dev_server: DevServer,
    code: str,
    task_queue: str,
    deployment: str | None,
    build: str | None = None,
) -> subprocess.Popen[str]:
    """A worker of ``code`` (``tests.support.builds``: ``old`` or ``new``) serving it
    as build ``build`` (by default ``code``) of ``deployment`` (``None``: an
    unversioned worker), once it says so."""
    versioning = {}
    if deployment is not None:
        versioning = {DEPLOYMENT_NAME_VAR: deployment, BUILD_ID_VAR: build or code}
    proc = processes.start(
        [sys.executable, "-m", "tests.support.builds", code, "worker"],
        cwd=ROOT,
        env=env_for(dev_server, task_queue, **versioning),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    banner = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), WAIT_S)
    assert banner.startswith("OMA worker on task queue"), banner
    if deployment is not None:
        versioned = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), WAIT_S)
        serving = f"serving build {build or code!r} of worker deployment {deployment!r}"
        assert serving in versioned, versioned
    return proc


async def test_a_new_build_rolls_out_under_runs_waiting_for_approval_on_the_old_one(
    client: Client, dev_server: DevServer, processes: Processes, workflow_id: str, tmp_path: Path
) -> None:
    queue = f"rollout-{uuid.uuid4().hex[:8]}{FOREIGN_QUEUE_SUFFIX}"  # the new build's runs
    deployment = f"rollout-{uuid.uuid4().hex[:8]}"  # do not replay against this code
    await start_worker(processes, dev_server, "old", queue, deployment)
    await set_current(dev_server, deployment, "old")
    plain, chained = (
        await start_run(client, f"{workflow_id}-plain", approval_input(), queue),
        await start_run(client, f"{workflow_id}-chained", approval_input(chain=16), queue),
    )
    for run in (plain, chained):
        await run.request("dispatch-publish")

    await start_worker(processes, dev_server, "new", queue, deployment)
    await set_current(dev_server, deployment, "new")
    # the check an operator makes: the new code would break both, which are
    # pinned to the old build, so they do not move to it
    checked = await oma_as(
        "new", dev_server, "replay", "--open", "--query", f'TaskQueue="{queue}"', task_queue=queue
    )
    assert checked.returncode == 1, checked.stderr
    rows = broken_rows(checked.stdout)
    assert sorted(rows) == sorted([plain.id, chained.id]), checked.stdout
    assert all(f"pinned {deployment}:old" in row for row in rows.values()), rows

    for run in (plain, chained):
        await approve(run)
    fresh = await start_run(client, f"{workflow_id}-fresh", approval_input(), queue)
    await approve(fresh)
    for run in (plain, chained, fresh):
        assert (await result_within(run, ROLLOUT_S)).status == "completed", run.id

    # the run that waited finished on the old build, its tasks' runs too
    for history in await histories_of(client, plain.id):
        assert builds(history) == {"old"}, history.workflow_id
        assert new_build_pauses(history) == 0
    # the long one went on with the new build from its continue-as-new
    first_run = chained.handle.first_execution_run_id
    first = await client.get_workflow_handle(chained.id, run_id=first_run).fetch_history()
    assert builds(first) == {"old"} and new_build_pauses(first) == 0
    last = await client.get_workflow_handle(chained.id).fetch_history()
    assert last.run_id != first_run
    assert builds(last) == {"new"} and new_build_pauses(last) > 0
    # the run started after the rollout ran the new code
    started_after = await histories_of(client, fresh.id)
    assert all(builds(h) == {"new"} for h in started_after)
    assert new_build_pauses(started_after[0]) == 2  # draft, publish

    # each replays against its own build's code, and not the other's
    replayer = plugin.replayer(strict_sandbox=True)
    for history in [*await histories_of(client, plain.id), first]:
        await replayer.replay_workflow(history)
    shown = await temporal(dev_server, "workflow", "show", "-w", fresh.id, "--output", "json")
    assert shown.returncode == 0, shown.stderr
    exported = tmp_path / "fresh.json"
    exported.write_text(shown.stdout)
    on_new = await oma_as("new", dev_server, "replay", str(exported), task_queue=queue)
    assert on_new.returncode == 0, on_new.stderr
    on_old = await oma_as("old", dev_server, "replay", str(exported), task_queue=queue)
    assert on_old.returncode == 1 and "REPLAY_MISMATCH" in on_old.stderr


async def test_turning_versioning_on_moves_the_runs_in_flight_to_the_first_build(
    client: Client, dev_server: DevServer, processes: Processes, workflow_id: str
) -> None:
    queue = f"versioning-on-{uuid.uuid4().hex[:8]}{FOREIGN_QUEUE_SUFFIX}"
    deployment = f"versioning-on-{uuid.uuid4().hex[:8]}"
    unversioned = await start_worker(processes, dev_server, "old", queue, None)
    run = await start_run(client, workflow_id, approval_input(), queue)
    await run.request("dispatch-publish")

    # the check first: the first build replays the unversioned runs
    query = f'TaskQueue="{queue}" AND TemporalWorkerDeploymentVersion IS NULL'
    checked = await oma_as("old", dev_server, "replay", "--open", "--query", query)
    assert checked.returncode == 0, checked.stderr
    assert "replayed 1 open" in checked.stdout
    await start_worker(processes, dev_server, "old", queue, deployment, build="v1")
    await set_current(dev_server, deployment, "v1")
    unversioned.terminate()
    assert await asyncio.to_thread(unversioned.wait, WAIT_S) is not None

    await approve(run)
    assert (await result_within(run, ROLLOUT_S)).status == "completed"
    history = await run.handle.fetch_history()
    assert builds(history) == {"", "v1"}  # up to the approval unversioned, then v1
    replayer = plugin.replayer(strict_sandbox=True)
    for each in await histories_of(client, run.id):
        await replayer.replay_workflow(each)


def test_a_worker_with_both_deployment_settings_serves_that_version() -> None:
    version = deployment_from_env({DEPLOYMENT_NAME_VAR: "oma", BUILD_ID_VAR: " 2026-12-06.1 "})
    assert version == WorkerDeploymentVersion(deployment_name="oma", build_id="2026-12-06.1")
    assert deployment_from_env({}) is None


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            {DEPLOYMENT_NAME_VAR: "oma"},
            "TEMPORAL_DEPLOYMENT_NAME is set but TEMPORAL_WORKER_BUILD_ID",
        ),
        ({BUILD_ID_VAR: "v2"}, "TEMPORAL_WORKER_BUILD_ID is set but TEMPORAL_DEPLOYMENT_NAME"),
        ({DEPLOYMENT_NAME_VAR: "oma.prod", BUILD_ID_VAR: "v2"}, "holds '.' or ':'"),
        ({DEPLOYMENT_NAME_VAR: "oma:prod", BUILD_ID_VAR: "v2"}, "holds '.' or ':'"),
        ({DEPLOYMENT_NAME_VAR: "oma", BUILD_ID_VAR: "__unversioned__"}, "starts with '__'"),
        ({DEPLOYMENT_NAME_VAR: "oma", BUILD_ID_VAR: "x" * 256}, "256 bytes long; at most 255"),
    ],
)
def test_a_deployment_the_server_would_refuse_is_refused_first(
    env: dict[str, str], says: str
) -> None:
    with pytest.raises(WorkerDeploymentInvalidError, match=re.escape(says)):
        deployment_from_env(env)


@pytest.mark.e2e  # runs the `oma` command
def test_oma_worker_with_half_a_deployment_exits_with_one_line() -> None:
    env = {**os.environ, DEPLOYMENT_NAME_VAR: "oma"}
    env.pop(BUILD_ID_VAR, None)
    proc = subprocess.run(
        [OMA, "worker"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        "error: WORKER_DEPLOYMENT_INVALID: TEMPORAL_DEPLOYMENT_NAME is set but "
        "TEMPORAL_WORKER_BUILD_ID is not"
    ), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
