"""The fork's rules (oma.core.rules.fork): what a fork keeps, what it runs
again, and what it refuses, on a source run's input and result."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.converter import DataConverter

from oma.cli.summary import print_result, reused_note
from oma.client.fork import history_source
from oma.core.contracts.fork import ForkedRun
from oma.core.rules.content_key import content_keys
from oma.core.rules.fork import fork_run
from oma.core.schema.errors import HistoryReadError, InvalidForkError, RunStateTooLargeError
from oma.core.schema.fork import parse_fork_input
from oma.core.schema.limits import RUN_STATE_BUDGET_BYTES, json_size
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import parse_team_run_input
from oma.core.schema.task import ReusedFrom, TaskState, TaskStatus
from oma.records.fork_source import fitted
from tests.support.runs import scripted, task

NOW = datetime(2025, 1, 1, tzinfo=UTC)

SOURCE_INPUT: dict[str, Any] = {
    "team": {"name": "t", "agents": [scripted("a", "x"), scripted("b", "y")]},
    "tasks": [
        task("t1", "a"),
        task("t2", "a", "t1"),
        task("t3", "b", "t1"),
        task("t4", "b", "t2", "t3"),
        task("t5", "a", "t4"),
    ],
}


def source_result(failed: str = "t4") -> TeamRunResult:
    """t1..t3 completed, ``failed`` failed, the rest skipped."""
    tasks = []
    status = TaskStatus.COMPLETED
    for spec in SOURCE_INPUT["tasks"]:
        if spec["id"] == failed:
            status = TaskStatus.FAILED
        tasks.append(
            TaskState(
                id=spec["id"],
                assignee=spec["assignee"],
                depends_on=spec["depends_on"],
                status=status,
                output=f"out {spec['id']}" if status == TaskStatus.COMPLETED else None,
            )
        )
        if status == TaskStatus.FAILED:
            status = TaskStatus.SKIPPED
    return TeamRunResult(success=False, status="failed", tasks=tasks)


def forked(fork: dict[str, Any], **rest: Any) -> ForkedRun:
    spec = parse_fork_input({"fork": {"run_id": "src", **fork}, **rest})
    return fork_run(spec, SOURCE_INPUT, source_result(), workflow_id="fork", now=NOW)


def test_without_rerun_the_tasks_that_did_not_complete_run_again() -> None:
    run = forked({})
    assert (run.reused, run.rerun) == (["t1", "t2", "t3"], ["t4", "t5"])
    states = {t.id: t for t in run.resume.result.tasks}
    assert states["t4"].status == TaskStatus.PENDING
    assert states["t5"].status == TaskStatus.BLOCKED
    assert run.resume.result.forked_from == "src"


LONG = "x" * 200
"""An output over SHORT_OUTPUT_BYTES: a fork may keep it by reference."""


def long_outputs(result: TeamRunResult) -> TeamRunResult:
    """``result`` with every output long, each from an execution of its own."""
    for t in result.tasks:
        if t.output is not None:
            t.output, t.output_run_id = f"{t.id} {LONG}", f"exec-{t.id}"
    return result


def test_a_kept_task_is_completed_from_its_source_and_its_output_by_reference_unless_read() -> None:
    spec = parse_fork_input({"fork": {"run_id": "src"}})
    run = fork_run(
        spec,
        SOURCE_INPUT,
        long_outputs(source_result()),
        workflow_id="fork",
        now=NOW,
        source_execution="exec-src",
    )
    states = {t.id: t for t in run.resume.result.tasks}
    assert run.read == ["t2", "t3"]  # t4 reads them
    assert (states["t1"].output, states["t1"].output_ref) == (None, "src/t1")
    assert states["t1"].output_bytes == len(f"t1 {LONG}")
    assert (states["t2"].output, states["t2"].output_ref) == (f"t2 {LONG}", None)
    assert states["t1"].reused_from is not None
    source = parse_team_run_input(SOURCE_INPUT)
    made = content_keys(source.given_tasks(), source.team)["t1"]  # the key it was made with
    assert states["t1"].reused_from.model_dump() == {
        "run_id": "src",
        "task_id": "t1",
        "temporal_run_id": "exec-src",
        "content_key": made,
    }


def test_a_short_kept_output_stays_inline_and_one_of_an_unknown_execution_too() -> None:
    # a reference names its execution, always: one that cannot stays inline
    source = long_outputs(source_result(failed="t5"))
    source.tasks[1].output = "short"  # t2
    source.tasks[2].output_run_id = None  # t3: a run from before output_run_id
    run = fork_run(
        parse_fork_input({"fork": {"run_id": "src"}}),
        SOURCE_INPUT,
        source,
        workflow_id="fork",
        now=NOW,
    )
    states = {t.id: t for t in run.resume.result.tasks}
    assert run.read == ["t4"]
    assert (states["t1"].output, states["t1"].output_ref) == (None, "src/t1")
    assert (states["t2"].output, states["t2"].output_ref) == ("short", None)
    assert (states["t3"].output, states["t3"].output_ref) == (f"t3 {LONG}", None)


def test_a_kept_output_by_reference_names_the_execution_of_the_source_that_made_it() -> None:
    # a source run under a workflow id used again later: its kept task's
    # reference must read its own AgentRun execution, not the latest
    spec = parse_fork_input({"fork": {"run_id": "src", "temporal_run_id": "older"}})
    run = fork_run(spec, SOURCE_INPUT, long_outputs(source_result()), workflow_id="fork", now=NOW)
    states = {t.id: t for t in run.resume.result.tasks}
    assert (states["t1"].output_ref, states["t1"].output_run_id) == ("src/t1", "exec-t1")
    assert states["t4"].output_run_id is None  # runs again: no output yet


def test_rerun_takes_everything_downstream_and_every_unfinished_task() -> None:
    run = forked({"rerun": ["t2"]})
    assert (run.reused, run.rerun) == (["t1", "t3"], ["t2", "t4", "t5"])


def test_an_unknown_task_is_refused_with_the_nearest_id() -> None:
    with pytest.raises(InvalidForkError, match=r"has no task 't22' \(did you mean 't2'\?\)"):
        forked({"rerun": ["t22"]})


def test_an_edited_task_runs_again_with_its_new_fields() -> None:
    run = forked({"edit": {"t3": {"description": "do it better"}}})
    assert run.rerun == ["t3", "t4", "t5"]
    assert run.input["tasks"][2]["description"] == "do it better"


def test_a_task_to_run_again_on_an_agent_the_team_lacks_is_an_error_naming_both() -> None:
    team = {"name": "t", "agents": [scripted("a", "x")]}
    with pytest.raises(InvalidForkError, match="task 't4' runs again on agent 'b'"):
        forked({}, team=team)


def test_an_agent_only_kept_tasks_used_may_go_with_a_warning() -> None:
    team = {"name": "t", "agents": [scripted("a", "x")]}
    run = forked({"rerun": ["t5"], "edit": {"t4": {"assignee": "a"}}}, team=team)
    assert run.rerun == ["t4", "t5"]
    assert run.warnings == [
        "agent 'b' is not in the fork's team: its task(s) t3 keep their outputs from run "
        "'src' and do not run again"
    ]


def test_a_completed_run_without_a_task_to_run_again_is_refused() -> None:
    done = source_result(failed="none")
    spec = parse_fork_input({"fork": {"run_id": "src"}})
    with pytest.raises(InvalidForkError, match="nothing to run again"):
        fork_run(spec, SOURCE_INPUT, done, workflow_id="fork", now=NOW)


def test_a_forks_kept_task_names_the_run_that_ran_it() -> None:
    spec = parse_fork_input({"fork": {"run_id": "src"}})
    first = fork_run(spec, SOURCE_INPUT, long_outputs(source_result()), workflow_id="fork", now=NOW)
    result = first.resume.result.model_copy(deep=True)
    for t in result.tasks:
        t.status = TaskStatus.COMPLETED
        t.output = t.output or f"{t.id} {LONG}"
        t.output_run_id = t.output_run_id or f"exec-{t.id}"
    spec = parse_fork_input({"fork": {"run_id": "fork", "rerun": ["t5"]}})
    again = fork_run(spec, {**first.input}, result, workflow_id="fork2", now=NOW)
    states = {t.id: t for t in again.resume.result.tasks}
    assert states["t1"].output_ref == "src/t1"  # not fork/t1: the fork has no such child
    assert states["t4"].reused_from is not None
    assert states["t4"].reused_from.run_id == "fork"


def test_options_given_replace_only_those_fields() -> None:
    source = {**SOURCE_INPUT, "options": {"max_concurrency": 2, "timeout_s": 60}}
    spec = parse_fork_input({"fork": {"run_id": "src"}, "options": {"timeout_s": 30}})
    run = fork_run(spec, source, source_result(), workflow_id="fork", now=NOW)
    assert run.input["options"] == {"max_concurrency": 2, "timeout_s": 30}


def test_a_null_in_a_fork_input_is_the_same_as_leaving_the_field_out() -> None:
    # the stock CLI's JSON may say null for "the source's": not a crash in the activity
    run = forked(
        {"rerun": None, "edit": {"t3": {"title": None, "description": "again"}}, "source": None},
        team=None,
        coordinator=None,
        options=None,
    )
    assert run.rerun == ["t3", "t4", "t5"]
    assert run.input["team"] == SOURCE_INPUT["team"]
    assert run.input["tasks"][2]["title"] == SOURCE_INPUT["tasks"][2]["title"]
    assert run.input["tasks"][2]["description"] == "again"


@pytest.mark.parametrize(
    "text",
    [
        '{"events": [{"eventId": "x"}]}',  # not a number: protobuf's ParseError
        "[" * 100_000,  # nested past Python's recursion limit
        '{"events": [{"eventType": "EVENT_TYPE_NOPE"}]}',
    ],
    ids=["not-a-number", "nested", "unknown-event"],
)
async def test_a_history_file_that_does_not_read_is_refused_with_a_clear_error(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "run.json"
    path.write_text(text)
    with pytest.raises(HistoryReadError, match="is not a workflow history in JSON"):
        await history_source(path, DataConverter.default)


def test_the_estimate_does_not_price_a_task_that_never_ran_at_zero() -> None:
    result = source_result()  # t4 failed, t5 skipped
    t3, t4, t5 = result.tasks[2], result.tasks[3], result.tasks[4]
    t3.attempts, t3.cost_usd = 1, None  # a process: its cost unknown
    t4.attempts, t4.cost_usd = 1, 0.25
    t5.attempts, t5.cost_usd = 0, 0.0  # a skipped task: nothing spent, nothing known
    spec = parse_fork_input({"fork": {"run_id": "src", "rerun": ["t3"]}})
    run = fork_run(spec, SOURCE_INPUT, result, workflow_id="fork", now=NOW)
    assert run.estimated_cost_usd == 0.25
    assert run.cost_unknown == ["t3", "t5"]  # in task order


def test_the_summary_says_when_a_kept_output_could_not_be_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = source_result()
    t1 = result.tasks[0]
    t1.output, t1.output_ref = None, "gone/t1"  # its run is past retention, say
    t1.reused_from = ReusedFrom(run_id="gone", task_id="t1")
    print_result(result)
    row = next(line for line in capsys.readouterr().out.splitlines() if "│ t1 " in line)
    assert "(not read: the result of gone/t1)" in row


def test_the_reused_note_names_a_fork_that_kept_nothing() -> None:
    assert reused_note("src", [None, None]) == "fork of src: every task ran here"
    assert reused_note(None, [None]) is None
    kept = reused_note(None, [ReusedFrom(run_id="ref", task_id="t1"), None])
    assert kept is not None and kept.startswith("1 task(s) reused from ref, not run here")


def test_an_unknown_task_is_named_within_bounds_however_long() -> None:
    # the stock CLI's input is hostile: the error does not echo a 1 MB id, nor list 5,000 ids
    source = {**SOURCE_INPUT, "tasks": [task(f"t{n}", "a") for n in range(5000)]}
    result = TeamRunResult(success=False, status="failed", tasks=[])
    spec = parse_fork_input({"fork": {"run_id": "src", "rerun": ["x" * 1_000_000]}})
    with pytest.raises(InvalidForkError) as caught:
        fork_run(spec, source, result, workflow_id="fork", now=NOW)
    assert len(caught.value.message) < 2000
    assert "more characters cut" in caught.value.message
    assert "t0, t1, t2" in caught.value.message and "(and 4980 more)" in caught.value.message


def big_source(tasks: int) -> tuple[dict[str, Any], TeamRunResult]:
    """A run of ``tasks`` tasks, the last failed, each output short, as ``oma run`` names them."""
    specs = [task(f"t{n:05}", "a", description=f"do task {n}") for n in range(tasks)]
    states = [
        TaskState(
            id=s["id"],
            assignee="a",
            status=TaskStatus.COMPLETED,
            output=f"done {s['id']}",
            attempts=1,
            token_usage={"input_tokens": 1200, "output_tokens": 300},
            cost_usd=0.0081,
        )
        for s in specs
    ]
    states[-1].status, states[-1].output = TaskStatus.FAILED, None
    source = {"team": {"name": "t", "agents": [scripted("a", "x")]}, "tasks": specs}
    return source, TeamRunResult(success=False, status="failed", tasks=states)


def test_a_fork_of_a_run_of_thousands_of_tasks_fits_the_state_a_run_carries() -> None:
    source, result = big_source(3300)
    spec = parse_fork_input({"fork": {"run_id": "team-demo-1a2b3c4d"}})
    run = fork_run(
        spec,
        source,
        result,
        workflow_id="team-demo-1a2b3c4d-fork-5e6f7a8b",
        now=NOW,
        source_execution="019af3c2-5b1e-7d2a-9c4f-0e1d2c3b4a59",
    )
    sent = fitted(run, "team-demo-1a2b3c4d-fork-5e6f7a8b")
    assert len(sent.reused) == 3299
    assert json_size(sent.model_dump(mode="json")) < RUN_STATE_BUDGET_BYTES
    assert sent.resume is not None and sent.resume.result.tasks[0].output == "done t00000"


def test_a_fork_too_large_to_carry_is_refused_naming_what_a_kept_task_takes() -> None:
    source, result = big_source(6000)
    spec = parse_fork_input({"fork": {"run_id": "team-demo-1a2b3c4d"}})
    run = fork_run(spec, source, result, workflow_id="f", now=NOW, source_execution="e" * 36)
    with pytest.raises(RunStateTooLargeError) as refused:
        fitted(run, "f")
    assert "(5999 kept task(s), every kept output over 128 bytes by reference)" in str(
        refused.value
    )
    assert "a kept task carries some 400 bytes" in str(refused.value)
