"""Tracing on every way a process leaves: the real ``oma`` command and a
Python API script, with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at an OTLP/HTTP
receiver on 127.0.0.1, deliver a run's whole trace (the run's span and every
task's and model turn's) by the time they have exited, however the run or the
process ended.

Every process here batches with ``OTEL_BSP_SCHEDULE_DELAY`` at ten minutes, so
the batch processor never exports on its own timer while the test looks: what
reaches the receiver was flushed on the way out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from oma.runtime.dev_server import DevServer, free_port
from tests.support.otlp import Collector
from tests.support.paths import ROOT
from tests.support.procs import Processes
from tests.support.runs import process, scripted, task

pytestmark = pytest.mark.e2e

OMA = str(Path(sys.executable).with_name("oma"))

NEVER_ON_ITS_OWN_MS = "600000"
"""``OTEL_BSP_SCHEDULE_DELAY``: the batch processor's timer, far beyond any test."""


def traced_env(collector: Collector, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.pop("ANTHROPIC_API_KEY", None)
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.endpoint
    env["OTEL_BSP_SCHEDULE_DELAY"] = NEVER_ON_ITS_OWN_MS
    return {**env, **extra}


def write_input(tmp_path: Path, team: dict[str, Any], tasks: list[dict[str, Any]]) -> Path:
    import json

    path = tmp_path / "run.json"
    path.write_text(json.dumps({"team": team, "tasks": tasks}))
    return path


TWO_TASKS = (
    {"name": "writers", "agents": [scripted("writer", "a draft"), scripted("editor", "an edit")]},
    [task("write", "writer"), task("edit", "editor", "write")],
)


def received(collector: Collector) -> tuple[Counter[str], dict[str, list[dict[str, Any]]]]:
    """The names of the spans received, counted, and each name's attributes."""
    collector.server.shutdown()
    spans = collector.spans()
    by_name: dict[str, list[dict[str, Any]]] = {}
    for _, name, values in spans:
        by_name.setdefault(name, []).append(values)
    return Counter(name for _, name, _ in spans), by_name


def task_ids(spans: list[dict[str, Any]]) -> list[str]:
    return sorted(s["oma.task_id"].string_value for s in spans)


def assert_whole_two_task_trace(collector: Collector) -> None:
    names, spans = received(collector)
    assert names["StartWorkflow:TeamRun"] == 1, names
    assert names["RunWorkflow:TeamRun"] == 1, names
    (team,) = spans["RunWorkflow:TeamRun"]
    assert team["oma.status"].string_value == "completed"
    assert task_ids(spans["RunWorkflow:AgentRun"]) == ["edit", "write"]
    assert task_ids(spans["RunActivity:llm_turn"]) == ["edit", "write"]


def test_oma_run_on_the_embedded_server_exports_the_whole_trace_before_it_exits(
    tmp_path: Path,
) -> None:
    collector = Collector()
    run_input = write_input(tmp_path, *TWO_TASKS)
    env = traced_env(collector, TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}")
    proc = subprocess.run(
        [OMA, "run", str(run_input)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "starting the embedded Temporal dev server" in proc.stderr
    assert_whole_two_task_trace(collector)


def test_oma_run_of_a_failed_run_exports_its_trace_and_exits_1(
    dev_server: DevServer, tmp_path: Path
) -> None:
    collector = Collector()
    team = {"name": "crashing", "agents": [process("crash", "import sys; sys.exit(3)")]}
    run_input = write_input(tmp_path, team, [task("boom", "crash")])
    env = traced_env(
        collector, TEMPORAL_ADDRESS=dev_server.address, OMA_TASK_QUEUE=f"otlp-{free_port()}"
    )
    proc = subprocess.run(
        [OMA, "run", "--worker", str(run_input)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    names, spans = received(collector)
    assert names["StartWorkflow:TeamRun"] == 1, names
    (team_span,) = spans["RunWorkflow:TeamRun"]
    assert team_span["oma.status"].string_value == "failed"
    assert task_ids(spans["RunWorkflow:AgentRun"]) == ["boom"]
    assert task_ids(spans["RunActivity:process_run"]) == ["boom"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_oma_run_interrupted_mid_run_exports_the_cancelled_runs_trace(
    dev_server: DevServer, tmp_path: Path, processes: Processes, signum: int
) -> None:
    collector = Collector()
    started = tmp_path / "started"
    sleeper = f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(120)"
    team = {"name": "sleepy", "agents": [process("sleeper", sleeper)]}
    run_input = write_input(tmp_path, team, [task("nap", "sleeper")])
    env = traced_env(
        collector, TEMPORAL_ADDRESS=dev_server.address, OMA_TASK_QUEUE=f"otlp-{free_port()}"
    )
    proc = processes.start(
        [OMA, "run", "--worker", str(run_input)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = ""
    while "task_start" not in seen:
        line = proc.stderr.readline()
        assert line, f"oma run ended before its task started: {seen}"
        seen += line
    # `task_start` is the child's start: its process_run activity may not have
    # started yet, and an activity cancelled before it starts has no span
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline and proc.poll() is None, seen
        time.sleep(0.05)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, seen + err
    names, spans = received(collector)
    assert names["StartWorkflow:TeamRun"] == 1, names
    # the run, cancelled, ended before `oma run` did (a cancelled run's span
    # carries no oma.status: it ends by CancelledError, not with a result)
    assert names["RunWorkflow:TeamRun"] == 1, names
    assert task_ids(spans["RunWorkflow:AgentRun"]) == ["nap"]
    assert task_ids(spans["RunActivity:process_run"]) == ["nap"]


def test_oma_run_no_worker_json_and_oma_worker_stopped_by_sigterm_export_one_whole_trace(
    dev_server: DevServer, tmp_path: Path, processes: Processes
) -> None:
    collector = Collector()
    run_input = write_input(tmp_path, *TWO_TASKS)
    env = traced_env(
        collector, TEMPORAL_ADDRESS=dev_server.address, OMA_TASK_QUEUE=f"otlp-{free_port()}"
    )
    worker = processes.start(
        [OMA, "worker"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    banner = worker.stdout.readline()
    assert banner.startswith("OMA worker on task queue"), banner
    run = subprocess.run(
        [OMA, "run", "--no-worker", "--json", str(run_input)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert '"status": "completed"' in run.stdout
    worker.send_signal(signal.SIGTERM)
    worker.communicate(timeout=60)
    assert worker.returncode == 130
    assert_whole_two_task_trace(collector)


API_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from oma import OpenMultiAgent

    async def main():
        team, tasks = json.loads(sys.argv[1])
        async with OpenMultiAgent.embedded(worker=True) as oma:
            result = await oma.run_tasks(team, tasks)
            print(result.status, flush=True)
            raise RuntimeError("the caller's own mistake, after the run")

    asyncio.run(main())
    """
)


def test_a_python_api_script_ending_by_an_exception_exports_the_whole_trace(
    dev_server: DevServer, tmp_path: Path
) -> None:
    import json

    collector = Collector()
    env = traced_env(
        collector,
        TEMPORAL_ADDRESS=dev_server.address,
        OMA_TASK_QUEUE=f"otlp-{free_port()}",
        PYTHONPATH=str(ROOT),
    )
    proc = subprocess.run(
        [sys.executable, "-c", API_SCRIPT, json.dumps(TWO_TASKS)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == "completed\n"
    assert "RuntimeError: the caller's own mistake" in proc.stderr
    assert_whole_two_task_trace(collector)
