"""Scheduling: requirements, assignment checks, downstream counts and the four
strategies of the ready queue (oma/core/schema/team.py,
oma/core/rules/scheduling.py). Pure logic, no Temporal."""

from __future__ import annotations

import random
import time
import tracemalloc
from collections.abc import Sequence
from typing import Any

import pytest

from oma.core.rules.scheduling import Scheduler, downstream_counts
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.backends import AcpBackendConfig, ProcessBackendConfig
from oma.core.schema.dag import dependents_map
from oma.core.schema.errors import AssigneeRequirementsMismatchError, NoEligibleAgentError
from oma.core.schema.run_input import SchedulingStrategy
from oma.core.schema.task import TaskRequirements, TaskSpec
from oma.core.schema.team import TeamConfig, check_assignments, satisfies


def llm(name: str, *capabilities: str, **extra: Any) -> AgentConfig:
    return AgentConfig(name=name, capabilities=list(capabilities), **extra)


def process(name: str, *capabilities: str) -> AgentConfig:
    return AgentConfig(
        name=name, capabilities=list(capabilities), backend=ProcessBackendConfig(command="echo")
    )


def acp(name: str, *capabilities: str) -> AgentConfig:
    return AgentConfig(
        name=name, capabilities=list(capabilities), backend=AcpBackendConfig(command="npx")
    )


def team(*agents: AgentConfig) -> TeamConfig:
    return TeamConfig(name="crew", agents=list(agents))


def task(task_id: str, *depends_on: str, **extra: Any) -> TaskSpec:
    return TaskSpec(
        id=task_id, title=extra.pop("title", task_id), depends_on=list(depends_on), **extra
    )


def needs(*capabilities: str, **extra: Any) -> TaskRequirements:
    return TaskRequirements(capabilities=list(capabilities), **extra)


def scheduler(
    strategy: SchedulingStrategy, crew: TeamConfig, tasks: Sequence[TaskSpec], **extra: Any
) -> Scheduler:
    return Scheduler(strategy, crew, tasks, dependents_map(tasks), **extra)


def anyone(agent: str) -> bool:
    return True


def dispatch_all(s: Scheduler, available: Any = anyone) -> list[tuple[str, str]]:
    """Take every task the scheduler gives, starting nothing."""
    out = []
    while (nxt := s.next(available)) is not None:
        out.append(nxt)
    return out


# satisfies


def test_any_agent_satisfies_no_requirements() -> None:
    assert satisfies(process("shell"), None) is True


def test_an_agent_with_every_required_capability_satisfies() -> None:
    assert satisfies(llm("dev", "python", "review", "sql"), needs("python", "review")) is True


def test_an_agent_missing_one_required_capability_does_not_satisfy() -> None:
    assert satisfies(llm("dev", "python"), needs("python", "review")) is False


@pytest.mark.parametrize(
    ("agent", "kind"),
    [(llm("model"), "llm"), (process("shell"), "process"), (acp("coder"), "acp")],
)
def test_required_backend_is_the_agents_kind(agent: AgentConfig, kind: str) -> None:
    assert agent.kind == kind
    assert {k: satisfies(agent, needs(backend=k)) for k in ("llm", "process", "acp")} == {
        k: k == kind for k in ("llm", "process", "acp")
    }


def test_required_provider_matches_an_llm_agents_resolved_provider() -> None:
    default = llm("default")
    scripted = llm("scripted", provider="scripted", script=["ok"])

    assert satisfies(default, needs(provider="anthropic")) is True
    assert satisfies(scripted, needs(provider="anthropic")) is False
    assert satisfies(scripted, needs(provider="scripted")) is True


@pytest.mark.parametrize("agent", [process("shell"), acp("coder")])
def test_a_required_provider_excludes_external_agents(agent: AgentConfig) -> None:
    assert satisfies(agent, needs(provider="anthropic")) is False


def test_every_requirement_must_hold_together() -> None:
    agent = process("shell", "bash")

    assert satisfies(agent, needs("bash", backend="process")) is True
    assert satisfies(agent, needs("bash", backend="llm")) is False
    assert satisfies(agent, needs("bash", "git", backend="process")) is False


# check_assignments


