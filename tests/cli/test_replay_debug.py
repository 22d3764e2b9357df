"""``oma replay`` as a debugger, against histories the real dev server
recorded (the corpus in ``tests/histories/``, and a run of this session's
server): the state at any event, the trace, pdb and an IDE's replay
debugger, and why a replay broke."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import ParseDict
from temporalio.api.history.v1 import History
from temporalio.client import Client

from oma.cli.debug.history import read_file, resolve
from oma.cli.debug.state import state_at
from oma.cli.debug.trace import trace
from oma.core.contracts.names import QueryName
from oma.core.schema.errors import ReplayTargetError
from oma.runtime.dev_server import DevServer
from tests.support.approvals import start_run
from tests.support.paths import HISTORIES, ROOT, SUPPORT
from tests.support.runs import scripted, task

OMA = str(Path(sys.executable).parent / "oma")


def corpus(stem: str) -> Path:
    return HISTORIES / f"{stem}.json"


def oma(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [OMA, *args], input=stdin, capture_output=True, text=True, timeout=90, env=env, check=False
    )


def python_oma(prelude: str, *args: str, stdin: str = "") -> Any:
    """``oma`` run after ``prelude`` (an import that changes workflow code)."""
    code = f"import {prelude}\nfrom oma.cli.app import main\nmain()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        check=False,
    )


def statuses(answers: dict[str, Any]) -> dict[str, str]:
    return {t["id"]: t["status"] for t in answers[QueryName.STATE]["tasks"]}


# -- 1. the state at any event -------------------------------------------------


async def test_state_at_a_tasks_start_has_it_in_progress_and_its_dependency_in_memory() -> None:
    debugged = read_file(corpus("team_run_hybrid_scripted"), None)
    found = await state_at(debugged, resolve(debugged, "task_start:code"))
    assert found.target.event_id == 14 and found.target.workflow_task == 12
    assert statuses(found.answers) == {
        "plan": "completed",
        "code": "in_progress",
        "review": "blocked",
    }
    assert list(found.answers[QueryName.SHARED_MEMORY]) == ["planner/task:plan:result"]
    assert found.answers[QueryName.PENDING_APPROVALS] == []


async def test_state_at_a_tasks_completion_and_at_an_event_id_agree() -> None:
    debugged = read_file(corpus("team_run_hybrid_scripted"), None)
    named = await state_at(debugged, resolve(debugged, "task_complete:code"))
    by_id = await state_at(debugged, resolve(debugged, "19"))
    assert named.target.event_id == 19
    assert named.answers == by_id.answers
    code = next(t for t in named.answers[QueryName.STATE]["tasks"] if t["id"] == "code")
    assert code["status"] == "completed" and code["attempts"] == 1
    assert statuses(named.answers)["review"] == "in_progress"


async def test_state_at_an_approval_has_the_decision_and_the_next_request_open() -> None:
    debugged = read_file(corpus("team_run_dispatch_gates_decided"), None)
    before = await state_at(debugged, resolve(debugged, "16"))
    assert [r["request_id"] for r in before.answers[QueryName.PENDING_APPROVALS]] == [
        "dispatch-c",
        "dispatch-b",
    ]
    after = await state_at(debugged, resolve(debugged, "approval:dispatch-b"))
    assert after.target.event_id == 21
    decided = [d["request_id"] for d in after.answers[QueryName.STATE]["approval_decisions"]]
    assert decided == ["dispatch-a", "dispatch-b"]
    assert statuses(after.answers)["b"] == "in_progress"


async def test_state_at_the_plan_and_at_the_synthesis_of_a_goal_run() -> None:
    debugged = read_file(corpus("team_run_goal_plan_approval"), None)
    planned = await state_at(debugged, resolve(debugged, "plan"))
    assert [t["id"] for t in planned.answers[QueryName.STATE]["plan"]["tasks"]] == ["t1", "t2"]
    assert [r["request_id"] for r in planned.answers[QueryName.PENDING_APPROVALS]] == ["plan"]
    synthesized = await state_at(debugged, resolve(debugged, "synthesis"))
    assert synthesized.answers[QueryName.STATE]["final_output"]


async def test_state_of_an_agent_run_at_an_event() -> None:
    debugged = read_file(corpus("agent_run_anthropic_retry_hooks"), None)
    found = await state_at(debugged, resolve(debugged, "15"))
    state = found.answers[QueryName.STATE]
    assert state["status"] == "completed" and state["output"] is not None
    assert found.answers[QueryName.PENDING_APPROVALS] == []


@pytest.mark.parametrize(
    ("at", "says"),
    [
        ("task_start:nope", "no AgentRun of task 'nope' started"),
        ("approval:nope", "no decision on approval request 'nope'"),
        ("synthesis", "the coordinator's synthesis step did not complete"),
        ("999", "event 999 is not in the history"),
        ("later", "neither an event id nor one of"),
    ],
)
def test_a_point_the_history_does_not_have_is_refused_with_its_code(at: str, says: str) -> None:
    debugged = read_file(corpus("team_run_hybrid_scripted"), None)
    with pytest.raises(ReplayTargetError, match=says):
        resolve(debugged, at)
    proc = oma("replay", str(corpus("team_run_hybrid_scripted")), "--at", at)
    assert proc.returncode == 1
    assert "REPLAY_TARGET_UNKNOWN" in proc.stderr


def test_oma_replay_at_prints_the_state_as_json() -> None:
    proc = oma(
        "replay", str(corpus("team_run_hybrid_scripted")), "--at", "task_start:code", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["workflow_id"] == "hybrid-dev-demo"
    assert shown["at"] == {
        "named": "task_start:code",
        "event_id": 14,
        "workflow_task": 12,
        "time": shown["at"]["time"],
    }
    assert statuses(shown)["code"] == "in_progress"
    # the command's JSON output, keyed as a user reads it
    assert list(shown["shared_memory"]) == ["planner/task:plan:result"]


@pytest.mark.usefixtures("worker")
async def test_oma_replay_reads_a_run_from_the_server_by_workflow_id(
    client: Client, dev_server: DevServer, workflow_id: str
) -> None:
    team = {"name": "t", "agents": [scripted("w", "first", "second")]}
    tasks = [task("a", "w"), task("b", "w", "a")]
    run = await start_run(client, workflow_id, {"team": team, "tasks": tasks})
    result = await run.result()
    assert result.status == "completed", result
    env = {**_env(), "TEMPORAL_ADDRESS": dev_server.address}
    proc = oma("replay", workflow_id, "--at", "task_complete:a", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert statuses(json.loads(proc.stdout)) == {"a": "completed", "b": "in_progress"}
    checked = oma("replay", workflow_id, env=env)
    assert checked.returncode == 0, checked.stderr
    assert "no mismatch" in checked.stdout


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


# -- 2. the trace --------------------------------------------------------------


async def test_trace_says_what_each_workflow_task_decided_in_the_teams_words() -> None:
    steps = await trace(read_file(corpus("team_run_dispatch_gates_decided"), None))
    by_task = {s.workflow_task: s for s in steps}
    assert by_task[3].decided == [
        "the run started",
        "approval asked: dispatch-a",
        "approval asked: dispatch-c",
    ]
    assert by_task[7].arrived == ["a reviewer's decision (decide) arrived"]
    assert by_task[7].decided == [
        "approval decided: dispatch-a: approve by recorder",
        "task a dispatched: agent w",
        "task a's AgentRun started",
    ]
    assert by_task[19].arrived == ["update decide arrived"]
    assert "task c skipped: rejected: dispatch-c by recorder" in by_task[33].decided


def test_oma_replay_trace_prints_steps() -> None:
    proc = oma("replay", str(corpus("agent_run_anthropic_retry_hooks")), "--trace", "--json")
    assert proc.returncode == 0, proc.stderr
    decided = [d for step in json.loads(proc.stdout) for d in step["decided"]]
    assert decided == [
        "the agent's before_run hook (before_run) scheduled",
        "a model turn (llm_turn) scheduled",
        "the agent's evaluator (evaluate) scheduled",
        "the run completed",
    ]


# -- 3. breakpoints --------------------------------------------------------------


def test_break_at_stops_pdb_in_the_workflow_code_of_that_event() -> None:
    proc = oma(
        "replay",
        str(corpus("team_run_hybrid_scripted")),
        "--debug",
        "--break-at",
        "task_complete:code",
        stdin="p task_id, self._graph[task_id].status.value\nc\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert "oma/workflows/team_run.py" in proc.stdout and "_run_task()" in proc.stdout
    assert "('code', 'in_progress')" in proc.stdout
    assert "no mismatch" in proc.stdout


def test_debug_mode_has_no_deadlock_timeout() -> None:
    # a workflow task that holds the thread 2.5 s, as a person at a
    # breakpoint does: past the 2 s after which a worker (and a plain
    # replay) fails it as deadlocked
    history = str(corpus("team_run_tool_call_approved"))
    debugged = python_oma("tests.support.slow_team_run", "replay", history, "--debug")
    assert debugged.returncode == 0, debugged.stderr
    assert "in debug mode" in debugged.stdout


class _Extension(BaseHTTPRequestHandler):
    """The Temporal Workflow Replay Debugger's HTTP side, as its VS Code
    extension serves it: the history as protobuf, the event breakpoints,
    and the event to highlight."""

    history = b""
    breakpoints: list[int] = []
    highlighted: list[int] = []

    def do_GET(self) -> None:
        if self.path == "/history":
            body, kind = self.history, "application/octet-stream"
        else:
            body, kind = json.dumps({"breakpoints": self.breakpoints}).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).highlighted.append(sent["eventId"])
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def extension() -> Iterator[tuple[str, type[_Extension]]]:
    raw = json.loads(corpus("team_run_hybrid_scripted").read_text())
    message = History()
    ParseDict(raw, message, ignore_unknown_fields=True)
    handler = type(
        "Handler",
        (_Extension,),
        {"history": message.SerializeToString(), "breakpoints": [19], "highlighted": []},
    )
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    thread.join()


def test_ide_mode_replays_the_extensions_history_and_stops_at_its_event_breakpoint(
    extension: tuple[str, type[_Extension]],
) -> None:
    url, handler = extension
    env = {**_env(), "TEMPORAL_DEBUGGER_PLUGIN_URL": url}
    proc = oma("replay", "--ide", stdin="p self._graph[task_id].id\nc\n", env=env)
    assert proc.returncode == 0, proc.stderr
    assert handler.highlighted == [19]
    assert "'code'" in proc.stdout
    assert "replayed 32 events of hybrid-dev-demo" in proc.stdout


def test_ide_mode_says_when_the_extension_does_not_answer() -> None:
    env = {**_env(), "TEMPORAL_DEBUGGER_PLUGIN_URL": "http://127.0.0.1:9"}
    proc = oma("replay", "--ide", env=env)
    assert proc.returncode == 1
    assert "REPLAY_DEBUGGER_UNREACHABLE" in proc.stderr


# -- 4. why a replay broke -------------------------------------------------------


def test_a_changed_workflow_is_told_the_event_the_line_and_the_patch_to_add() -> None:
    # read, not imported: importing it changes TeamRun in this process, and so
    # the session's worker and every replay after this test
    changed = (SUPPORT / "changed_team_run.py").read_text().splitlines()
    changed_line = next(n for n, line in enumerate(changed, 1) if "execute_activity" in line)

    proc = python_oma(
        "tests.support.changed_team_run", "replay", str(corpus("team_run_hybrid_scripted"))
    )
    assert proc.returncode == 1
    said = proc.stderr
    assert "REPLAY_MISMATCH" in said
    assert (
        "At event 5 (the workflow task of event 3) the history recorded: task plan's AgentRun "
        "started." in said
    )
    assert (
        "The code instead: asking whether the namespace has the search attributes "
        "(registered_search_attributes) scheduled." in said
    )
    assert f"Issued at tests/support/changed_team_run.py:{changed_line} in _attempt" in said
    assert "_patches.patched(_patches.ATTEMPT_CHANGED)" in said
    assert "below PACED_STARTS (the last one)" in said


# -- the viewer's time scrubber --------------------------------------------------


async def test_the_scrubber_moments_follow_starts_closes_and_the_cascade() -> None:
    from oma.records.history_files import read_history_files
    from oma.runtime.converter import DATA_CONVERTER
    from oma.viewer.html import render_html
    from oma.viewer.model import build_run_view
    from oma.viewer.scrubber import moments

    histories = read_history_files([corpus("team_run_failed_task_cascade")])
    view = await build_run_view(histories, DATA_CONVERTER)
    changes = [(m["task"], m["status"]) for m in moments(view)]
    assert changes == [
        ("root", "in_progress"),
        ("root", "completed"),
        ("sibling", "in_progress"),
        ("bad", "in_progress"),
        ("sibling", "completed"),
        ("bad", "failed"),
        ("child", "skipped"),
        ("grandchild", "skipped"),
    ]
    memory = [m["memory"][0] for m in moments(view) if "memory" in m]
    assert memory == ["ok/task:root:result", "ok/task:sibling:result"]
    page = render_html(view)
    assert '<input type="range" id="scrub" min="0" max="8" value="8"' in page
