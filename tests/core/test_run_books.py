"""A team run's bookkeeping, without Temporal: the tally of the tasks that
ended (what the details line reads, O(1) per settle), the budgets, how the
run ends, and the dispatch releases that read only the gated tasks."""

from __future__ import annotations

from datetime import UTC, datetime

from oma.core.contracts.visibility import team_run_details
from oma.core.rules.approval_gate import ApprovalGate
from oma.core.rules.dispatch import Dispatcher
from oma.core.rules.run_outcome import settle_outcome
from oma.core.rules.scheduling import Scheduler
from oma.core.rules.task_graph import TaskGraph
from oma.core.rules.task_tally import TaskTally
from oma.core.rules.team_budget import TeamBudget, count_attempt
from oma.core.rules.team_run_state import RunStop
from oma.core.schema.approvals import ApprovalOptions, Reviewer
from oma.core.schema.results import AgentRunResult, TeamRunResult
from oma.core.schema.run_state import TeamRunState
from oma.core.schema.task import TaskSpec, TaskState, TaskStatus
from oma.core.schema.team import TeamConfig
from oma.core.schema.usage import TokenUsage

NOW = datetime(2026, 12, 1, tzinfo=UTC)
TEAM = TeamConfig.model_validate(
    {"name": "t", "agents": [{"name": "a", "provider": "scripted", "script": ["ok"]}]}
)


def spec(task_id: str, *depends_on: str) -> TaskSpec:
    return TaskSpec(
        id=task_id, title=task_id, description="", assignee="a", depends_on=list(depends_on)
    )


def state(tasks: list[TaskState] | None = None) -> TeamRunState:
    result = TeamRunResult(success=False, status="running", tasks=tasks or [])
    return TeamRunState(result=result, started_at=NOW)


def test_the_tally_counts_each_task_once_as_it_ends() -> None:
    tally = TaskTally([TaskStatus.COMPLETED, TaskStatus.PENDING, TaskStatus.SKIPPED])
    assert tally.ended == 2
    tally.moved(TaskStatus.IN_PROGRESS, TaskStatus.FAILED)
    tally.moved(TaskStatus.PENDING, TaskStatus.IN_PROGRESS)
    assert (tally.ended, tally.count(TaskStatus.FAILED)) == (3, 1)
    tally.moved(TaskStatus.COMPLETED, TaskStatus.FAILED)  # an end that changes counts once
    assert (tally.ended, tally.count(TaskStatus.COMPLETED)) == (3, 0)


def test_the_graph_keeps_its_tally_as_tasks_complete_fail_and_are_skipped() -> None:
    graph = TaskGraph([spec("a"), spec("b", "a"), spec("c", "b"), spec("d")])
    graph.complete("d", "ok")
    assert graph.tally.ended == 1 and not graph.any_failed()
    for dependent in graph.fail("a", "boom", "PROCESS_FAILED"):
        graph.skip(dependent, "skipped")
    assert graph.tally.ended == 4
    assert graph.tally.count(TaskStatus.SKIPPED) == 2 and graph.any_failed()
    assert not graph.skip("b", "again")  # a settled task is not counted twice
    assert graph.tally.ended == 4


def test_a_resumed_graph_counts_the_carried_ends() -> None:
    carried = [
        TaskState(id="a", status=TaskStatus.COMPLETED, output="ok"),
        TaskState(id="b", status=TaskStatus.FAILED, error="x"),
    ]
    graph = TaskGraph([spec("a"), spec("b"), spec("c", "a")], carried)
    assert graph.tally.ended == 2 and graph.any_failed()


def test_the_running_details_line_says_how_many_tasks_settled() -> None:
    tasks = [TaskState(id="a", status=TaskStatus.COMPLETED), TaskState(id="b")]
    result = TeamRunResult(success=False, status="running", tasks=tasks)
    assert team_run_details("t", result) == "t: 2 tasks, running (1 settled)"
    # given the tally, it is not recounted from the tasks
    assert team_run_details("t", result, settled=2) == "t: 2 tasks, running (2 settled)"


