"""Content keys: what a task's output (and a goal run's plan) depends on, hashed.

A task's **content key** is a SHA-256 (hex) of its spec (``title``,
``description``, ``assignee``, ``memory_scope``, ``dependency_payload``), the
whole configuration of its agent (a task with no assignee: of every agent
that may take it) and the keys of the upstream tasks whose outputs it reads.
A plan's is a SHA-256 of what its coordinator was asked: the goal, the
coordinator's configuration and the planning prompt (which shows the team as
the coordinator sees it).

A key is the key of the inputs that **made** an output: a task that a run ran
has the key of that run's input; a task a run kept from another (a fork, a
reuse) carries the key it was made with (``ReusedFrom.content_key``), from run
to run, and a task downstream of it is keyed on that carried key. A kept plan
carries its key the same way (``TeamRunResult.plan_content_key``). Reuse by
content (``oma.core.rules.reuse``) compares a new run's keys with a reference
run's made keys; a key that is not known (a run kept the work before keys
were carried, or edited a kept plan) matches nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from oma.core.schema.plan import CoordinatorConfig, planning_prompt
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import TeamRunInput
from oma.core.schema.task import TaskSpec, TaskState
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
    """Task id -> content key (a SHA-256, hex) of a run about to run every
    task of ``specs`` with ``team``."""
    keys: dict[str, str] = {}
    for spec in dependencies_first(specs):
        keys[spec.id] = _hash(key_parts(spec, team, keys))
    return keys


def made_keys(
    specs: Sequence[TaskSpec], team: TeamConfig, states: Mapping[str, TaskState]
) -> dict[str, str | None]:
    """Task id -> the key of the inputs that made the task's outcome in a
    run of ``specs`` with ``team`` whose task states are ``states``: a task
    the run kept from another run carries its key (``reused_from``;
    ``None`` when the run kept it before keys were carried); a task it ran
    has the key of ``specs`` and ``team``, on its upstream tasks' made keys
    (``None`` when one of those is unknown)."""
    keys: dict[str, str | None] = {}
    for spec in dependencies_first(specs):
        state = states.get(spec.id)
        if state is not None and state.reused_from is not None:
            keys[spec.id] = state.reused_from.content_key
            continue
        upstream = {d: keys.get(d) for d in spec.depends_on}
        known = {d: k for d, k in upstream.items() if k is not None}
        keys[spec.id] = _hash(key_parts(spec, team, known)) if len(known) == len(upstream) else None
    return keys


def plan_key(inp: TeamRunInput) -> str:
    """The key of the plan the coordinator of the goal run ``inp`` makes:
    its goal, its coordinator's configuration and its planning prompt."""
    assert inp.goal is not None
    coordinator = inp.coordinator or CoordinatorConfig()
    return _hash(
        {
            "goal": inp.goal,
            "coordinator": coordinator.model_dump(mode="json"),
            "prompt": planning_prompt(inp.team, inp.goal, coordinator.instructions),
        }
    )


def made_plan_key(inp: TeamRunInput, result: TeamRunResult) -> str | None:
    """The key of the inputs that made the plan of the goal run ``inp``
    whose result (or state) is ``result``: the key it carries when the run
    kept it from another (``plan_content_key``); the key of its own input
    when its coordinator planned it; ``None`` when neither is known (a run
    that kept work before plan keys were carried, a fork that edited the
    plan)."""
    if result.plan_content_key is not None:
        return result.plan_content_key
    kept = result.forked_from is not None or any(t.reused_from for t in result.tasks)
    if kept or inp.goal is None:
        return None
    return plan_key(inp)


def dependencies_first(specs: Sequence[TaskSpec]) -> list[TaskSpec]:
    """``specs`` with every task after its dependencies, in their order
    otherwise (Kahn's algorithm: linear, and it ends on any graph; a
    dependency not in ``specs`` is passed over, a task on a cycle left
    out). Check the graph first (``validate_task_graph``): a run's is."""
    by_id = {t.id: t for t in specs}
    waiting = {t.id: 0 for t in specs}
    dependents: dict[str, list[str]] = {}
    for t in by_id.values():
        for d in set(t.depends_on) & by_id.keys():
            waiting[t.id] += 1
            dependents.setdefault(d, []).append(t.id)
    ready = deque(t for t in by_id.values() if waiting[t.id] == 0)
    order: list[TaskSpec] = []
    while ready:
        task = ready.popleft()
        order.append(task)
        for n in dependents.get(task.id, ()):
            waiting[n] -= 1
            if waiting[n] == 0:
                ready.append(by_id[n])
    return order


def _hash(parts: Mapping[str, Any]) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
