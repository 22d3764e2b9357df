"""A fork: a new ``TeamRun`` that keeps what a finished (or running) run did
and runs the rest again.

``fork_run`` turns a source run (its input and its result, or its state so
far) and a ``ForkInput`` into the input the fork goes on with: the
source's team, tasks or plan, goal, coordinator and options (or the fork's
replacements), and a ``resume`` state in which every task kept is
``completed`` with ``reused_from`` and its output by reference to the
``AgentRun`` that produced it, and every task to run again is ``pending``
(or ``blocked`` behind another task to run again). The fork then runs as any
resumed run does. Pure: the ``read_fork_source`` activity reads the source
and calls it, so a fork replays from its history.

What runs again: the tasks named (``rerun``; by default every task that did
not complete), the tasks edited, every task that did not complete in the
source (there is no output to keep), and everything downstream of them. A
goal run keeps its plan; its synthesis runs again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from oma.core.contracts.workflow_ids import task_workflow_id
from oma.core.rules.scheduling import check_assignments
from oma.core.rules.team_run_state import TeamRunState, read_next
from oma.core.schema.approvals import check_dispatch_names
from oma.core.schema.dag import dependents_map, transitive_dependents
from oma.core.schema.errors import InvalidForkError, OMAError
from oma.core.schema.fork import ForkInput, is_fork_input
from oma.core.schema.limits import check_child_ids
from oma.core.schema.plan import COORDINATOR, PlanArtifact
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import TeamRunInput, parse_team_run_input
from oma.core.schema.task import ReusedFrom, TaskSpec, TaskState, TaskStatus
from oma.core.schema.team import TeamConfig
from oma.core.schema.validation import did_you_mean


class ReadForkSourceInput(BaseModel):
    """Input of the ``read_fork_source`` activity."""

    workflow_id: str = Field(description="The fork's own workflow id.")
    fork: dict[str, Any] = Field(description="The fork's input as given (ForkInput.payload).")


class ForkedRun(BaseModel):
    """Output of the ``read_fork_source`` activity (and of ``fork_run``): the
    fork as it goes on."""

    input: dict[str, Any] = Field(
        description="The fork's TeamRun input without 'resume': the source's, with the "
        "fork's team, coordinator, options and task edits."
    )
    resume: TeamRunState = Field(description="The state the fork starts from.")
    reused: list[str] = Field(default_factory=list, description="The tasks kept, in order.")
    rerun: list[str] = Field(default_factory=list, description="The tasks to run again.")
    warnings: list[str] = Field(default_factory=list)
    read: list[str] = Field(
        default_factory=list,
        description="The kept tasks whose outputs the tasks to run again (or a goal run's "
        "synthesis) read: carried in the state, not by reference.",
    )


def fork_run(
    fork: ForkInput,
    source_input: dict[str, Any],
    source: TeamRunResult,
    *,
    workflow_id: str,
    now: datetime,
    by_reference: bool = True,
) -> ForkedRun:
    """The fork ``workflow_id`` of the run ``fork.fork.run_id``, whose input
    was ``source_input`` (the JSON its start recorded) and whose result (or
    state so far) is ``source``. ``by_reference``: the kept outputs that no
    task to run again reads leave the state, by reference to their
    ``AgentRun`` (a source read from the server; one given inline keeps
    them, its children may be elsewhere).

    Raises ``InvalidForkError`` (an unknown task, with the nearest id; a task
    to run again whose assignee the team lacks; a goal run without a plan;
    nothing to run again), and what a run input's checks raise
    (``InvalidRunInputError``, ``AssigneeRequirementsMismatchError``,
    ``NoEligibleAgentError``).
    """
    source_id = fork.fork.run_id
    src, payload = _source_input(source_id, source_input)
    given = fork.payload()
    for key in ("team", "coordinator"):
        if key in given:
            payload[key] = given[key]
    options = {**payload.get("options", {}), **given.get("options", {})}
    options.pop("plan_only", None)  # a planned run's fork runs its plan
    payload["options"] = options
    specs = _specs(source_id, src, source)
    states = {t.id: t for t in source.tasks}
    ids = [t.id for t in specs]
    for task_id in [*(fork.fork.rerun or []), *fork.fork.edit]:
        _check_known(task_id, ids, source_id)
    for task_id, edit in fork.fork.edit.items():
        n = ids.index(task_id)
        fields = specs[n].model_dump(mode="json", exclude_unset=True)
        changed = edit.model_dump(mode="json", exclude_unset=True)
        specs[n] = TaskSpec.model_validate(fields | changed)
    if fork.fork.edit and src.goal is None:
        tasks = [t.model_dump(mode="json", exclude_unset=True) for t in specs]
        if "tasks" in payload:
            payload["tasks"] = tasks
        else:
            payload["plan"] = {**payload["plan"], "tasks": tasks}
    rerun = _rerun(specs, states, [*_roots(fork, specs, states), *fork.fork.edit])
    if not rerun and (src.goal is None or source.final_output is not None):
        raise InvalidForkError(
            f"every task of run {source_id!r} completed: nothing to run again; name the "
            "tasks to run again (oma fork --from TASK, 'rerun'), or edit one (--set)"
        )
    team = TeamConfig.model_validate(payload["team"])
    again = [t for t in specs if t.id in rerun]
    _check_assignees(again, team)
    check_assignments(again, team)
    task_states = [
        _rerun_state(t, rerun) if t.id in rerun else _kept(states[t.id], source_id) for t in specs
    ]
    read = read_next(specs, task_states, everything=src.goal is not None) - rerun
    if by_reference:
        for task_state in task_states:
            if task_state.id not in read:
                _by_reference(task_state)
    result = TeamRunResult(
        success=False,
        status="running",
        goal=src.goal,
        tasks=task_states,
        plan=PlanArtifact(version=source.plan.version, goal=source.plan.goal, tasks=specs)
        if src.goal is not None and source.plan is not None
        else None,
        forked_from=source_id,
    )
    state = TeamRunState(result=result, started_at=now, coordinator_turns=_planning_turns(source))
    forked = parse_team_run_input(payload).model_copy(update={"resume": state})
    forked.check_size(specs)
    check_dispatch_names(forked.options.approvals, specs, team)
    check_child_ids(workflow_id, rerun)
    return ForkedRun(
        input=payload,
        resume=state,
        reused=[t.id for t in specs if t.id not in rerun],
        rerun=[t.id for t in specs if t.id in rerun],
        warnings=_dropped_agents(task_states, team, source_id),
        read=[t.id for t in specs if t.id in read],
    )


def _source_input(source_id: str, raw: dict[str, Any]) -> tuple[TeamRunInput, dict[str, Any]]:
    """The source's input, parsed, and as JSON without ``resume``."""
    if is_fork_input(raw):
        raise InvalidForkError(
            f"run {source_id!r} is a fork that has not read its own source yet: fork it once "
            "it runs its tasks"
        )
    payload = {k: v for k, v in raw.items() if k != "resume"}
    try:
        return parse_team_run_input(payload), payload
    except OMAError as err:
        raise InvalidForkError(
            f"the input of run {source_id!r} does not read as a TeamRun input: {err.message}"
        ) from None


