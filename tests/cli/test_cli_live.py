"""What `oma run` shows while a run runs and once it has ended: the live view
on a terminal (run under a pseudo-terminal here), plain lines otherwise, and
the summary's Failures section.

Every `oma run` is a subprocess with `--no-worker` against the session's dev
server; the session's worker, in this process, runs the workflows.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from oma.runtime.dev_server import DevServer, free_port
from tests.support.anthropic_server import AnthropicServer, TextReply
from tests.support.cli import OMA, cli_env, events_in, input_file, normalized, oma_run, table_rows
from tests.support.procs import Processes
from tests.support.runs import process, scripted, task
from tests.support.terminal import Terminal, building

pytestmark = pytest.mark.usefixtures("worker")


async def test_the_live_view_shows_a_running_process_latest_line_before_it_completes(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    go, run_file = building(tmp_path)
    term = Terminal(dev_server, "run", "--no-worker", "--workflow-id", workflow_id, run_file)
    try:
        # the process cannot end before `go`, which is made only once its
        # line is on screen: the live row, with title, agent and elapsed time
        row = await term.wait_for(
            r"build +Build the thing +builder +\d+\.\ds +compiling module 1 of 3"
        )
        assert "0/1 tasks settled" in term.screen
        assert "task_complete" not in term.screen
        go.touch()
        assert await term.exit_code() == 0, term.screen
    finally:
        term.kill()
    assert row.group(0)
    after = term.screen[row.end() :]
    assert re.search(r"task_complete +build +Build the thing · \d+\.\ds \[1/1\]", after), after
    assert "all done" in after  # the summary's output of the final task


async def test_the_live_view_streams_model_text_before_the_turn_ends(
    dev_server: DevServer, workflow_id: str, tmp_path: Path, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.reset()
    hold = threading.Event()
    anthropic_server.reply(
        TextReply("Thinking about slugs. The answer is forty-two.", pieces=6, hold=hold)
    )
    run_input = {
        "team": {"name": "live", "agents": [{"name": "claude", "provider": "anthropic"}]},
        "tasks": [{**task("ask", "claude"), "title": "Ask the model"}],
    }
    term = Terminal(
        dev_server,
        "run",
        "--no-worker",
        "--workflow-id",
        workflow_id,
        input_file(tmp_path, run_input),
    )
    try:
        # the server holds the message open after its text: the text on
        # screen came through the heartbeats of a turn still streaming
        await term.wait_for(r"ask +Ask the model +claude +\d+\.\ds +.*The answer is forty-two\.")
        assert anthropic_server.requests[0].events[-1][0] == "content_block_delta"
        assert "task_complete" not in term.screen
        hold.set()
        assert await term.exit_code() == 0, term.screen
    finally:
        hold.set()
        term.kill()
    assert re.search(r"task_complete +ask +Ask the model", term.screen), term.screen


async def test_the_live_view_says_an_unreachable_provider_is_being_retried(
    dev_server: DevServer, client: Client, processes: Processes, workflow_id: str, tmp_path: Path
) -> None:
    # a worker of its own whose openai base URL nothing listens on: every
    # attempt of the turn is refused, and Temporal retries it
    queue = f"unreachable-{uuid.uuid4().hex[:8]}"
    env = {
        **cli_env(dev_server),
        "OMA_TASK_QUEUE": queue,
        "OPENAI_API_KEY": "sk-test-unreachable",
        "OPENAI_BASE_URL": f"http://127.0.0.1:{free_port()}/v1",
    }
    worker = processes.start([OMA, "worker"], env=env, stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None
    banner = await asyncio.wait_for(asyncio.to_thread(worker.stdout.readline), 120)
    assert banner.startswith("OMA worker on task queue"), banner
    agent = {"name": "gpt", "provider": "openai", "model": "gpt-test"}
    run_input = {
        "team": {"name": "live", "agents": [agent]},
        "tasks": [{**task("ask", "gpt"), "title": "Ask the model"}],
    }
    run_file = input_file(tmp_path, run_input)
    term = Terminal(
        dev_server, "run", "--no-worker", "--workflow-id", workflow_id, run_file, env=env
    )
    try:
        await term.wait_for(
            r"ask +Ask the model +gpt +\d+\.\ds +retrying the model provider: attempt [2-9], "
            # the provider's error code (cut to the column: the Temporal server
            # keeps an oversized failure as "Failure exceeds size limit.")
            r"PROVIDER_ERR"
        )
        assert "task_failed" not in term.screen
    finally:
        term.kill()
        await client.get_workflow_handle(workflow_id).terminate("test over")


async def test_a_failed_process_is_explained_under_failures_with_its_stderr_tail(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    crash = (
        "import sys, traceback\n"
        "print('compiling', flush=True)\n"
        "try:\n"
        "    raise ValueError('bad slug')\n"
        "except ValueError:\n"
        "    traceback.print_exc()\n"
        "sys.exit(3)\n"
    )
    run_input = {
        "team": {"name": "t", "agents": [process("coder", crash), process("rev", "print('ok')")]},
        "tasks": [
            {**task("code", "coder"), "title": "Write the code"},
            task("review", "rev", "code"),
        ],
    }
    proc = await oma_run(dev_server, workflow_id, tmp_path, run_input)
    assert proc.returncode == 1, proc.stderr
    # stderr: one line each, with titles and the count of settled tasks
    assert normalized(proc.stderr)[1:4] == [
        "task_start code Write the code · coder",
        "task_failed code Write the code · PROCESS_FAILED: agent 'coder': command 'python3' "
        "exited with status 3 [1/2]",
        "task_skipped review Review · skipped: dependency 'code' (Write the code) failed [2/2]",
    ]
    failures = proc.stdout.split("Failures", 1)[1].splitlines()
    assert failures[1:8] == [
        "code (Write the code) · coder · PROCESS_FAILED",
        "agent 'coder': command 'python3' exited with status 3",
        "stderr (redacted):",
        "Traceback (most recent call last):",
        '  File "<string>", line 4, in <module>',
        "ValueError: bad slug",
        "skipped because it failed: review (Review)",
    ]
    # the skipped leaf is not shown as if it were the run's outcome
    assert "review (Review): skipped" not in proc.stdout


async def test_plain_output_of_a_large_run_prints_about_one_line_per_task(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    ids = [f"t{i:02d}" for i in range(25)]
    run_input = {
        "team": {"name": "many", "agents": [scripted("a", *(["done"] * 25))]},
        "tasks": [task(t, "a") for t in ids],
    }
    proc = await oma_run(dev_server, workflow_id, tmp_path, run_input)
    assert proc.returncode == 0, proc.stderr
    events = events_in(proc.stderr)
    assert [e for e in events if e[0] == "task_start"] == []
    assert sorted(t for kind, t in events if kind == "task_complete") == ids
    assert "[25/25]" in proc.stderr
    assert table_rows(proc.stdout) == []
    assert "and 25 completed task(s) not listed (--json has all)" in proc.stdout
    assert len(proc.stderr.splitlines()) < 25 + 10


ECHO_THEN_RESULT = (
    "import sys\n"
    "print('task: ' + sys.stdin.readline().strip())\n"
    "print('wrote: slugify.py, test_slugify.py')\n"
    "print('test: python3 test_slugify.py -> 7 checks passed')\n"
    "print()\n"
)
"""A process that echoes its prompt's first line first and ends with its result."""


