"""Reuse by content: a run that keeps the outputs of another run's tasks that
would come out the same (``options.reuse``, ``oma run --reuse RUN_ID``).

A task whose content key (``oma.core.rules.content_key``) equals the key of
the inputs that made a task the reference run completed keeps that task's
outcome; any other runs, and so does everything downstream of it (its key
changes with its upstream's). The reference's keys are the ones its work was
made with: a task it kept from another run (it is a fork, or reused) is
matched on the key carried from there, never on the reference's own input. A
task that reads the whole shared memory (``memory_scope`` ``all``) always
runs: what it reads depends on what finished before it.

A goal run reuses the reference's plan when it would plan the same: its
plan key (goal, coordinator, planning prompt) equals the one the reference's
plan was made with; otherwise it plans anew and reuses nothing. Pure: the
``read_fork_source`` activity reads the reference run and calls
``reuse_run``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from oma.core.contracts.fork import ForkedRun
from oma.core.rules.content_key import (
    SPEC_KEY_FIELDS,
    content_keys,
    dependencies_first,
    key_parts,
    made_keys,
    made_plan_key,
    plan_key,
)
from oma.core.rules.fork import Assembly, assemble, checked_graph, parse_source_input
from oma.core.schema.plan import CoordinatorConfig, planning_prompt
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import TeamRunInput, parse_team_run_input
from oma.core.schema.task import TaskSpec, TaskState, TaskStatus
from oma.core.schema.team import TeamConfig


def reuse_run(
    payload: dict[str, Any],
    reference_input: dict[str, Any],
    reference: TeamRunResult,
    *,
    workflow_id: str,
    now: datetime,
    by_reference: bool = True,
    reference_execution: str | None = None,
    stored: bool = False,
) -> ForkedRun:
    """The run ``workflow_id`` (its input ``payload``, with ``options.reuse``)
    keeping every task whose content key equals the made key of a task the
    reference run (``reference_input``, ``reference``; its execution
    ``reference_execution``, which each kept task names) completed.
    ``resume`` is none when a goal run plans anew (``note`` says why):
    nothing is kept.

    Raises ``InvalidForkError`` (the reference is no ``TeamRun`` input) and
    what a run input's checks raise."""
    inp = parse_team_run_input(payload)
    assert inp.options.reuse is not None
    ref_id = inp.options.reuse.from_
    ref, _ = parse_source_input(ref_id, reference_input)
    kept_plan = None
    if inp.goal is not None:
        why = _plans_anew(inp, ref, reference, ref_id)
        if why is not None:
            return ForkedRun(input=payload, resume=None, note=why)
        assert reference.plan is not None
        specs = list(reference.plan.tasks)
        kept_plan = plan_key(inp)
    else:
        specs = list(inp.given_tasks())
    ref_specs = list(reference.plan.tasks) if ref.goal is not None and reference.plan else []
    ref_specs = ref_specs or list(ref.given_tasks())
    checked_graph(specs, inp.team, "this run")
    checked_graph(ref_specs, ref.team, f"run {ref_id!r}")
    ref_states = {t.id: t for t in reference.tasks}
    keys = content_keys(specs, inp.team)
    ref_keys = made_keys(ref_specs, ref.team, ref_states)
    done: dict[str, str] = {}  # a made key -> the reference's task that has it, completed
    for t in ref_specs:
        state, key = ref_states.get(t.id), ref_keys[t.id]
        if state is not None and state.status == TaskStatus.COMPLETED and key is not None:
            done.setdefault(key, t.id)
    kept: dict[str, TaskState] = {}
    reasons: dict[str, str] = {}
    ref_by_id = {t.id: t for t in ref_specs}
    for t in dependencies_first(specs):
        found = done.get(keys[t.id])
        if t.memory_scope == "all":
            reasons[t.id] = "it reads the whole shared memory (memory_scope 'all')"
        elif found is not None and all(d in kept for d in t.depends_on):
            kept[t.id] = ref_states[found]
        else:
            reasons[t.id] = _why(t, kept, inp.team, ref, ref_by_id, ref_states, ref_id)
    parts = Assembly(
        payload,
        inp.goal,
        specs,
        kept,
        reasons,
        reference,
        ref_id,
        None,
        execution=reference_execution,
        keys=ref_keys,
        plan_content_key=kept_plan,
    )
    return assemble(
        parts, workflow_id=workflow_id, now=now, by_reference=by_reference, stored=stored
    )