def _specs(source_id: str, src: TeamRunInput, source: TeamRunResult) -> list[TaskSpec]:
    if src.goal is None:
        return list(src.given_tasks())
    if source.plan is None:
        raise InvalidForkError(
            f"goal run {source_id!r} has no plan to fork (it ended before its coordinator "
            "planned): run its goal again"
        )
    return list(source.plan.tasks)


def _check_known(task_id: str, ids: Sequence[str], source_id: str) -> None:
    if task_id not in ids:
        meant = did_you_mean(task_id, sorted(ids))
        raise InvalidForkError(
            f"run {source_id!r} has no task {task_id!r}"
            + (f" (did you mean {meant!r}?)" if meant else "")
            + f"; its tasks: {', '.join(ids)}"
        )


def _roots(fork: ForkInput, specs: Sequence[TaskSpec], states: dict[str, TaskState]) -> list[str]:
    """The tasks named to run again, and those that did not complete (their
    outputs do not exist)."""
    named = fork.fork.rerun or []
    unfinished = [
        t.id for t in specs if t.id not in states or states[t.id].status != TaskStatus.COMPLETED
    ]
    return [*named, *unfinished]


def _rerun(
    specs: Sequence[TaskSpec], states: dict[str, TaskState], roots: Iterable[str]
) -> set[str]:
    """``roots`` and every task downstream of one."""
    dependents = dependents_map(specs)
    rerun: set[str] = set()
    for root in roots:
        if root not in rerun:
            rerun.add(root)
            rerun.update(transitive_dependents(root, dependents))
    return rerun


