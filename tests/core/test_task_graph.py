"""The task graph's bookkeeping, without Temporal: readiness, completion,
the failure cascade, skips, and a graph rebuilt from carried states."""

from __future__ import annotations

import pytest

from oma.core.rules.task_graph import TaskGraph, skip_reason
from oma.core.schema.dag import validate_task_graph
from oma.core.schema.errors import DagValidationError
from oma.core.schema.task import TaskSpec, TaskState, TaskStatus


def spec(task_id: str, *depends_on: str, assignee: str | None = "a") -> TaskSpec:
    return TaskSpec(
        id=task_id,
        title=task_id.capitalize(),
        description=f"do {task_id}",
        assignee=assignee,
        depends_on=list(depends_on),
    )


DIAMOND = [spec("a"), spec("b", "a"), spec("c", "a"), spec("d", "b", "c"), spec("e")]


def statuses(graph: TaskGraph) -> dict[str, str]:
    return {s.id: s.status.value for s in graph}


def test_a_fresh_graph_blocks_tasks_with_dependencies_and_starts_with_the_roots() -> None:
    graph = TaskGraph(DIAMOND)
    assert statuses(graph) == {
        "a": "pending",
        "b": "blocked",
        "c": "blocked",
        "d": "blocked",
        "e": "pending",
    }
    assert graph.roots() == ["a", "e"]


def test_a_plan_only_graph_reports_every_task_pending() -> None:
    assert set(statuses(TaskGraph(DIAMOND, plan_only=True)).values()) == {"pending"}


def test_a_completion_unblocks_only_dependents_whose_dependencies_all_completed() -> None:
    graph = TaskGraph(DIAMOND)
    assert graph.complete("a", "A done") == ["b", "c"]
    assert graph["a"].output == "A done"
    assert graph.complete("b", "B done") == []
    assert graph.complete("c", "C done") == ["d"]


def test_a_failure_returns_every_transitive_dependent_that_has_not_started() -> None:
    graph = TaskGraph(DIAMOND)
    assert graph.fail("a", "boom", "PROCESS_FAILED") == ["b", "c", "d"]


def test_a_dependent_already_skipped_is_not_skipped_again() -> None:
    graph = TaskGraph(DIAMOND)
    graph.complete("a", "ok")
    for dependent in graph.fail("c", "boom", "PROCESS_FAILED"):
        graph.skip(dependent, "skipped: c failed")
    assert graph.fail("b", "boom", "PROCESS_FAILED") == []
    assert (graph["b"].status, graph["b"].error, graph["b"].error_code) == (
        TaskStatus.FAILED,
        "boom",
        "PROCESS_FAILED",
    )


def test_a_skip_touches_only_a_task_that_never_started() -> None:
    graph = TaskGraph(DIAMOND)
    graph["a"].status = TaskStatus.IN_PROGRESS
    assert graph.skip("a", "skipped: stop") is False
    assert graph.skip("d", "skipped: stop") is True
    assert (graph["d"].status, graph["d"].error) == (TaskStatus.SKIPPED, "skipped: stop")
    assert graph.unsettled() == ["a", "b", "c", "d", "e"]


def test_a_graph_from_carried_states_takes_the_spec_fields_from_the_specs() -> None:
    carried = [
        TaskState(id="a", status=TaskStatus.COMPLETED, output="A", attempts=1),
        TaskState(id="b", status=TaskStatus.PENDING),
        TaskState(id="c", status=TaskStatus.AWAITING_APPROVAL),
    ]
    graph = TaskGraph(DIAMOND, carried)
    assert graph["a"].output == "A"
    assert (graph["b"].title, graph["b"].description, graph["b"].assignee) == ("B", "do b", "a")
    assert graph["d"].status == TaskStatus.BLOCKED
    assert graph.ready() == ["b", "e"]
    assert graph.awaiting_approval() == ["c"]
    assert graph.complete("c", "C") == []  # d still waits on b


def test_a_carried_assignee_is_kept_over_an_unassigned_spec() -> None:
    carried = [TaskState(id="x", assignee="writer", status=TaskStatus.PENDING)]
    graph = TaskGraph([spec("x", assignee=None)], carried)
    assert graph["x"].assignee == "writer"


def test_a_prompt_holds_each_dependency_output_under_its_title() -> None:
    graph = TaskGraph(DIAMOND)
    graph.complete("a", "the facts")
    assert "the facts" in graph.prompt("b")


def test_dependents_of_a_task_the_run_cut_short_are_skipped_with_the_runs_reason() -> None:
    failed = TaskState(id="x", title="X", error_code="RUN_TIMEOUT")
    assert skip_reason(failed, "the run passed options.timeout_s (5 s)") == (
        "skipped: the run passed options.timeout_s (5 s)"
    )
    failed.error_code = "PROCESS_FAILED"
    assert skip_reason(failed, "") == "skipped: dependency 'x' (X) failed"


def test_an_unknown_assignee_or_dependency_names_the_nearest_known_one() -> None:
    tasks = [spec("plan", assignee="planner"), spec("review", "plann", assignee="reviwer")]
    with pytest.raises(DagValidationError) as info:
        validate_task_graph(tasks, ["planner", "reviewer"])
    assert info.value.message == (
        "unknown assignee(s): task 'review' -> 'reviwer' (did you mean 'reviewer'?) "
        "(team agents: planner, reviewer); "
        "unknown dependency: task 'review' depends on 'plann' (did you mean 'plan'?)"
    )


@pytest.mark.parametrize(
    ("tasks", "cycle"),
    [
        # every task but the first listed after its dependencies
        ([spec("a", "c"), spec("b", "a"), spec("c", "b")], "a -> c -> b -> a"),
        ([spec("a"), spec("b", "b")], "b -> b"),
        # a duplicate id: the graph holds its last listing
        ([spec("a"), spec("b", "a"), spec("a", "b")], "a -> b -> a"),
    ],
)
def test_a_cycle_is_found_in_any_order_of_the_list(tasks: list[TaskSpec], cycle: str) -> None:
    with pytest.raises(DagValidationError) as info:
        validate_task_graph(tasks, ["a"])
    assert info.value.message.endswith(f"dependency cycle: {cycle}")


def test_a_repeated_dependency_is_named_once() -> None:
    with pytest.raises(DagValidationError) as info:
        validate_task_graph([spec("a"), spec("b", "a", "a"), spec("c", "a", "b")], ["a"])
    assert info.value.message == "repeated dependency: task 'b' lists 'a' twice"