def test_tasks_every_agent_can_run_pass_the_check() -> None:
    crew = team(llm("a", "python"), process("b"))
    tasks = [
        task("t1", assignee="a", requires=needs("python")),
        task("t2", requires=needs(backend="process")),
        task("t3"),
    ]

    check_assignments(tasks, crew)  # raises nothing


def test_a_named_assignee_lacking_the_requirements_is_a_mismatch() -> None:
    crew = team(llm("a", "python"), llm("b"))
    tasks = [
        task("t1", assignee="b", requires=needs("python")),
        task("t2", assignee="a", requires=needs("python")),
        task("t3", assignee="a", requires=needs(backend="acp")),
    ]

    with pytest.raises(AssigneeRequirementsMismatchError) as info:
        check_assignments(tasks, crew)

    assert info.value.code == "ASSIGNEE_REQUIREMENTS_MISMATCH"
    assert info.value.message == (
        """task 't1': 'b' does not satisfy {"capabilities":["python"]}; """
        """task 't3': 'a' does not satisfy {"backend":"acp"}"""
    )


def test_an_unassigned_task_no_agent_satisfies_has_no_eligible_agent() -> None:
    crew = team(llm("a", "python"), process("b"))
    tasks = [
        task("t1", requires=needs("rust")),
        task("t2", requires=needs("python")),
        task("t3", requires=needs(backend="acp")),
        task("t4", requires=needs("python", backend="process")),
    ]

    with pytest.raises(NoEligibleAgentError) as info:
        check_assignments(tasks, crew)

    assert info.value.code == "NO_ELIGIBLE_AGENT"
    assert info.value.message == (
        "no agent of team 'crew' is eligible: "
        """task 't1' requires {"capabilities":["rust"]}; """
        """task 't3' requires {"backend":"acp"}; """
        """task 't4' requires {"capabilities":["python"],"backend":"process"}"""
    )


def test_an_unknown_assignee_is_left_to_the_graph_validation() -> None:
    crew = team(llm("a"))

    check_assignments([task("t1", assignee="ghost", requires=needs("x"))], crew)  # raises nothing


# downstream_counts


def counts(tasks: Sequence[TaskSpec]) -> dict[str, int]:
    return downstream_counts(tasks, dependents_map(tasks))


def test_downstream_counts_of_a_chain() -> None:
    tasks = [task("a"), task("b", "a"), task("c", "b"), task("d", "c")]

    assert counts(tasks) == {"a": 3, "b": 2, "c": 1, "d": 0}


