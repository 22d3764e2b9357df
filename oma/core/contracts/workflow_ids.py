"""Workflow ids of a team run's children, and the way back to the run's id.

A task's ``AgentRun`` is ``<run id>/<task id>`` (every attempt reuses it, one
after the other); the coordinator's steps are ``<run id>/coordinator/<step>``; the shards of a
sharded run are ``TeamRun`` children ``<run id>/shard/<n>`` (whose tasks are
``<run id>/shard/<n>/<task id>``). Task ids have no ``/``, so none collide.
"""

from __future__ import annotations

import re

_COORDINATOR_STEP = re.compile(r"/coordinator/[^/]+$")


def task_workflow_id(run_id: str, task_id: str) -> str:
    """The workflow id of task ``task_id``'s ``AgentRun``."""
    return f"{run_id}/{task_id}"


def coordinator_workflow_id(run_id: str, step: str) -> str:
    """The workflow id of a coordinator step (``plan``, ``plan-correction``, ``synthesis``)."""
    return f"{run_id}/coordinator/{step}"


def shard_workflow_id(run_id: str, n: int) -> str:
    """The workflow id of shard ``n`` (from 1) of a sharded run: a ``TeamRun`` of its own."""
    return f"{run_id}/shard/{n}"


def is_shard_of(workflow_id: str, parent_id: str) -> bool:
    """Whether ``workflow_id`` is a shard of the sharded run ``parent_id``
    (``shard_workflow_id``)."""
    n = workflow_id.removeprefix(f"{parent_id}/shard/")
    return n != workflow_id and n.isdigit()


def longest_task_parent_id(run_id: str, task_count: int, max_run_tasks: int) -> str:
    """The longest workflow id the parent of a task's ``AgentRun`` may have in
    the run ``run_id`` of ``task_count`` tasks: the run's own, or past
    ``max_run_tasks`` (a sharded run) its last shard's, at most one a task
    (what the client and the workflow check against Temporal's limit)."""
    return shard_workflow_id(run_id, task_count) if task_count > max_run_tasks else run_id


def team_run_id_of(child_id: str) -> str | None:
    """The ``TeamRun`` workflow id a child id was made from, or ``None``."""
    stripped = _COORDINATOR_STEP.sub("", child_id)
    if stripped != child_id:
        return stripped
    return child_id.rsplit("/", 1)[0] if "/" in child_id else None