def _plans_anew(
    inp: TeamRunInput, ref: TeamRunInput, reference: TeamRunResult, ref_id: str
) -> str | None:
    """Why a goal run cannot reuse the reference's plan, or ``None``."""
    assert inp.goal is not None
    if ref.goal is None or reference.plan is None:
        return "the reference run has no plan: the run plans anew and reuses nothing"
    if made_plan_key(ref, reference) == plan_key(inp):
        return None
    mine, theirs = inp.coordinator or CoordinatorConfig(), ref.coordinator or CoordinatorConfig()
    asked = planning_prompt(inp.team, inp.goal, mine.instructions)
    before = planning_prompt(ref.team, ref.goal, theirs.instructions)
    changed = [
        name
        for name, differs in (
            ("goal", inp.goal != ref.goal),
            ("coordinator", mine.model_dump() != theirs.model_dump()),
            ("team as the coordinator sees it", asked != before and inp.goal == ref.goal),
        )
        if differs
    ]
    if changed:
        return (
            f"the {', '.join(changed)} changed: the run plans anew and reuses nothing of the "
            "reference run"
        )
    origin = f"run {reference.forked_from}" if reference.forked_from else "another run"
    return (
        f"run {ref_id} kept its plan from {origin}, where it was made with other inputs (or "
        "edited it): the run plans anew and reuses nothing of the reference run"
    )


def _why(
    spec: TaskSpec,
    kept: Mapping[str, TaskState],
    team: TeamConfig,
    ref: TeamRunInput,
    ref_specs: Mapping[str, TaskSpec],
    ref_states: Mapping[str, TaskState],
    ref_id: str,
) -> str:
    """Why ``spec`` runs again: what differs from the reference's task of the same id."""
    upstream = next((d for d in spec.depends_on if d not in kept), None)
    if upstream is not None:
        return f"depends on {upstream}, which runs again"
    before = ref_specs.get(spec.id)
    state = ref_states.get(spec.id)
    if before is None:
        return f"new: run {ref_id} has no task {spec.id!r} with the same content"
    if state is None or state.status != TaskStatus.COMPLETED:
        status = state.status.value if state is not None else "not started"
        return f"{status} in run {ref_id}"
    changed = [f for f in SPEC_KEY_FIELDS if getattr(spec, f) != getattr(before, f)]
    if changed:
        return f"task changed: {', '.join(changed)}"
    if spec.dependency_payload != "output" and spec.depends_on != before.depends_on:
        return (
            f"the ids of its upstream tasks changed (its dependency_payload "
            f"{spec.dependency_payload!r} shows them)"
        )
    mine = key_parts(spec, team, {})["agents"]
    theirs = key_parts(before, ref.team, {})["agents"]
    notes = []
    for name in sorted(set(mine) | set(theirs)):
        if name not in theirs:
            notes.append(f"agent {name!r} is new")
        elif name not in mine:
            notes.append(f"agent {name!r} is gone")
        elif mine[name] != theirs[name]:
            fields = [
                k
                for k in sorted(set(mine[name]) | set(theirs[name]))
                if mine[name].get(k) != theirs[name].get(k)
            ]
            notes.append(f"agent {name!r} changed: {', '.join(fields)}")
    if notes:
        return "; ".join(notes)
    origin = state.reused_from
    if origin is not None and origin.content_key is None:
        return (
            f"run {ref_id} kept it from run {origin.run_id} without the key of what made it "
            "(a run from before keys were carried)"
        )
    if origin is not None:
        return f"its output in run {ref_id} was made in run {origin.run_id} with other inputs"
    return "its upstream outputs differ"
