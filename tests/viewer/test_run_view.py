"""`oma show`: a run's task DAG, statuses, timings and errors read from its
Temporal histories (the TeamRun's and its children's), on the terminal and as
one self-contained HTML page checked in a real headless Chromium."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import struct
import subprocess
import sys
import uuid
import zlib
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.exceptions import ApplicationError

from oma.core.contracts.names import ActivityName
from oma.records.histories import fetch_histories, server_histories
from oma.runtime.dev_server import DevServer, temporal_binary
from oma.viewer import paging
from oma.viewer.model import RunView, add_activities, build_run_view
from oma.worker import OmaWorker, plugin
from tests.support.cli import cells, oma_show
from tests.support.paths import ACP_AGENT
from tests.support.runs import process, run_team, scripted, start_team, task
from tests.support.web_ui import chromium_command

pytestmark = pytest.mark.e2e

OMA = str(Path(sys.executable).parent / "oma")
STDERR_LINE = "ValueError: slugify: unexpected input"

CRASH = (
    "import sys, traceback\n"
    "sys.stdin.read()\n"
    "print('writing slugify.py', flush=True)\n"
    "try:\n"
    "    raise ValueError('slugify: unexpected input')\n"
    "except ValueError:\n"
    "    traceback.print_exc()\n"
    "    sys.exit(3)\n"
)


def failing_team(cwd: Path) -> dict[str, Any]:
    """A scripted planner that globs then plans, a coder process that exits 3
    with a traceback on stderr, and a reviewer that depends on it."""
    planner = scripted(
        "planner",
        [{"type": "tool_use", "id": "glob-1", "name": "glob", "input": {"pattern": "*.txt"}}],
        "1. Lowercase. 2. Hyphenate.",
    )
    planner.update(tools=["glob"], cwd=str(cwd))
    return {
        "team": {
            "name": "viewer-team",
            "agents": [planner, process("coder", CRASH), scripted("reviewer", "LGTM")],
        },
        "tasks": [
            {**task("plan", "planner"), "title": "Plan the slugify work"},
            {**task("code", "coder", "plan"), "title": "Write slugify"},
            {**task("review", "reviewer", "code"), "title": "Review the change"},
        ],
    }


@pytest.fixture(scope="module")
async def failed_run(
    client: Client, worker: OmaWorker, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """The workflow id of a closed TeamRun whose code task failed (exit 3)."""
    workflow_id = f"viewer-{uuid.uuid4().hex[:8]}"
    (tmp_path_factory.mktemp("viewer") / "notes.txt").write_text("x")
    result = await run_team(client, workflow_id, failing_team(tmp_path_factory.getbasetemp()))
    assert result.status == "failed"
    return workflow_id


async def view_of(client: Client, workflow_id: str) -> RunView:
    return await build_run_view(
        await fetch_histories(client, workflow_id), plugin.DATA_CONVERTER, workflow_id
    )


async def run(*cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A command run to completion off the event loop (the test worker shares it)."""
    return await asyncio.to_thread(
        subprocess.run, list(cmd), env=env, capture_output=True, text=True, timeout=120
    )


# -- the model ----------------------------------------------------------------


async def test_the_view_reads_tasks_timings_and_activities_from_the_histories(
    client: Client, failed_run: str
) -> None:
    view = await view_of(client, failed_run)
    assert (view.status, view.execution_status, view.team) == ("failed", "FAILED", "viewer-team")
    assert [(t.id, t.status, t.layer) for t in view.tasks] == [
        ("plan", "completed", 0),
        ("code", "failed", 1),
        ("review", "skipped", 2),
    ]
    plan, code, review = view.tasks
    assert [a.kind for a in plan.runs[0].activities] == [
        ActivityName.LLM_TURN,
        ActivityName.TOOL_CALL,
        ActivityName.LLM_TURN,
    ]
    assert all(
        a.token_usage is not None
        for a in plan.runs[0].activities
        if a.kind == ActivityName.LLM_TURN
    )
    assert plan.closed_at is not None and code.started_at is not None
    assert plan.closed_at <= code.started_at, "code depends on plan: it started after"
    assert code.duration_s is not None and code.duration_s > 0
    [process_run] = code.runs[0].activities
    assert (process_run.kind, process_run.status, process_run.error_code) == (
        ActivityName.PROCESS_RUN,
        "failed",
        "PROCESS_FAILED",
    )
    assert process_run.error is not None and STDERR_LINE in process_run.error
    assert code.error is not None and "exited with status 3" in code.error
    assert STDERR_LINE in code.error
    assert (review.runs, review.attempts) == ([], 0)


