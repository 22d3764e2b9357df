"""A failed ``TeamRun`` reads as a failure, not a crash: its failure carries the
run's message and its result (the details), no Python stack, where a person
meets it: `temporal workflow result` and the Web UI of `oma dev`, in a real
headless Chromium."""

from __future__ import annotations

import asyncio
import html
import json
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from oma.runtime.dev_server import free_ports, temporal_binary
from tests.support.cli import OMA
from tests.support.procs import Processes
from tests.support.runs import process, task
from tests.support.web_ui import chromium_command, dev_env, wait_listening

pytestmark = pytest.mark.e2e

QUEUE = "oma-failed-ui"
MESSAGE = "t: 2 tasks, failed: code (PROCESS_FAILED: agent 'coder': command 'python3' exited"
STACK_MARKS = ("_workflow_instance.py", "team_run.py", "Traceback", "stackTrace", "StackTrace")


def failing_run(tmp_path: Path) -> Path:
    """A run input: a coder that exits 3, a reviewer that depends on it."""
    code = "import sys; sys.stdin.read(); print('slugify: bad input', file=sys.stderr); sys.exit(3)"
    run_input = {
        "team": {"name": "t", "agents": [process("coder", code), process("reviewer", "print(1)")]},
        "tasks": [task("code", "coder"), task("review", "reviewer", "code")],
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_input))
    return path


def page_text(dom: str) -> str:
    """The text a person reads on a dumped page (scripts and styles left out)."""
    text = re.sub(r"<(script|style)\b.*?</\1>", "", dom, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "\n", text))


async def test_a_failed_run_shows_its_message_and_result_and_no_stack_in_the_cli_and_web_ui(
    processes: Processes, tmp_path: Path
) -> None:
    port, ui_port = free_ports(2)
    env = dev_env(QUEUE)
    dev = processes.start(
        [OMA, "dev", "--port", str(port), "--ui-port", str(ui_port), "--db", str(tmp_path / "db")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for address in (f"127.0.0.1:{port}", f"127.0.0.1:{ui_port}"):
        await wait_listening(address, dev, 60)
    workflow_id = f"failed-ui-{uuid.uuid4().hex[:8]}"
    cli_env = {**env, "TEMPORAL_ADDRESS": f"127.0.0.1:{port}"}
    ran = await asyncio.to_thread(
        subprocess.run,
        [OMA, "run", "--workflow-id", workflow_id, str(failing_run(tmp_path))],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr

    temporal = [temporal_binary(), "workflow", "result", "-w", workflow_id]
    temporal += ["--address", f"127.0.0.1:{port}"]
    shown = await asyncio.to_thread(
        subprocess.run, temporal, capture_output=True, text=True, timeout=60, check=False
    )
    assert f"Message: {MESSAGE}" in shown.stdout, shown.stdout
    for mark in STACK_MARKS:
        assert mark not in shown.stdout, shown.stdout
    as_json = await asyncio.to_thread(
        subprocess.run,
        [*temporal, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    closed = json.loads(as_json.stdout)["closeEvent"]
    failure = closed["workflowExecutionFailedEventAttributes"]["failure"]
    assert failure["message"].startswith(MESSAGE)
    assert "stackTrace" not in failure
    info = failure["applicationFailureInfo"]
    assert info["type"] == "TASK_FAILED" and info["nonRetryable"]
    [result] = info["details"]  # the run's TeamRunResult rides in the failure's details
    assert [(t["id"], t["status"]) for t in result["tasks"]] == [
        ("code", "failed"),
        ("review", "skipped"),
    ]

    # the Web UI's page of the run: the result pane leads with the message
    page = f"http://127.0.0.1:{ui_port}/namespaces/default/workflows/{workflow_id}"
    text = ""
    for _ in range(3):  # a JS app: give its fetches virtual time, once more if they lagged
        browser = chromium_command(tmp_path / "profile")
        dumped = await asyncio.to_thread(
            subprocess.run,
            [*browser, "--virtual-time-budget=20000", "--dump-dom", page],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        text = page_text(dumped.stdout)
        if "workflowExecutionFailedEventAttributes" in text:
            break
    result = text.partition("workflowExecutionFailedEventAttributes")[2]
    assert MESSAGE in result, text[-3000:]
    for mark in STACK_MARKS:
        assert mark not in result, result[:3000]
    assert "applicationFailureInfo" in result and "TASK_FAILED" in result, result[:3000]