def test_an_attempt_counts_in_its_task_and_the_run() -> None:
    run = state()
    task = TaskState(id="a")
    usage = TokenUsage(input_tokens=10, output_tokens=5, cost_usd=0.5)
    count_attempt(
        run,
        task,
        AgentRunResult(agent="a", status="completed", token_usage=usage, backend_attempts=2),
    )
    count_attempt(
        run,
        task,
        AgentRunResult(agent="a", status="completed", token_usage=usage, backend_attempts=1),
    )
    assert (task.token_usage.total_tokens, task.cost_usd, task.backend_attempts) == (30, 1.0, 3)
    assert (run.result.total_token_usage.total_tokens, run.result.total_cost_usd) == (30, 1.0)
    unpriced = TokenUsage(input_tokens=1, unpriced=["process agent 'a'"])
    count_attempt(run, task, AgentRunResult(agent="a", status="completed", token_usage=unpriced))
    assert task.cost_usd is None and run.result.cost_unknown == ["process agent 'a'"]


def test_a_spent_token_budget_is_spent_first_once_and_counts_the_tasks_in_flight() -> None:
    run = state()
    budget = TeamBudget(run, tokens=100, cost_usd=None)
    run.add_usage(TokenUsage(input_tokens=60))
    assert budget.spent(TokenUsage(output_tokens=39)) is None
    assert budget.grant(3, TokenUsage(output_tokens=30)).model_dump() == {
        "seq": 3,
        "tokens_left": 10,
        "cost_usd_left": None,
    }
    spent = budget.spent(TokenUsage(output_tokens=40))
    assert spent is not None and spent.first and not run.result.budget_exceeded
    assert (spent.stop, spent.reason, spent.detail) == (
        "budget",
        "the token budget of 100 is used up",
        "100 tokens of 100",
    )
    run.result.budget_exceeded = True  # as the run stops
    again = budget.spent(TokenUsage(output_tokens=40))
    assert again is not None and not again.first


def test_a_spent_cost_budget_says_dollars() -> None:
    run = state()
    budget = TeamBudget(run, tokens=None, cost_usd=1.0)
    run.add_usage(TokenUsage(input_tokens=1, cost_usd=1.25))
    spent = budget.spent(TokenUsage())
    assert spent is not None
    assert (spent.stop, spent.detail) == ("cost_budget", "$1.25 of $1.00")
    assert not TeamBudget(run, None, None).limited


def test_the_stop_decides_how_the_run_ends_else_the_tasks_do() -> None:
    result = TeamRunResult(success=False, status="running", tasks=[])
    assert settle_outcome(result, RunStop(), any_failed=False) == "completed"
    assert result.success
    assert settle_outcome(result, RunStop(), any_failed=True) == "failed"
    assert not result.success
    assert settle_outcome(result, RunStop(), any_failed=False, status="planned") == "planned"
    stop = RunStop()
    stop.stop("aborted", "aborted: enough")
    assert settle_outcome(result, stop, any_failed=True, status="planned") == "cancelled"
    assert (result.error, result.error_code) == ("aborted: enough", "ABORTED")


def test_a_failed_synthesis_fails_an_otherwise_completed_run() -> None:
    result = TeamRunResult(success=False, status="running", tasks=[], error_code="X")
    assert settle_outcome(result, RunStop(), any_failed=False) == "failed"


def test_a_release_queues_the_approved_gated_tasks_in_task_order() -> None:
    tasks = [spec("a"), spec("b"), spec("c")]
    graph = TaskGraph(tasks)
    gate = ApprovalGate("run", ApprovalOptions(dispatch=["a", "b", "c"]), [], [])
    requested: list[str] = []

    def request(request_id: str, *_: object) -> None:
        requested.append(request_id)
        gate.request(request_id, "dispatch", {}, "why", NOW)

    scheduler = Scheduler("round-robin", TEAM, tasks, graph.dependents)
    dispatcher = Dispatcher(graph, scheduler, gate, TEAM, request)
    for task_id in ("c", "a", "b"):
        dispatcher.ready(task_id)
    assert requested == ["dispatch-c", "dispatch-a", "dispatch-b"]
    graph.skip("b", "skipped")  # a skipped request is not released
    for request_id in ("dispatch-c", "dispatch-a", "dispatch-b"):
        gate.decide(gate.get(request_id), "approve", Reviewer(id="r"), None, "update", NOW)
    released: list[str] = []
    dispatcher.release(lambda request_id: released.append(request_id) or True)
    assert released == ["dispatch-a", "dispatch-c"]
    assert scheduler.ready() == ["a", "c"]
    assert graph["b"].status == TaskStatus.SKIPPED
