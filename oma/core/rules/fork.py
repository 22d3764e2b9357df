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

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from oma.core.contracts.fork import ForkedRun
from oma.core.contracts.workflow_ids import task_workflow_id
from oma.core.rules.content_key import made_keys, made_plan_key
from oma.core.rules.payload_fit import SHORT_OUTPUT_BYTES
from oma.core.rules.team_run_state import read_next
from oma.core.schema.approvals import check_dispatch_names
from oma.core.schema.dag import dependents_map, transitive_dependents, validate_task_graph
from oma.core.schema.errors import DagValidationError, InvalidForkError, OMAError
from oma.core.schema.fork import ForkInput, is_fork_input
from oma.core.schema.limits import check_child_ids, cut_text
from oma.core.schema.plan import COORDINATOR, PlanArtifact
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import TeamRunInput, parse_team_run_input
from oma.core.schema.run_state import TeamRunState
from oma.core.schema.task import ReusedFrom, TaskSpec, TaskState, TaskStatus
from oma.core.schema.team import TeamConfig, check_assignments
from oma.core.schema.validation import did_you_mean


def fork_run(
    fork: ForkInput,
    source_input: dict[str, Any],
    source: TeamRunResult,
    *,
    workflow_id: str,
    now: datetime,
    by_reference: bool = True,
    source_execution: str | None = None,
    stored: bool = False,
) -> ForkedRun:
    """The fork ``workflow_id`` of the run ``fork.fork.run_id``, whose input
    was ``source_input`` (the JSON its start recorded) and whose result (or
    state so far) is ``source``; ``source_execution`` the Temporal run id of
    the execution read, which each task kept from it names, and recorded
    model turns (``--models recorded``) are replayed from. ``by_reference``:
    the kept outputs over ``SHORT_OUTPUT_BYTES`` that no task to run again
    reads leave the state, by reference to their ``AgentRun`` (a source read
    from the server; one given inline keeps them, its children may be
    elsewhere). Each kept task carries the content key it was made with,
    and a kept plan its plan key (``oma.core.rules.content_key``).

    Raises ``InvalidForkError`` (an unknown task, with the nearest id; a task
    to run again whose assignee the team lacks; a goal run without a plan;
    nothing to run again), and what a run input's checks raise
    (``InvalidRunInputError``, ``AssigneeRequirementsMismatchError``,
    ``NoEligibleAgentError``).
    """
    source_id = fork.fork.run_id
    src, payload = parse_source_input(source_id, source_input)
    given = fork.payload()
    for key in ("team", "coordinator"):
        if key in given:
            payload[key] = given[key]
    options = {**payload.get("options", {}), **given.get("options", {})}
    options.pop("plan_only", None)  # a planned run's fork runs its plan
    models = options.get("models")
    if models == "recorded" or (isinstance(models, dict) and not models.get("from")):
        # a fork replays its source's model turns unless told another run:
        # the execution it read, not whichever is the latest when a turn asks
        recorded = {**(models if isinstance(models, dict) else {}), "from": source_id}
        if source_execution is not None:
            recorded["temporal_run_id"] = source_execution
        options["models"] = recorded
    payload["options"] = options
    specs = _specs(source_id, src, source)
    checked_graph(specs, src.team, f"run {source_id!r}")
    states = {t.id: t for t in source.tasks}
    keys = made_keys(specs, src.team, states)  # before edits: what made the source's work
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
        if "plan" in payload:
            payload["plan"] = {**payload["plan"], "tasks": tasks}
        else:  # (tasks made from a template are written out: one of them changed)
            payload.pop("task_template", None)
            payload.pop("items", None)
            payload["tasks"] = tasks
    roots = _roots(fork, specs, states)
    rerun = _rerun(specs, states, [*roots, *fork.fork.edit])
    if not rerun and (src.goal is None or source.final_output is not None):
        raise InvalidForkError(
            f"every task of run {source_id!r} completed: nothing to run again; name the "
            "tasks to run again (oma fork --from TASK, 'rerun'), or edit one (--set)"
        )
    reasons = _fork_reasons(fork, specs, states, rerun, source_id)
    kept = {t.id: states[t.id] for t in specs if t.id not in rerun}
    # an edited plan is no coordinator's: nothing planned it
    plan_key = made_plan_key(src, source) if src.goal is not None and not fork.fork.edit else None
    parts = Assembly(
        payload,
        src.goal,
        specs,
        kept,
        reasons,
        source,
        source_id,
        source_id,
        execution=source_execution,
        keys=keys,
        plan_content_key=plan_key,
    )
    return assemble(
        parts, workflow_id=workflow_id, now=now, by_reference=by_reference, stored=stored
    )