async def test_a_failed_run_recorded_before_the_failed_state_reads_the_same(
    client: Client, failed_run: str
) -> None:
    """A TeamRun that did not succeed ends Failed, its result the first
    element of the failure's details; one recorded before that (the
    ``oma-failed-state`` patch) completed with it as its result."""
    histories = await fetch_histories(client, failed_run)
    parent = histories[0]
    failed = parent.events[-1]
    assert failed.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
    error = await plugin.DATA_CONVERTER.decode_failure(
        failed.workflow_execution_failed_event_attributes.failure
    )
    assert isinstance(error, ApplicationError)
    completed = HistoryEvent(
        event_id=failed.event_id,
        event_time=failed.event_time,
        event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    )
    completed.workflow_execution_completed_event_attributes.result.payloads.extend(
        await plugin.DATA_CONVERTER.encode([error.details[0]])
    )
    as_before = [WorkflowHistory(parent.workflow_id, [*parent.events[:-1], completed])]
    before = await build_run_view([*as_before, *histories[1:]], plugin.DATA_CONVERTER)
    now = await view_of(client, failed_run)
    assert (now.execution_status, before.execution_status) == ("FAILED", "COMPLETED")
    assert before.model_dump(exclude={"execution_status"}) == now.model_dump(
        exclude={"execution_status"}
    )


