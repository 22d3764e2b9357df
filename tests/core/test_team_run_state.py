"""The team run's state as one model: the event log over it, what
continue-as-new carries, a run resumed from an older checkpoint, the stop,
and the dispatcher's choices. No Temporal."""

from __future__ import annotations

import base64
import json
from collections import deque
from datetime import UTC, datetime
from typing import Any

from oma.core.rules.approval_gate import ApprovalGate
from oma.core.rules.dispatch import Dispatcher
from oma.core.rules.scheduling import Scheduler
from oma.core.rules.task_graph import TaskGraph
from oma.core.rules.team_run_state import RunStop, carried
from oma.core.schema.approvals import ApprovalOptions, ApprovalRequest, Boundary, Reviewer
from oma.core.schema.results import AgentRunResult, TeamRunResult
from oma.core.schema.run_events import EVENTS_CARRIED, EVENTS_KEPT, EventLog
from oma.core.schema.run_input import TeamRunInput
from oma.core.schema.run_state import TeamRunState
from oma.core.schema.task import TaskSpec, TaskState, TaskStatus
from oma.core.schema.team import TeamConfig
from oma.core.schema.usage import TokenUsage
from tests.support.paths import HISTORIES

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def fresh() -> TeamRunState:
    return TeamRunState(
        result=TeamRunResult(success=False, status="running", tasks=[]), started_at=NOW
    )


def test_the_event_log_numbers_on_from_the_carried_events_and_keeps_the_latest() -> None:
    state = fresh()
    log = EventLog(state.events)
    for _ in range(EVENTS_KEPT + EVENTS_CARRIED + 10):
        log.add("task_start", NOW)
    assert len(log.after(-1)) == EVENTS_KEPT
    assert log.after(-1)[-1].seq == EVENTS_KEPT + EVENTS_CARRIED + 9
    assert [e.seq for e in log.after(EVENTS_KEPT + EVENTS_CARRIED + 7)] == [
        EVENTS_KEPT + EVENTS_CARRIED + 8,
        EVENTS_KEPT + EVENTS_CARRIED + 9,
    ]
    resumed = TeamRunState.model_validate(carried(state))
    assert len(resumed.events) == EVENTS_CARRIED
    assert EventLog(resumed.events).add("run_end", NOW).seq == EVENTS_KEPT + EVENTS_CARRIED + 10


def test_the_carried_state_leaves_out_what_the_specs_say_and_round_trips() -> None:
    state = fresh()
    state.result.tasks = [
        TaskState(id="a", title="A", description="long " * 50, depends_on=[], output="done"),
        TaskState(id="b", title="B", depends_on=["a"], status=TaskStatus.BLOCKED),
    ]
    resume = carried(state)
    assert resume["result"]["tasks"] == [
        {"id": "a", "output": "done"},
        {"id": "b", "status": "blocked"},
    ]
    resumed = TeamRunState.model_validate(resume)
    graph = TaskGraph(
        [TaskSpec(id="a", title="A", description="long"), TaskSpec(id="b", title="B")],
        resumed.result.tasks,
    )
    assert (graph["a"].output, graph["a"].description, graph["b"].status) == (
        "done",
        "long",
        TaskStatus.BLOCKED,
    )


def test_a_run_resumed_from_an_older_checkpoint_reads_its_progress_and_events() -> None:
    raw = json.loads((HISTORIES / "team_run_resumed_with_open_approval.json").read_text())
    started = raw["events"][0]["workflowExecutionStartedEventAttributes"]
    given: dict[str, Any] = json.loads(base64.b64decode(started["input"]["payloads"][0]["data"]))
    old = given["resume"]
    assert "progress" in old and "next_seq" in old
    inp = TeamRunInput.model_validate(given)
    assert inp.resume is not None
    assert [t.id for t in inp.resume.result.tasks] == [p["id"] for p in old["progress"]]
    assert [r.request_id for r in inp.resume.requests] == ["dispatch-gated"]
    assert EventLog(inp.resume.events).next_seq == old["next_seq"]


def test_the_first_stop_wins_and_says_how_the_run_ends() -> None:
    stop = RunStop()
    assert stop.outcome() is None
    assert stop.stop("aborted", "aborted: wrong branch")
    assert not stop.stop("timeout", "later")
    assert stop.outcome() == ("cancelled", "ABORTED")
    cut = stop.cut_short(AgentRunResult(agent="a", status="cancelled"))
    assert (cut.error, cut.error_code) == ("aborted: wrong branch", "CANCELLED")
    timed_out = RunStop()
    timed_out.stop("timeout", "the run passed options.timeout_s (1 s)")
    assert timed_out.cut_short(cut).error_code == "RUN_TIMEOUT"
    assert timed_out.outcome() == ("failed", "RUN_TIMEOUT")