class Assembly(NamedTuple):
    """What a fork (or a run that reuses another's work) is made of."""

    payload: dict[str, Any]
    """The run's input as JSON, without ``resume``."""
    goal: str | None
    specs: list[TaskSpec]
    kept: dict[str, TaskState]
    """Task id -> the state of the task of ``source`` whose outcome it keeps."""
    reasons: dict[str, str]
    """Task id -> why it runs again: every task not kept."""
    source: TeamRunResult
    source_id: str
    forked_from: str | None
    execution: str | None = None
    """The Temporal run id of the execution of ``source_id`` read."""
    keys: Mapping[str, str | None] = {}
    """The source's task id -> the content key its outcome was made with."""
    plan_content_key: str | None = None
    """A goal run keeping the source's plan: the key it was made with."""


def assemble(
    parts: Assembly,
    *,
    workflow_id: str,
    now: datetime,
    by_reference: bool = True,
    stored: bool = False,
) -> ForkedRun:
    """The run ``workflow_id`` of ``parts``, checked: its tasks kept
    ``completed`` with ``reused_from`` (their outputs by reference unless a
    task to run again reads them, with ``by_reference``), the others to run
    again; its size against its budget (``stored``: its payloads go to a
    payload store, ``limits.state_budget``). Raises ``InvalidForkError`` (a
    task to run again on an agent the team lacks) and what a run input's
    checks raise."""
    payload, specs, kept = parts.payload, parts.specs, parts.kept
    rerun = {t.id for t in specs if t.id not in kept}
    team = TeamConfig.model_validate(payload["team"])
    again = [t for t in specs if t.id in rerun]
    _check_assignees(again, team)
    check_assignments(again, team)
    task_states = [_rerun_state(t, rerun) if t.id in rerun else _kept(parts, t.id) for t in specs]
    read = read_next(specs, task_states, everything=parts.goal is not None) - rerun
    if by_reference:
        for task_state in task_states:
            if task_state.id not in read:
                _by_reference(task_state)
    source = parts.source
    plan = None
    if parts.goal is not None and source.plan is not None:
        plan = PlanArtifact(version=source.plan.version, goal=source.plan.goal, tasks=specs)
    result = TeamRunResult(
        success=False,
        status="running",
        goal=parts.goal,
        tasks=task_states,
        plan=plan,
        forked_from=parts.forked_from,
        plan_content_key=parts.plan_content_key if plan is not None else None,
    )
    turns = _planning_turns(source) if plan is not None else 0
    state = TeamRunState(result=result, started_at=now, coordinator_turns=turns)
    forked = parse_team_run_input(payload).model_copy(update={"resume": state})
    forked.check_size(specs, stored=stored)
    check_dispatch_names(forked.options.approvals, specs, team)
    check_child_ids(workflow_id, rerun)
    # what a task that never started (skipped, blocked, awaiting approval) would cost is not known
    known = {t.id: t for t in source.tasks if t.attempts or t.status == TaskStatus.COMPLETED}
    order = [t.id for t in specs if t.id in rerun]
    costs = [known[t].cost_usd if t in known else None for t in order]
    return ForkedRun(
        input=payload,
        resume=state,
        reused=[t.id for t in specs if t.id not in rerun],
        rerun=[t.id for t in specs if t.id in rerun],
        warnings=_dropped_agents(task_states, team, parts.source_id),
        read=[t.id for t in specs if t.id in read],
        reasons={t.id: parts.reasons.get(t.id, "") for t in again},
        estimated_cost_usd=sum(c for c in costs if c is not None),
        cost_unknown=[t for t, c in zip(order, costs, strict=True) if c is None],
    )