def _check_assignees(again: Sequence[TaskSpec], team: TeamConfig) -> None:
    names = sorted(a.name for a in team.agents)
    missing = [
        f"task {t.id!r} runs again on agent {t.assignee!r}, which the fork's team does not "
        "have" + (f" (did you mean {m!r}?)" if (m := did_you_mean(t.assignee, names)) else "")
        for t in again
        if t.assignee is not None and team.agent(t.assignee) is None
    ]
    if missing:
        raise InvalidForkError(
            f"{'; '.join(missing)} (team {team.name!r}: {', '.join(names)}); give it to an "
            "agent of the team (--set TASK.assignee=AGENT) or keep that agent (--team)"
        )


def _rerun_state(spec: TaskSpec, rerun: set[str]) -> TaskState:
    """A task to run again: ``pending``, or ``blocked`` while another task
    it depends on runs again."""
    blocked = any(d in rerun for d in spec.depends_on)
    return TaskState(
        id=spec.id,
        title=spec.title,
        description=spec.description,
        depends_on=spec.depends_on,
        assignee=spec.assignee,
        status=TaskStatus.BLOCKED if blocked else TaskStatus.PENDING,
    )


def _kept(source: TaskState, source_id: str) -> TaskState:
    """A task the fork keeps: its outcome as the source has it, marked with
    the run that ran it (a task the source kept itself names its own
    origin, whose ``AgentRun`` holds the output)."""
    kept = source.model_copy()  # (shallow: only its own fields change)
    kept.reused_from = kept.reused_from or ReusedFrom(run_id=source_id, task_id=source.id)
    if kept.output_ref is not None:
        kept.output_ref = origin_ref(kept)
    return kept


def origin_ref(state: TaskState) -> str:
    """The ``AgentRun`` whose result holds a kept task's output."""
    assert state.reused_from is not None
    return task_workflow_id(state.reused_from.run_id, state.reused_from.task_id)


def _by_reference(state: TaskState) -> None:
    if state.output is not None and state.reused_from is not None:
        state.output_ref, state.output_bytes = origin_ref(state), len(state.output.encode())
        state.output = None


def _planning_turns(source: TeamRunResult) -> int:
    """The coordinator turns of a goal run's planning (a scripted coordinator
    goes on from there): all its turns but the synthesis's one."""
    coordinator = source.agent_results.get(COORDINATOR)
    if coordinator is None:
        return 0
    return max(coordinator.turns - (1 if source.final_output is not None else 0), 0)


def _dropped_agents(states: Iterable[TaskState], team: TeamConfig, source_id: str) -> list[str]:
    """A warning for each agent a kept task ran on that the fork's team lacks."""
    dropped: dict[str, list[str]] = {}
    for state in states:
        if state.reused_from is not None and state.assignee and team.agent(state.assignee) is None:
            dropped.setdefault(state.assignee, []).append(state.id)
    return [
        f"agent {agent!r} is not in the fork's team: its task(s) {', '.join(tasks)} keep "
        f"their outputs from run {source_id!r} and do not run again"
        for agent, tasks in dropped.items()
    ]