async def test_a_view_reads_the_histories_of_only_the_tasks_it_shows_whole(
    client: Client, failed_run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as a many-task run is read: the tasks from the team run's own history,
    # then the activities of the tasks its page shows whole
    monkeypatch.setattr(paging, "WHOLE_TASKS", 1)
    monkeypatch.setattr(paging, "MOST_TASKS", 1)
    read: list[str] = []
    fetch = server_histories(client)

    async def counted(workflow_id: str, run_id: str) -> WorkflowHistory | None:
        read.append(workflow_id)
        return await fetch(workflow_id, run_id)

    chain = await fetch_histories(client, failed_run, children=False)
    view = await build_run_view(chain, plugin.DATA_CONVERTER, failed_run, counted, activities=False)

    assert read == []
    whole = await view_of(client, failed_run)
    assert view.model_dump(exclude={"tasks"}) == whole.model_dump(exclude={"tasks"})
    assert [(t.id, t.status, t.output, t.error) for t in view.tasks] == [
        (t.id, t.status, t.output, t.error) for t in whole.tasks
    ]
    assert [r.activities for t in view.tasks for r in t.runs] == [[], []]
    page = paging.page_of(view)
    assert ([t.id for t in page.tasks], dict(page.left)) == (
        ["code"],
        {"completed": 1, "skipped": 1},
    )
    await add_activities(view, page.tasks[0].runs, plugin.DATA_CONVERTER, counted)
    assert read == [f"{failed_run}/code"]
    assert view.task("code").runs == whole.task("code").runs


# -- the terminal -------------------------------------------------------------


async def test_oma_show_prints_every_task_with_status_and_the_failures_full_error(
    dev_server: DevServer, failed_run: str
) -> None:
    shown = await oma_show(dev_server, failed_run)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    print(out)
    assert f"TeamRun {failed_run}" in out and "viewer-team" in out
    table = out[: out.index("Outputs")]
    rows = {line.split()[0]: line for line in table.splitlines() if line.strip()}
    for task_id, title, assignee, status in [
        ("plan", "Plan the slugify work", "planner", "completed"),
        ("code", "Write slugify", "coder", "failed"),
        ("review", "Review the change", "reviewer", "skipped"),
    ]:
        row = rows[task_id]
        assert title in row and assignee in row and status in row, row
    assert " s " in rows["code"], "the code task's start and duration"
    failures = out[out.index("Failures") :]
    assert "code (Write slugify) [PROCESS_FAILED]:" in failures
    assert "exited with status 3" in failures
    assert "Traceback (most recent call last):" in failures and STDERR_LINE in failures
    assert "review (Review the change): skipped: dependency 'code'" in failures


async def test_oma_show_names_an_unknown_workflow_and_a_child_workflow(
    dev_server: DevServer, failed_run: str
) -> None:
    unknown = await oma_show(dev_server, "no-such-run")
    assert unknown.returncode == 1
    assert "no workflow 'no-such-run' in namespace 'default'" in unknown.stderr
    child = await oma_show(dev_server, f"{failed_run}/code")
    assert child.returncode == 1
    assert (
        f"is not a TeamRun (its type is AgentRun): show its team run, `oma show {failed_run}`"
        in (child.stderr)
    )


# -- exported histories -------------------------------------------------------


async def export(dev_server: DevServer, workflow_id: str, into: Path) -> Path:
    """`temporal workflow show --output json` of ``workflow_id`` into a file."""
    shown = await run(
        temporal_binary(),
        "workflow",
        "show",
        "--workflow-id",
        workflow_id,
        "--output",
        "json",
        "--address",
        dev_server.address,
    )
    assert shown.returncode == 0, shown.stderr
    path = into / (workflow_id.replace("/", "_") + ".json")
    path.write_text(shown.stdout)
    return path


async def test_exported_histories_show_the_same_run_as_the_server(
    dev_server: DevServer, failed_run: str, tmp_path: Path
) -> None:
    for wid in (failed_run, f"{failed_run}/plan", f"{failed_run}/code"):
        await export(dev_server, wid, tmp_path)
    from_server = await oma_show(dev_server, failed_run, "--json")
    from_files = await oma_show(dev_server, "--history", str(tmp_path), "--json")
    assert from_files.returncode == 0, from_files.stderr
    assert json.loads(from_files.stdout) == json.loads(from_server.stdout)
    tasks = json.loads(from_files.stdout)["tasks"]
    assert [(t["id"], t["status"]) for t in tasks] == [
        ("plan", "completed"),
        ("code", "failed"),
        ("review", "skipped"),
    ]


async def test_the_parent_history_alone_shows_every_task_and_says_what_is_missing(
    dev_server: DevServer, failed_run: str, tmp_path: Path
) -> None:
    parent = await export(dev_server, failed_run, tmp_path)
    shown = await oma_show(dev_server, "--history", str(parent))
    assert shown.returncode == 0, shown.stderr
    assert "Write slugify" in shown.stdout and STDERR_LINE in shown.stdout
    assert f"no history of {failed_run}/code" in shown.stderr


# -- the page, in a real headless Chromium -------------------------------------


def png_colors(png: bytes) -> set[bytes]:
    """The distinct pixel colors of an 8-bit RGB or RGBA PNG (stdlib only)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color_type = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color_type in (2, 6), (depth, color_type)
    bpp = 3 if color_type == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    previous = bytearray(stride)
    colors: set[bytes] = set()
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = previous[i], previous[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        colors.update(bytes(line[i : i + 3]) for i in range(0, stride, bpp))
        previous = line
    return colors


async def test_the_html_page_renders_every_task_in_headless_chromium(
    dev_server: DevServer, failed_run: str, tmp_path: Path
) -> None:
    page = tmp_path / "run.html"
    written = await oma_show(dev_server, failed_run, "--html", str(page))
    assert written.returncode == 0, written.stderr
    assert f"wrote {page}" in written.stdout
    source = page.read_text()
    assert "<script src" not in source and "<link" not in source and "@import" not in source

    browser = chromium_command(tmp_path / "profile")
    dumped = await run(*browser, "--dump-dom", page.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    for task_id, title in [
        ("plan", "Plan the slugify work"),
        ("code", "Write slugify"),
        ("review", "Review the change"),
    ]:
        assert re.search(f'class="node pick[^"]*" data-task="{task_id}"', dom), task_id
        assert title in dom
    assert dom.count('class="edge"') == 2, "plan → code → review"
    for kind in (ActivityName.LLM_TURN, ActivityName.TOOL_CALL, ActivityName.PROCESS_RUN):
        assert f'data-kind="{kind}"' in dom, kind
    # the script ran: it selected the failed task and showed its full error
    assert 'data-selected="' in dom
    details = dom[dom.index('id="detail-text"') :]
    details = details[: details.index("</pre>")]
    assert "task code: Write slugify" in details
    assert "ValueError: slugify: unexpected input" in details

    shot = tmp_path / "run.png"
    taken = await run(*browser, f"--screenshot={shot}", "--window-size=1280,900", page.as_uri())
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    colors = png_colors(shot.read_bytes())
    assert len(colors) > 50, f"a near-blank screenshot: {len(colors)} colors"
    for status, rgb in [("failed", "d64545"), ("completed", "2e9d5b")]:
        assert bytes.fromhex(rgb) in colors, f"nothing drawn in the {status} color"


# -- outputs and tries -----------------------------------------------------------

NOTES = "\n".join(
    [
        "# Notes [bold]stay text[/bold]",
        "\x1b]0;pwned\x07<script>document.title='pwned'</script>",
        *(f"line {n}" for n in range(3, 12)),
        "THE LAST LINE",
    ]
)
"""A 12-line output: rich markup, a terminal title escape and a script that
must stay text, and a last line the collapsed views leave out."""


@pytest.fixture(scope="module")
async def outputs_run(client: Client, worker: OmaWorker) -> str:
    """A closed TeamRun: ``notes`` writes NOTES; ``code``, an ACP agent's turn
    that Temporal ran twice (the first agent exits mid-turn, ACP_AGENT_EXITED,
    and the retry's fresh agent answers), in one attempt of the task."""
    workflow_id = f"viewer-out-{uuid.uuid4().hex[:8]}"
    agent = str(ACP_AGENT)
    first = Path(os.environ.get("TMPDIR", "/tmp")) / f"{workflow_id}-first-spawn"
    exits = {"turns": [{"steps": [{"text": "half"}, {"exit": 3}]}]}
    answers = {"turns": [{"steps": [{"text": "whole"}]}]}
    command = (
        f"if [ -e {first} ]; then exec {sys.executable} {agent}; fi\n"
        f"touch {first}\n"
        f"ACP_TEST_SCRIPT='{json.dumps(exits)}' exec {sys.executable} {agent}\n"
    )
    coder = {
        "name": "coder",
        "backend": {
            "kind": "acp",
            "command": "sh",
            "args": ["-c", command],
            "env": {"ACP_TEST_SCRIPT": json.dumps(answers)},
        },
    }
    result = await run_team(
        client,
        workflow_id,
        {
            "team": {"name": "out", "agents": [scripted("writer", NOTES), coder]},
            "tasks": [task("notes", "writer"), task("code", "coder", "notes")],
        },
    )
    first.unlink(missing_ok=True)
    assert result.status == "completed", [(t.id, t.error) for t in result.tasks]
    assert result.task("code").backend_attempts == 2
    return workflow_id


async def test_oma_show_prints_each_output_collapsed_and_the_tries_temporal_ran(
    dev_server: DevServer, outputs_run: str
) -> None:
    shown = await oma_show(dev_server, outputs_run)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    table = out[: out.index("Outputs")].splitlines()
    rows = {line.split()[0]: line for line in table if line.strip()}
    assert cells(rows["code"])[-2:] == ["1 (2 runs)", "?"]
    assert cells(rows["notes"])[-2:] == ["1", "$0.00"]
    outputs = out[out.index("Outputs") :].splitlines()
    assert outputs == [
        f"Outputs (whole: oma show {outputs_run} --task ID)",
        f"notes (Notes), {len(NOTES)} characters:",
        "  # Notes [bold]stay text[/bold]",
        "  ^[]0;pwned^G<script>document.title='pwned'</script>",
        "  line 3",
        "  line 4",
        "  … 8 more lines",
        "code (Code), 5 characters:",
        "  whole",
    ]
    assert "\x1b" not in out and "\x07" not in out


async def test_oma_show_task_prints_that_tasks_whole_output(
    dev_server: DevServer, outputs_run: str
) -> None:
    shown = await oma_show(dev_server, outputs_run, "--task", "notes")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "task notes  completed"
    assert "tries: 1" in lines
    at = lines.index(f"output ({len(NOTES)} characters):")
    assert lines[at + 1 :] == NOTES.replace("\x1b", "^[").replace("\x07", "^G").splitlines()

    unknown = await oma_show(dev_server, outputs_run, "--task", "nope")
    assert unknown.returncode == 1
    said = "has no task 'nope' (did you mean 'notes'?); its tasks: notes, code"
    assert f"run '{outputs_run}' {said}" in unknown.stderr


async def test_the_html_page_shows_each_output_in_a_closed_details_in_headless_chromium(
    dev_server: DevServer, outputs_run: str, tmp_path: Path
) -> None:
    page = tmp_path / "run.html"
    written = await oma_show(dev_server, outputs_run, "--html", str(page))
    assert written.returncode == 0, written.stderr

    browser = chromium_command(tmp_path / "profile")
    dumped = await run(*browser, "--dump-dom", page.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    assert "<title>TeamRun" in dom, "the output's script must not run"
    [notes] = re.findall(r'<details class="output" data-task="notes">.*?</details>', dom, re.S)
    summary, body = re.fullmatch(
        r'<details class="output" data-task="notes"><summary>(.*?)</summary><pre>(.*?)</pre>'
        r"</details>",
        notes,
        re.S,
    ).groups()  # no `open`: collapsed until clicked
    assert summary == (
        f"<code>notes</code> · Notes · {len(NOTES)} characters "
        '<span class="first"># Notes [bold]stay text[/bold]</span>'
    )
    assert body == html.escape(NOTES, quote=False)
    rows = re.findall(r'<tr data-task="(\w+)">(.*?)</tr>', dom, re.S)
    tries = {t: re.findall(r"<td>(.*?)</td>", r)[7] for t, r in rows}
    assert tries == {"notes": "1", "code": "1 (2 runs)"}


async def test_a_cancelled_runs_tasks_that_never_ran_read_skipped_not_pending(
    client: Client, worker: OmaWorker, workflow_id: str
) -> None:
    # a run cancelled with Temporal ends without a result: the view builds its
    # tasks from the histories, and a task that never started did not "wait"
    hang = "import sys, time\nsys.stdin.read()\nprint('working', flush=True)\ntime.sleep(600)\n"
    handle = await start_team(
        client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [process("slow", hang), scripted("w", "ok")]},
            "tasks": [task("first", "slow"), task("then", "w", "first")],
        },
    )
    for _ in range(200):  # until the first task's process runs
        view = await view_of(client, workflow_id)
        if view.tasks and view.tasks[0].status == "in_progress":
            break
        await asyncio.sleep(0.05)
    await handle.cancel()
    for _ in range(200):
        view = await view_of(client, workflow_id)
        if view.execution_status != "RUNNING":
            break
        await asyncio.sleep(0.05)
    assert view.execution_status == "CANCELED"
    assert [(t.id, t.status) for t in view.tasks] == [("first", "failed"), ("then", "skipped")]


async def test_oma_show_reads_one_more_line_a_cost_in_dollars_and_a_run_still_going(
    client: Client, worker: OmaWorker, dev_server: DevServer
) -> None:
    workflow_id = f"words-{uuid.uuid4().hex[:8]}"
    five = "\n".join(f"line {i}" for i in range(1, 6))
    run_input = {"team": {"name": "t", "agents": [scripted("w", five)]}, "tasks": [task("n", "w")]}
    assert (await run_team(client, workflow_id, run_input)).success
    shown = await oma_show(dev_server, workflow_id)
    assert shown.returncode == 0, shown.stderr
    assert "  … 1 more line" in shown.stdout.splitlines()
    assert re.search(r"UTC, took \d", shown.stdout), shown.stdout
    one = await oma_show(dev_server, workflow_id, "--task", "n")
    assert "cost: $0.00" in one.stdout.splitlines(), one.stdout

    waiting = f"{workflow_id}-waits"
    gated = {**run_input, "options": {"approvals": {"dispatch": ["n"]}}}
    handle = await start_team(client, waiting, gated)
    try:
        shown = await oma_show(dev_server, waiting)
        assert shown.returncode == 0, shown.stderr
        assert re.search(r"UTC, running for \d+\.\d+ s, ", shown.stdout), shown.stdout
        assert "took still running" not in shown.stdout
    finally:
        await handle.terminate("test over")
