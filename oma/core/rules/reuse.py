"""Reuse by content: a run that keeps the outputs of another run's tasks that
would come out the same (``options.reuse``, ``oma run --reuse RUN_ID``).

A task's **content key** is a hash of what its output depends on: its spec
(``title``, ``description``, ``assignee``, ``memory_scope``,
``dependency_payload``), the whole configuration of its agent (provider,
model, system prompt, tools, MCP servers, backend command, ...; a task with
no assignee: of every agent that may take it) and the keys of the upstream
tasks whose outputs it reads. A task whose key equals that of a task the
reference run completed keeps that task's outcome; any other runs, and so
does everything downstream of it (its key changes with its upstream's). A
task that reads the whole shared memory (``memory_scope`` ``all``) always
runs: what it reads depends on what finished before it.

A goal run reuses the reference's plan when it would plan the same: the same
goal, coordinator and planning prompt (the team as the coordinator sees it);
otherwise it plans anew and reuses nothing. Pure: the ``read_fork_source``
activity reads the reference run and calls ``reuse_run``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from oma.core.rules.fork import Assembly, ForkedRun, assemble, parse_source_input
from oma.core.schema.plan import CoordinatorConfig, planning_prompt
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import TeamRunInput, parse_team_run_input
from oma.core.schema.task import TaskSpec, TaskState, TaskStatus
from oma.core.schema.team import TeamConfig, satisfies

SPEC_KEY_FIELDS = ("title", "description", "assignee", "memory_scope", "dependency_payload")
"""The fields of a task's spec its content key covers."""


def key_parts(spec: TaskSpec, team: TeamConfig, upstream: Mapping[str, str]) -> dict[str, Any]:
    """What a task's content key is made of: ``task`` (its spec's fields),
    ``agents`` (agent name -> its whole configuration as JSON: the
    assignee, or every agent that may take a task with none) and
    ``upstream`` (the keys of its dependencies, from ``upstream``; with
    their ids when its ``dependency_payload`` is not ``output``: its prompt
    names them)."""
    if spec.assignee is not None:
        agents = [a for a in team.agents if a.name == spec.assignee]
    else:
        agents = [a for a in team.agents if satisfies(a, spec.requires)]
    keys = [upstream.get(d, "") for d in spec.depends_on]
    return {
        "task": {f: getattr(spec, f) for f in SPEC_KEY_FIELDS},
        "agents": {a.name: a.model_dump(mode="json") for a in agents},
        # a structured payload is a record that names each upstream task's id
        "upstream": keys
        if spec.dependency_payload == "output"
        else [*zip(spec.depends_on, keys, strict=True)],
    }


def content_keys(specs: Sequence[TaskSpec], team: TeamConfig) -> dict[str, str]:
    """Task id -> content key (a SHA-256, hex), in dependency order."""
    by_id = {t.id: t for t in specs}
    keys: dict[str, str] = {}

    def key(task_id: str) -> str:
        if task_id not in keys:
            spec = by_id[task_id]
            for d in spec.depends_on:
                key(d)
            parts = key_parts(spec, team, keys)
            keys[task_id] = _hash(parts)
        return keys[task_id]

    for t in specs:
        key(t.id)
    return keys


def reuse_run(
    payload: dict[str, Any],
    reference_input: dict[str, Any],
    reference: TeamRunResult,
    *,
    workflow_id: str,
    now: datetime,
    by_reference: bool = True,
) -> ForkedRun:
    """The run ``workflow_id`` (its input ``payload``, with ``options.reuse``)
    keeping every task whose content key equals that of a task the reference
    run (``reference_input``, ``reference``) completed. ``resume`` is none
    when a goal run plans anew (``note`` says why): nothing is kept.

    Raises ``InvalidForkError`` (the reference is no ``TeamRun`` input) and
    what a run input's checks raise."""
    inp = parse_team_run_input(payload)
    assert inp.options.reuse is not None
    ref_id = inp.options.reuse.from_
    ref, _ = parse_source_input(ref_id, reference_input)
    if inp.goal is not None:
        why = _plans_anew(inp, ref, reference)
        if why is not None:
            return ForkedRun(input=payload, resume=None, note=why)
        assert reference.plan is not None
        specs = list(reference.plan.tasks)
    else:
        specs = list(inp.given_tasks())
    ref_specs = list(reference.plan.tasks) if ref.goal is not None and reference.plan else []
    ref_specs = ref_specs or list(ref.given_tasks())
    ref_states = {t.id: t for t in reference.tasks}
    keys = content_keys(specs, inp.team)
    ref_keys = content_keys(ref_specs, ref.team)
    done: dict[str, str] = {}  # a reference key -> the task that has it, completed
    for t in ref_specs:
        state = ref_states.get(t.id)
        if state is not None and state.status == TaskStatus.COMPLETED:
            done.setdefault(ref_keys[t.id], t.id)
    kept: dict[str, TaskState] = {}
    reasons: dict[str, str] = {}
    ref_by_id = {t.id: t for t in ref_specs}
    for t in _dependencies_first(specs):
        found = done.get(keys[t.id])
        if t.memory_scope == "all":
            reasons[t.id] = "it reads the whole shared memory (memory_scope 'all')"
        elif found is not None and all(d in kept for d in t.depends_on):
            kept[t.id] = ref_states[found]
        else:
            reasons[t.id] = _why(t, kept, inp.team, ref, ref_by_id, ref_states, ref_id)
    parts = Assembly(payload, inp.goal, specs, kept, reasons, reference, ref_id, None)
    return assemble(parts, workflow_id=workflow_id, now=now, by_reference=by_reference)


def _dependencies_first(specs: Sequence[TaskSpec]) -> list[TaskSpec]:
    """``specs`` with every task after its dependencies (the graph was checked: no cycle)."""
    by_id = {t.id: t for t in specs}
    order: list[TaskSpec] = []
    seen: set[str] = set()
    for root in specs:
        stack = [(root, False)]
        while stack:
            task, expanded = stack.pop()
            if task.id in seen:
                continue
            if expanded:
                seen.add(task.id)
                order.append(task)
                continue
            stack.append((task, True))
            stack.extend((by_id[d], False) for d in reversed(task.depends_on) if d not in seen)
    return order


def _plans_anew(inp: TeamRunInput, ref: TeamRunInput, reference: TeamRunResult) -> str | None:
    """Why a goal run cannot reuse the reference's plan, or ``None``."""
    assert inp.goal is not None
    if ref.goal is None or reference.plan is None:
        return "the reference run has no plan: the run plans anew and reuses nothing"
    mine, theirs = inp.coordinator or CoordinatorConfig(), ref.coordinator or CoordinatorConfig()
    asked = planning_prompt(inp.team, inp.goal, mine.instructions)
    before = planning_prompt(ref.team, ref.goal, theirs.instructions)
    if asked != before or mine.model_dump() != theirs.model_dump():
        changed = [
            name
            for name, differs in (
                ("goal", inp.goal != ref.goal),
                ("coordinator", mine.model_dump() != theirs.model_dump()),
                ("team as the coordinator sees it", asked != before and inp.goal == ref.goal),
            )
            if differs
        ]
        return (
            f"the {', '.join(changed)} changed: the run plans anew and reuses nothing of the "
            "reference run"
        )
    return None


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
    return "; ".join(notes) or "its upstream outputs differ"


def _hash(parts: Mapping[str, Any]) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