async def test_the_task_table_shows_the_last_line_of_an_output_readable_at_80_columns(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    run_input = {
        "team": {"name": "t", "agents": [process("coder", ECHO_THEN_RESULT)]},
        "tasks": [{**task("code", "coder"), "title": "Write slugify"}],
    }
    term = Terminal(
        dev_server,
        "run",
        "--no-worker",
        "--workflow-id",
        workflow_id,
        input_file(tmp_path, run_input),
        columns=80,
    )
    try:
        assert await term.exit_code() == 0, term.screen
    finally:
        term.kill()
    # the summary's row (the live view's rows, above it, have no status)
    [row] = [line for line in term.screen.splitlines() if re.match(r"code .* completed ", line)]
    assert len(row) <= 80, row
    # every short column whole, and the output column shows 28 characters of the result
    shown = re.fullmatch(r"code +Write slugify +coder +completed +\S+ +(.+)", row)
    assert shown is not None, row
    output = shown.group(1).strip()
    assert len(output) >= 28 and output.endswith("…"), row
    assert "test: python3 test_slugify.py -> 7 checks passed".startswith(output[:-1]), row


async def test_the_piped_task_table_shows_the_last_line_of_an_output_whole(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    run_input = {
        "team": {"name": "t", "agents": [process("coder", ECHO_THEN_RESULT)]},
        "tasks": [{**task("code", "coder"), "title": "Write slugify"}],
    }
    proc = await oma_run(dev_server, workflow_id, tmp_path, run_input)
    assert proc.returncode == 0, proc.stderr
    [row] = table_rows(proc.stdout)
    assert row[-1] == "test: python3 test_slugify.py -> 7 checks passed"