def test_usage_is_summed_and_the_budget_counts_input_and_output_tokens() -> None:
    state = fresh()
    run = AgentRunResult.model_validate(
        {
            "agent": "coordinator",
            "status": "completed",
            "turns": 2,
            "token_usage": {"input_tokens": 7, "output_tokens": 3},
        }
    )
    state.add_coordinator_run(run)
    state.add_coordinator_run(run)
    summary = state.result.agent_results["coordinator"]
    assert (summary.turns, summary.token_usage.input_tokens, state.coordinator_turns) == (4, 14, 4)
    assert state.tokens_used() == 20
    assert state.over_budget(20) and not state.over_budget(21) and not state.over_budget(None)


class Requests:
    """Opens the dispatcher's requests on the gate, as the workflow does."""

    def __init__(self, gate: ApprovalGate) -> None:
        self.gate = gate
        self.made: list[str] = []

    def __call__(self, request_id: str, boundary: Boundary, content: Any, reason: str) -> None:
        self.gate.request(request_id, boundary, content, reason, NOW)
        self.made.append(request_id)


def dispatcher(
    tasks: list[TaskSpec], team: dict[str, Any], **approvals: Any
) -> tuple[Dispatcher, Requests, ApprovalGate]:
    config = TeamConfig.model_validate(team)
    graph = TaskGraph(tasks)
    requests: list[ApprovalRequest] = []
    options = ApprovalOptions.model_validate(approvals) if approvals else None
    gate = ApprovalGate("run", options, requests, [])
    made = Requests(gate)
    scheduler = Scheduler("dependency-first", config, tasks, graph.dependents)
    return Dispatcher(graph, scheduler, gate, config, made), made, gate


ACP = {"kind": "acp", "command": "agent"}


def test_an_acp_agent_takes_one_task_at_a_time() -> None:
    tasks = [TaskSpec(id=t, title=t, assignee="coder") for t in ("x", "y")]
    d, _, _ = dispatcher(tasks, {"name": "t", "agents": [{"name": "coder", "backend": ACP}]})
    d.start()
    assert d.next() == ("x", "coder")
    d.started("x", "coder")
    assert d.next() is None
    d.settled("coder")
    assert d.next() == ("y", "coder")


def test_a_gated_task_waits_for_its_request_and_starts_once_approved() -> None:
    tasks = [TaskSpec(id="x", title="x", assignee="w"), TaskSpec(id="y", title="y", assignee="w")]
    d, made, gate = dispatcher(
        tasks,
        {"name": "t", "agents": [{"name": "w", "provider": "scripted", "script": ["ok"]}]},
        dispatch=["y"],
    )
    d.start()
    assert made.made == ["dispatch-y"]
    assert d.graph["y"].status == TaskStatus.AWAITING_APPROVAL
    assert d.next() == ("x", "w")
    request = gate.get("dispatch-y")
    gate.decide(request, "approve", Reviewer(id="ana"), None, "update", NOW)
    d.release(lambda request_id: True)
    assert d.next() == ("y", "w")


def test_a_round_takes_every_queued_task_with_its_agent() -> None:
    tasks = [TaskSpec(id=t, title=t) for t in ("x", "y")]
    team = {
        "name": "t",
        "agents": [{"name": n, "provider": "scripted", "script": ["ok"]} for n in ("a", "b")],
    }
    d, _, _ = dispatcher(tasks, team)
    d.start()
    batch = d.next_round()
    assert batch == deque(["x", "y"])
    assert [d.graph[t].assignee for t in batch] == ["a", "b"]
    assert d.next(batch) == ("x", "a")
    assert list(batch) == ["y"]


def test_cache_tokens_count_in_the_token_budget() -> None:
    state = fresh()
    state.add_usage(
        TokenUsage(
            input_tokens=1,
            output_tokens=2,
            cache_creation_input_tokens=3,
            cache_read_input_tokens=4,
        )
    )
    assert state.tokens_used() == 10


def test_costs_are_summed_and_what_is_unpriced_is_named_once() -> None:
    state = fresh()
    state.add_usage(TokenUsage(cost_usd=0.25))
    state.add_usage(TokenUsage(unpriced=["process agent 'coder'"]))
    state.add_usage(TokenUsage(cost_usd=0.5, unpriced=["process agent 'coder'"]))

    assert (state.result.total_cost_usd, state.result.cost_unknown) == (
        0.75,
        ["process agent 'coder'"],
    )
    assert state.cost_left(1.0) == 0.25 and state.cost_left(0.5) == 0.0
    assert state.over_cost_budget(0.75) and not state.over_cost_budget(0.8)
    assert not state.over_cost_budget(None)
