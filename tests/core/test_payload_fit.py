"""Fitting a run's result and carried state into its budget: outputs kept by
reference, texts cut, and what reads them. No Temporal."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oma.core.rules.payload_fit import (
    SHORT_OUTPUT_BYTES,
    answered_events,
    answered_requests,
    fit,
    fitted_result,
    read_batches,
    sent_result,
)
from oma.core.rules.prompt import task_prompt
from oma.core.rules.shared_memory import shared_memory
from oma.core.rules.team_run_state import carried, read_next
from oma.core.schema import limits
from oma.core.schema.approvals import Decision, PendingApproval, decision_of
from oma.core.schema.errors import (
    DependencyOutputUnavailableError,
    DependencyPayloadTooLargeError,
    InvalidRunInputError,
    RunStateTooLargeError,
)
from oma.core.schema.plan import synthesis_prompt
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_events import EventLog
from oma.core.schema.run_state import TeamRunState
from oma.core.schema.task import ReusedFrom, TaskSpec, TaskState, TaskStatus

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def done(task_id: str, output: str) -> TaskState:
    return TaskState(
        id=task_id, title=task_id.upper(), assignee="a", status=TaskStatus.COMPLETED, output=output
    )


def result_of(*tasks: TaskState) -> TeamRunResult:
    return TeamRunResult(success=True, status="completed", tasks=list(tasks))


def size(result: TeamRunResult) -> int:
    return len(result.model_dump_json().encode())


def size_without_defaults(result: TeamRunResult) -> int:
    """The size of ``result`` with its tasks' defaults left out, as
    ``sent_result`` has it before it keeps any output by reference."""
    tasks = [
        {"id": t.id, "status": t.status.value, **t.model_dump(mode="json", exclude_defaults=True)}
        for t in result.tasks
    ]
    return limits.json_size({**result.model_dump(mode="json"), "tasks": tasks})


def test_outputs_stay_in_task_order_while_they_fit_and_the_rest_are_kept_by_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = result_of(*(done(f"t{n}", chr(97 + n) * 1000) for n in range(5)))
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", size_without_defaults(result) - 1500)

    sent = sent_result(result, "run-1")
    fitted = TeamRunResult.model_validate(sent)

    assert limits.json_size(sent) <= limits.RUN_STATE_BUDGET_BYTES
    assert [t.output is not None for t in fitted.tasks] == [True, True, True, False, False]
    assert [(t.output_ref, t.output_bytes) for t in fitted.tasks[3:]] == [
        ("run-1/t3", 1000),
        ("run-1/t4", 1000),
    ]
    assert result.tasks[4].output == "e" * 1000, "the result it was fitted from is unchanged"


def test_a_result_within_the_budget_is_returned_as_it_is() -> None:
    result = result_of(done("t0", "x" * 10_000))
    assert fitted_result(result, "run-1") == result


def test_a_result_over_the_budget_leaves_out_its_tasks_defaults_before_any_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 5,000 tasks of a bench took 2.1 MB, 60% of it fields at their defaults
    result = result_of(*(done(f"t{n}", "ok") for n in range(200)))
    result.tasks[7].error_code = "TASK_FAILED"
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", size(result) // 2)

    sent = sent_result(result, "run-1")

    assert limits.json_size(sent) <= limits.RUN_STATE_BUDGET_BYTES
    assert sent["tasks"][0] == {
        "id": "t0",
        "status": "completed",
        "title": "T0",
        "assignee": "a",
        "output": "ok",
    }
    assert sent["tasks"][7]["error_code"] == "TASK_FAILED"
    assert TeamRunResult.model_validate(sent) == result, "read back the same, every output in"


def test_a_result_within_the_budget_keeps_every_field() -> None:
    result = result_of(done("t0", "x"))
    assert sent_result(result, "run-1") == result.model_dump(mode="json")


def test_short_outputs_stay_in_when_a_reference_would_take_more_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = result_of(*(done(f"t{n}", "ok") for n in range(50)), done("big", "x" * 5000))
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", size_without_defaults(result) - 1000)

    fitted = fitted_result(result, "a-rather-long-run-id-of-a-team-run")

    assert [t.id for t in fitted.tasks if t.output_ref] == ["big"]


def test_short_outputs_stay_in_even_when_the_texts_must_be_cut() -> None:
    tasks = [{"id": f"t{n}", "output": "ok"} for n in range(20)]
    tasks[0]["error"] = "e" * 2000
    root = {"tasks": tasks}
    budget = limits.json_size(root) - 500

    assert fit(root, root, "a-team-run", budget)
    assert [t.get("output") for t in tasks] == ["ok"] * 20, "no reference: each would take more"
    assert tasks[0]["error"].endswith("more characters cut)")


def test_an_output_of_short_output_bytes_stays_in_even_with_short_ids() -> None:
    # with ids this short a reference would be smaller: it would name no
    # execution (a short output's task notes none), so it stays in
    tasks = [{"id": f"t{n}", "output": "o" * SHORT_OUTPUT_BYTES} for n in range(20)]
    root = {"tasks": tasks}
    budget = limits.json_size(root) - 500

    assert not fit(root, root, "r", budget)
    assert all(t.get("output") and "output_ref" not in t for t in tasks)


def test_the_outputs_waiting_tasks_read_stay_in_first() -> None:
    tasks = [{"id": f"t{n}", "output": "x" * 1000} for n in range(4)]
    root = {"result": {"tasks": tasks}}
    budget = limits.json_size(root) - 1500

    assert fit(root, root["result"], "r", budget, first={"t3"})
    assert [("output" in t) for t in root["result"]["tasks"]] == [True, False, False, True]
    assert root["result"]["tasks"][1] == {"id": "t1", "output_ref": "r/t1", "output_bytes": 1000}


def test_task_errors_and_comments_are_cut_when_outputs_are_not_enough() -> None:
    tasks = [{"id": f"t{n}", "error": "why " * 500} for n in range(10)]
    decisions = [{"request_id": "plan", "comment": "fine " * 400}]
    root = {"tasks": tasks, "approval_decisions": decisions}

    assert fit(root, root, "r", 6000)
    assert limits.json_size(root) <= 6000
    assert all(t["error"].endswith("more characters cut)") for t in tasks)
    assert decisions[0]["comment"].endswith("more characters cut)")


def test_a_reference_names_the_execution_of_the_agent_run_that_made_the_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    own = done("a", "A" * 3000).model_copy(update={"output_run_id": "exec-a"})
    reused = done("b", "B" * 3000).model_copy(
        update={"output_run_id": "exec-src-b", "reused_from": ReusedFrom(run_id="src", task_id="x")}
    )
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", 2000)

    a, b = fitted_result(result_of(own, reused), "run-1").tasks

    assert (a.output, a.output_ref, a.output_run_id) == (None, "run-1/a", "exec-a")
    assert (b.output, b.output_ref, b.output_run_id) == (None, "src/x", "exec-src-b")


def test_a_round_request_keeps_its_outputs_by_reference_to_their_executions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = done("a", "A" * 3000).model_copy(update={"output_run_id": "exec-a"})
    request = PendingApproval(
        request_id="round-2",
        boundary="round",
        scope="run-1",
        reason="round 2",
        content={"round": 2, "completed": [{"id": "a", "output": "A" * 3000}], "next": []},
        request_hash="h",
        requested_at=NOW,
    )
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", 2000)

    [answered] = answered_requests([request], "run-1", {"a": state})

    [shown] = answered.content["completed"]
    assert shown == {
        "id": "a",
        "output_ref": "run-1/a",
        "output_run_id": "exec-a",
        "output_bytes": 3000,
    }


def test_a_task_error_is_cut_to_its_limit_even_within_the_budget() -> None:
    tasks = [{"id": "t", "error": "e" * 5000}]
    assert fit({"tasks": tasks}, {"tasks": tasks}, "r", 10**9)
    assert tasks[0]["error"] == "e" * 1960 + f"… ({5000 - 1960} more characters cut)"
    assert len(tasks[0]["error"]) <= limits.MAX_TASK_ERROR_CHARS


def test_a_result_that_cannot_fit_even_so_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    result = result_of(*(done(f"task-{n}", "x") for n in range(100)))
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", 2000)
    with pytest.raises(RunStateTooLargeError, match=r"over the run's budget of 2000 bytes \(100"):
        fitted_result(result, "run-1")


def test_the_carried_state_keeps_what_waiting_tasks_read_and_cuts_event_details() -> None:
    state = TeamRunState(result=result_of(), started_at=NOW)
    state.result.tasks = [
        done("a", "A" * 3000),
        done("b", "B" * 3000),
        TaskState(id="c", title="C", depends_on=["b"], status=TaskStatus.BLOCKED),
    ]
    EventLog(state.events).add("abort", NOW, detail="stop " * 1000)
    specs = [
        TaskSpec(id="a", title="A"),
        TaskSpec(id="b", title="B"),
        TaskSpec(id="c", title="C", depends_on=["b"]),
    ]
    first = read_next(specs, state.result.tasks)
    assert first == {"b"}

    resume = carried(state, "run-1", 4000, first)

    assert limits.json_size(resume) <= 4000
    a, b, _ = resume["result"]["tasks"]
    assert (a.get("output"), a["output_ref"], b["output"]) == (None, "run-1/a", "B" * 3000)
    assert resume["events"][0]["detail"] == limits.cut_text("stop " * 1000, 500)
    assert len(resume["events"][0]["detail"]) <= limits.MAX_EVENT_DETAIL_CHARS
    resumed = TeamRunState.model_validate(resume)
    assert resumed.result.tasks[0].output_ref == "run-1/a"


def test_a_carried_state_that_cannot_fit_stops_the_run() -> None:
    state = TeamRunState(result=result_of(done("a", "x")), started_at=NOW)
    with pytest.raises(RunStateTooLargeError, match="over the 10 bytes its budget leaves"):
        carried(state, "run-1", 10)


def test_every_task_reads_next_when_one_still_to_run_reads_the_whole_memory() -> None:
    states = [done("a", "1"), TaskState(id="b", title="B")]
    specs = [TaskSpec(id="a", title="A"), TaskSpec(id="b", title="B", memory_scope="all")]
    assert read_next(specs, states) == {"a", "b"}
    assert read_next(specs[:1], states[:1]) == set()
    assert read_next(specs[:1], states[:1], everything=True) == {"a"}


def test_outputs_are_read_back_in_batches_of_at_most_a_megabyte() -> None:
    mb = limits.MAX_OUTPUT_BYTES * 4
    assert read_batches([("a", mb // 2), ("b", mb // 2), ("c", 1), ("d", 2 * mb)]) == [
        ["a", "b"],
        ["c"],
        ["d"],
    ]


# -- what reads an output kept by reference ------------------------------------


def kept(task_id: str, nbytes: int) -> TaskState:
    state = done(task_id, "")
    state.output, state.output_ref, state.output_bytes = None, f"run-1/{task_id}", nbytes
    return state


def test_a_dependent_of_an_output_not_read_back_fails_saying_where_it_is_and_why() -> None:
    # the run reads back every kept output its waiting tasks read: one left failed to read
    spec = TaskSpec(id="w", title="W", depends_on=["r"])
    with pytest.raises(DependencyOutputUnavailableError) as info:
        task_prompt(spec, [kept("r", 2000)], {})
    assert info.value.message == (
        "task 'w' reads the output of dependency 'r' (2000 bytes), which the run keeps by "
        "reference in the result of run-1/r; it could not be read back: that run is gone "
        "(past the namespace's retention, or deleted); run 'r' again (oma fork RUN_ID --from r)"
    )


def test_a_dependent_of_an_output_over_the_payload_cap_fails_on_its_size_as_before() -> None:
    spec = TaskSpec(id="w", title="W", depends_on=["r"])
    with pytest.raises(DependencyPayloadTooLargeError, match="would receive 250000 bytes"):
        task_prompt(spec, [kept("r", 250_000)], {})


def test_the_shared_memory_and_the_synthesis_say_where_an_output_kept_by_reference_is() -> None:
    assert shared_memory([kept("r", 2000)]) == {
        "a/task:r:result": "(kept by reference: the result of run-1/r, 2000 bytes)"
    }
    prompt = synthesis_prompt("g", [kept("r", 2000)])
    assert "### R (completed)\n(an output of 2000 bytes, kept by reference: the result of " in (
        prompt
    )


# -- comments, reviewers, ids --------------------------------------------------------


# -- what a running run's queries answer -----------------------------------------


def test_events_over_the_budget_are_answered_with_their_details_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = EventLog([])
    for n in range(20):
        log.add("task_failed", NOW, f"t{n}", "e" * 8_000)
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", 200_000)
    assert answered_events(log.events) is log.events  # within it: as they are
    monkeypatch.setattr(limits, "RUN_STATE_BUDGET_BYTES", 50_000)
    answer = answered_events(log.events)
    assert sum(len(e.model_dump_json()) for e in answer) <= 50_000
    assert [(e.seq, e.task_id) for e in answer] == [(e.seq, e.task_id) for e in log.events]
    assert all(e.detail and e.detail.endswith("more characters cut)") for e in answer)
    assert all(e.detail == "e" * 8_000 for e in log.events)


def test_a_long_comment_is_cut_and_the_cut_said_once() -> None:
    comment = "fine " * 220_000
    decision = decision_of(
        (
            {
                "request_id": "p",
                "request_hash": "h",
                "decision": "approve",
                "reviewer": {"id": "r"},
                "comment": comment,
            },
        )
    )
    kept_chars = limits.MAX_REASON_CHARS - limits.CUT_MARK_CHARS
    assert (
        decision.comment
        == f"{comment[:kept_chars]}… ({len(comment) - kept_chars} more characters cut)"
    )
    assert len(decision.comment) <= limits.MAX_REASON_CHARS
    again = Decision.model_validate(decision.model_dump())
    assert again.comment == decision.comment


def test_a_reviewer_id_longer_than_a_name_is_refused() -> None:
    with pytest.raises(InvalidRunInputError, match=r"reviewer\.id: String should have at most 100"):
        decision_of(
            (
                {
                    "request_id": "p",
                    "request_hash": "h",
                    "decision": "approve",
                    "reviewer": {"id": "r" * 1000},
                },
            )
        )


def test_a_run_id_that_leaves_no_room_for_its_childrens_ids_is_refused() -> None:
    limits.check_child_ids("r" * 800, ["t" * 100])
    with pytest.raises(InvalidRunInputError) as info:
        limits.check_child_ids("r" * 950, ["t" * 100])
    assert "would be 1051 bytes, over Temporal's limit of 1000 bytes" in info.value.message