def test_downstream_counts_count_a_shared_descendant_of_a_diamond_once() -> None:
    tasks = [task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c"), task("e", "d")]

    assert counts(tasks) == {"a": 4, "b": 2, "c": 2, "d": 1, "e": 0}


def test_downstream_counts_of_a_fan_out() -> None:
    tasks = [task("root"), *(task(f"leaf{i}", "root") for i in range(5))]

    assert counts(tasks) == {"root": 5} | {f"leaf{i}": 0 for i in range(5)}


def test_downstream_counts_of_disconnected_parts_stay_separate() -> None:
    tasks = [
        task("x1"),
        task("y1"),
        task("x2", "x1"),
        task("alone"),
        task("y2", "y1"),
        task("y3", "y1"),
        task("y4", "y2", "y3"),
    ]

    assert counts(tasks) == {"x1": 1, "x2": 0, "y1": 3, "y2": 1, "y3": 1, "y4": 0, "alone": 0}


def test_downstream_counts_do_not_depend_on_input_order() -> None:
    tasks = [task("d", "b", "c"), task("c", "a"), task("b", "a"), task("a")]

    assert counts(tasks) == {"a": 3, "b": 1, "c": 1, "d": 0}


def reachable(tasks: Sequence[TaskSpec]) -> dict[str, int]:
    """The downstream counts by walking from every task: slow and plainly right."""
    dependents = dependents_map(tasks)
    found = {}
    for t in tasks:
        seen: set[str] = set()
        walk = list(dependents[t.id])
        while walk:
            d = walk.pop()
            if d not in seen:
                seen.add(d)
                walk.extend(dependents[d])
        found[t.id] = len(seen)
    return found


@pytest.mark.parametrize("seed", range(40))
def test_downstream_counts_are_exact_on_any_graph(seed: int) -> None:
    # chains, trees, fan-ins and overlaps: each task depends on up to
    # `most` of the earlier ones, given in shuffled order
    rng = random.Random(seed)
    most = rng.choice([1, 1, 2, 3, 8])
    odds = rng.random() * 0.3
    tasks = []
    for i in range(rng.randint(1, 60)):
        earlier = [f"t{j}" for j in range(i) if rng.random() < odds]
        rng.shuffle(earlier)
        tasks.append(task(f"t{i}", *earlier[:most]))
    rng.shuffle(tasks)

    assert counts(tasks) == reachable(tasks)


def test_downstream_counts_of_a_long_chain_keep_no_set_per_task() -> None:
    # a set of descendants per task would hold 20,000 * 20,000 / 2 bits (25 MB)
    tasks = [task(f"t{i}", *([f"t{i - 1}"] if i else [])) for i in range(20_000)]
    dependents = dependents_map(tasks)
    tracemalloc.start()
    try:
        result = downstream_counts(tasks, dependents)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert (result["t0"], result["t12345"], result["t19999"]) == (19_999, 7_654, 0)
    assert peak < 12 * 1024 * 1024, f"{peak:,} bytes"


# Scheduler: dependency-first


def test_dependency_first_starts_the_task_with_most_downstream_work_first() -> None:
    tasks = [
        task("alone"),
        task("one"),
        task("one.1", "one"),
        task("two"),
        task("two.1", "two"),
        task("two.2", "two.1"),
    ]
    s = scheduler("dependency-first", team(llm("a")), tasks)
    for t in ("alone", "one", "two"):
        s.push(t)

    assert s.ready() == ["two", "one", "alone"]
    assert [t for t, _ in dispatch_all(s)] == ["two", "one", "alone"]


def test_dependency_first_breaks_ties_by_the_order_tasks_became_ready() -> None:
    tasks = [task("p"), task("q"), task("r"), task("p.1", "p"), task("r.1", "r")]
    s = scheduler("dependency-first", team(llm("a")), tasks)
    for t in ("p", "q", "r"):
        s.push(t)

    assert s.ready() == ["p", "r", "q"]


def test_dependency_first_assigns_agents_round_robin() -> None:
    tasks = [task(f"t{i}") for i in range(4)]
    s = scheduler("dependency-first", team(llm("a"), llm("b"), llm("c")), tasks)
    for t in tasks:
        s.push(t.id)

    assert dispatch_all(s) == [("t0", "a"), ("t1", "b"), ("t2", "c"), ("t3", "a")]


# Scheduler: round-robin


def test_round_robin_starts_tasks_in_the_order_they_became_ready() -> None:
    tasks = [task("big"), task("small"), *(task(f"after{i}", "big") for i in range(3))]
    s = scheduler("round-robin", team(llm("a")), tasks)
    s.push("small")
    s.push("big")

    assert s.ready() == ["small", "big"]
    assert [t for t, _ in dispatch_all(s)] == ["small", "big"]


def test_round_robin_rotates_over_the_roster_skipping_ineligible_agents() -> None:
    crew = team(llm("a"), llm("b", "x"), llm("c", "x"))
    tasks = [
        task("t1"),
        task("t2", requires=needs("x")),
        task("t3", requires=needs("x")),
        task("t4", requires=needs("x")),
        task("t5"),
    ]
    s = scheduler("round-robin", crew, tasks)
    for t in tasks:
        s.push(t.id)

    assert dispatch_all(s) == [("t1", "a"), ("t2", "b"), ("t3", "c"), ("t4", "b"), ("t5", "c")]
    assert s.round_robin == 0


def test_round_robin_resumes_from_a_carried_position() -> None:
    s = scheduler("round-robin", team(llm("a"), llm("b"), llm("c")), [task("t1")], round_robin=2)
    s.push("t1")

    assert s.next(anyone) == ("t1", "c")
    assert s.round_robin == 0


def test_a_task_with_an_assignee_does_not_move_the_rotation() -> None:
    tasks = [task("t1"), task("t2", assignee="c"), task("t3")]
    s = scheduler("round-robin", team(llm("a"), llm("b"), llm("c")), tasks)
    for t in tasks:
        s.push(t.id)

    assert dispatch_all(s) == [("t1", "a"), ("t2", "c"), ("t3", "b")]


def test_round_robin_skips_an_unavailable_agent() -> None:
    tasks = [task("t1"), task("t2")]
    s = scheduler("round-robin", team(llm("a"), llm("b"), llm("c")), tasks)
    for t in tasks:
        s.push(t.id)

    assert dispatch_all(s, lambda agent: agent != "a") == [("t1", "b"), ("t2", "c")]


# Scheduler: least-busy


def test_least_busy_picks_the_agent_with_fewest_tasks_in_flight() -> None:
    tasks = [task(f"t{i}") for i in range(2)]
    s = scheduler("least-busy", team(llm("a"), llm("b"), llm("c")), tasks)
    for t in tasks:
        s.push(t.id)
    s.started("a")
    s.started("a")
    s.started("c")

    assert s.next(anyone) == ("t0", "b")
    s.started("b")
    s.started("b")
    assert s.next(anyone) == ("t1", "c")


def test_least_busy_breaks_ties_by_tasks_assigned_so_far() -> None:
    tasks = [task("t1")]
    s = scheduler("least-busy", team(llm("a"), llm("b"), llm("c")), tasks)
    s.push("t1")
    s.started("a")
    s.settled("a")
    s.started("c")
    s.settled("c")

    assert s.next(anyone) == ("t1", "b")


def test_least_busy_breaks_full_ties_by_roster_order() -> None:
    tasks = [task("t1"), task("t2")]
    s = scheduler("least-busy", team(llm("a"), llm("b"), llm("c")), tasks)
    for t in tasks:
        s.push(t.id)
    for agent in ("a", "b", "c"):
        s.started(agent)
        s.settled(agent)

    assert s.next(anyone) == ("t1", "a")
    s.started("a")
    assert s.next(anyone) == ("t2", "b")


def test_least_busy_chooses_only_among_eligible_agents() -> None:
    s = scheduler("least-busy", team(llm("a"), llm("b", "x")), [task("t1", requires=needs("x"))])
    s.push("t1")
    s.started("b")
    s.started("b")

    assert s.next(anyone) == ("t1", "b")


# Scheduler: capability-match


def test_capability_match_prefers_the_agent_with_the_required_capabilities() -> None:
    crew = team(
        llm("talker", description="Parses python source and fixes parser bugs"),
        llm("coder", "python"),
    )
    t = task("fix", title="Fix the python parser", requires=needs("python"))
    s = scheduler("capability-match", crew, [t])
    s.push("fix")

    assert s.next(anyone) == ("fix", "coder")


def test_capability_match_counts_capabilities_the_task_text_uses() -> None:
    crew = team(llm("writer", "docs"), llm("coder", "python", "sql"))
    t = task("q", title="Query", description="Write the SQL for the python report")
    s = scheduler("capability-match", crew, [t])
    s.push("q")

    assert s.next(anyone) == ("q", "coder")


def test_capability_match_counts_description_words_the_task_text_uses() -> None:
    crew = team(
        llm("coder", "python", description="Implements features"),
        llm("writer", description="Writes documentation and release notes"),
    )
    t = task("notes", title="Write the release notes")
    s = scheduler("capability-match", crew, [t])
    s.push("notes")

    assert s.next(anyone) == ("notes", "writer")


def test_capability_match_ignores_description_words_shorter_than_four_letters() -> None:
    crew = team(llm("first"), llm("second", description="SQL and Go"))
    t = task("q", title="Write SQL in Go")
    s = scheduler("capability-match", crew, [t])
    s.push("q")

    assert s.next(anyone) == ("q", "first")


def test_capability_match_counts_a_hyphenated_capability_the_task_text_uses() -> None:
    crew = team(llm("generalist"), llm("reviewer", "code-review"))
    t = task("cr", title="Code-review of the parser", description="Do a code-review.")
    s = scheduler("capability-match", crew, [t])
    s.push("cr")

    assert s.next(anyone) == ("cr", "reviewer")


def test_capability_match_gives_a_tie_to_the_least_busy_agent() -> None:
    crew = team(llm("a", "python"), llm("b", "python"))
    t = task("fix", title="Fix the python parser")
    s = scheduler("capability-match", crew, [t])
    s.push("fix")
    s.started("a")

    assert s.next(anyone) == ("fix", "b")


# Scheduler: next and ready


def test_next_skips_a_task_whose_assignee_is_unavailable_and_keeps_it() -> None:
    tasks = [task("busy", "x", "y", assignee="acp"), task("free"), task("x"), task("y")]
    s = scheduler("dependency-first", team(llm("a"), acp("acp")), tasks)
    s.push("busy")
    s.push("free")

    assert s.next(lambda agent: agent != "acp") == ("free", "a")
    assert s.ready() == ["busy"]
    assert len(s) == 1
    assert s.next(lambda agent: agent != "acp") is None
    assert s.next(anyone) == ("busy", "acp")
    assert len(s) == 0


def test_tasks_set_aside_keep_their_place_in_the_queue() -> None:
    tasks = [task("t1", "root", assignee="b"), task("t2", assignee="b"), task("t3"), task("root")]
    s = scheduler("round-robin", team(llm("a"), llm("b")), tasks)
    for t in ("t1", "t2", "t3"):
        s.push(t)

    assert s.next(lambda agent: agent != "b") == ("t3", "a")
    assert s.ready() == ["t1", "t2"]


def test_next_returns_none_when_no_eligible_agent_is_available() -> None:
    s = scheduler("least-busy", team(llm("a"), llm("b", "x")), [task("t1", requires=needs("x"))])
    s.push("t1")

    assert s.next(lambda agent: agent != "b") is None
    assert s.ready() == ["t1"]


def test_next_on_an_empty_queue_is_none() -> None:
    s = scheduler("dependency-first", team(llm("a")), [task("t1")])

    assert s.next(anyone) is None
    assert s.ready() == []


def test_ready_lists_tasks_without_removing_them() -> None:
    tasks = [task("a"), task("b"), task("c", "b")]
    s = scheduler("dependency-first", team(llm("x")), tasks)
    s.push("a")
    s.push("b")

    assert s.ready() == ["b", "a"]
    assert s.ready() == ["b", "a"]
    assert len(s) == 2


# Scale


def chains_with_a_fan_in(chains: int, length: int) -> list[TaskSpec]:
    """``chains`` chains of ``length`` tasks each, and a ``sink`` that depends on
    the last task of every chain."""
    tasks = []
    for c in range(chains):
        for i in range(length):
            tasks.append(task(f"c{c}-{i}", *([f"c{c}-{i - 1}"] if i else [])))
    tasks.append(task("sink", *(f"c{c}-{length - 1}" for c in range(chains))))
    return tasks


def test_downstream_counts_of_five_thousand_tasks_are_exact() -> None:
    tasks = chains_with_a_fan_in(50, 100)
    start = time.perf_counter()

    result = counts(tasks)

    print(f"\ndownstream_counts of {len(tasks)} tasks: {time.perf_counter() - start:.3f}s")
    assert len(tasks) == 5001
    assert len(result) == 5001
    assert result["c0-0"] == 100  # 99 chain successors and the sink
    assert result["c17-50"] == 50
    assert result["c49-99"] == 1
    assert result["sink"] == 0
    assert sum(result.values()) == 50 * sum(range(1, 101))


@pytest.mark.parametrize(
    "strategy", ["dependency-first", "round-robin", "least-busy", "capability-match"]
)
def test_every_task_of_five_thousand_is_dispatched_once_after_its_dependencies(
    strategy: SchedulingStrategy,
) -> None:
    tasks = chains_with_a_fan_in(50, 100)
    dependents = dependents_map(tasks)
    waiting = {t.id: len(t.depends_on) for t in tasks}
    crew = team(llm("a", "python"), llm("b"), llm("c"))
    start = time.perf_counter()
    s = Scheduler(strategy, crew, tasks, dependents)
    for t in tasks:
        if not t.depends_on:
            s.push(t.id)

    order: list[str] = []
    while (nxt := s.next(anyone)) is not None:
        task_id, agent = nxt
        s.started(agent)
        order.append(task_id)
        s.settled(agent)
        for d in dependents[task_id]:
            waiting[d] -= 1
            if waiting[d] == 0:
                s.push(d)

    print(f"\n{strategy}: {len(order)} dispatches in {time.perf_counter() - start:.3f}s")
    assert sorted(order) == sorted(t.id for t in tasks)
    assert len(s) == 0
    position = {task_id: i for i, task_id in enumerate(order)}
    assert all(position[d] < position[t.id] for t in tasks for d in t.depends_on)
    assert order[-1] == "sink"