def _fork_reasons(
    fork: ForkInput,
    specs: Sequence[TaskSpec],
    states: dict[str, TaskState],
    rerun: set[str],
    source_id: str,
) -> dict[str, str]:
    named = set(fork.fork.rerun or [])
    reasons: dict[str, str] = {}
    for t in specs:
        if t.id not in rerun:
            continue
        state = states.get(t.id)
        if t.id in fork.fork.edit:
            fields = ", ".join(fork.fork.edit[t.id].model_dump(exclude_unset=True))
            reasons[t.id] = f"edited: {fields}"
        elif state is None or state.status != TaskStatus.COMPLETED:
            status = state.status.value if state is not None else "not started"
            reasons[t.id] = f"{status} in run {source_id}"
        elif t.id in named:
            reasons[t.id] = "named to run again"
        else:
            upstream = next(d for d in t.depends_on if d in rerun)
            reasons[t.id] = f"depends on {upstream}, which runs again"
    return reasons


def checked_graph(specs: Sequence[TaskSpec], team: TeamConfig, whose: str) -> None:
    """Check the task graph of a run read back (a source given inline is the
    user's JSON, a plan a model's): ``DagValidationError``
    (``INVALID_TASK_GRAPH``) naming ``whose`` it is, as a run's own."""
    try:
        validate_task_graph(specs, (a.name for a in team.agents))
    except DagValidationError as err:
        raise DagValidationError(f"the task graph of {whose} is invalid: {err.message}") from None


def parse_source_input(source_id: str, raw: dict[str, Any]) -> tuple[TeamRunInput, dict[str, Any]]:
    """The source's input, parsed, and as JSON without ``resume``. Raises
    ``InvalidForkError`` when it is a fork's that never read its own source,
    or no ``TeamRun`` input."""
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


NAMED_IDS = 20
"""How many of the source's task ids an unknown task's error lists."""

MAX_SHOWN_ID_CHARS = 200
"""The most characters of an unknown task id its error shows (the input is hostile)."""


def _check_known(task_id: str, ids: Sequence[str], source_id: str) -> None:
    if task_id not in ids:
        raise InvalidForkError(no_task_message(source_id, task_id, ids))


def no_task_message(run_id: str, task_id: str, ids: Sequence[str]) -> str:
    """``run 'r' has no task 'x' (did you mean 'y'?); its tasks: a, b (and 7
    more)``: at most ``NAMED_IDS`` of the run's task ids ``ids`` named, and
    ``task_id`` (a user's input) cut to ``MAX_SHOWN_ID_CHARS``."""
    meant = did_you_mean(task_id, sorted(ids))
    more = f" (and {len(ids) - NAMED_IDS} more)" if len(ids) > NAMED_IDS else ""
    return (
        f"run {run_id!r} has no task {cut_text(task_id, MAX_SHOWN_ID_CHARS)!r}"
        + (f" (did you mean {meant!r}?)" if meant else "")
        + f"; its tasks: {', '.join(ids[:NAMED_IDS]) or 'none'}{more}"
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
        f"task {t.id!r} runs again on agent {cut_text(t.assignee, MAX_SHOWN_ID_CHARS)!r}, "
        "which the fork's team does not have"
        + (f" (did you mean {m!r}?)" if (m := did_you_mean(t.assignee, names)) else "")
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


def _kept(parts: Assembly, task_id: str) -> TaskState:
    """A task the fork keeps, ``task_id``: its outcome as the source's task
    has it, marked with the run (and execution) that ran it and the key it
    was made with (a task the source kept itself names its own origin, whose
    ``AgentRun`` holds the output, and carries its key)."""
    source = parts.kept[task_id]
    kept = source.model_copy(update={"id": task_id})  # (shallow: only its own fields change)
    kept.reused_from = kept.reused_from or ReusedFrom(
        run_id=parts.source_id,
        task_id=source.id,
        temporal_run_id=parts.execution,
        content_key=parts.keys.get(source.id),
    )
    if kept.output_ref is not None:
        kept.output_ref = origin_ref(kept)
    return kept


def origin_ref(state: TaskState) -> str:
    """The ``AgentRun`` whose result holds a kept task's output."""
    assert state.reused_from is not None
    return task_workflow_id(state.reused_from.run_id, state.reused_from.task_id)


def _by_reference(state: TaskState) -> None:
    """A kept output by reference to its ``AgentRun``, when it is longer than
    ``SHORT_OUTPUT_BYTES`` and its execution is known (``output_run_id``):
    a shorter one takes about as much room inline, and a reference without
    its execution would read whatever run last took the workflow id."""
    output = state.output
    if (
        output is not None
        and state.reused_from is not None
        and state.output_run_id is not None
        and len(output.encode()) > SHORT_OUTPUT_BYTES
    ):
        state.output_ref, state.output_bytes = origin_ref(state), len(output.encode())
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
