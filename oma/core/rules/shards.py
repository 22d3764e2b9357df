"""A sharded run's input: checked and split off the workflow's thread, and
each shard's input made of the input as given.

A run that lists more than ``MAX_RUN_TASKS`` tasks (``reads_first``) would
validate every task, check its graph and split it in its first activation,
under the SDK's 2 s deadlock timer: at 100,000 tasks that alone passes it on
a slow machine. So ``TeamRun`` hands its decoded input to the
``plan_shards`` activity (``plan_shards`` here: the same checks, in
the same order, as any new run's, ``check_children`` and
``TeamRunInput.check_tasks``), which answers with the shards' spans only
(``PlannedShards``); the workflow parses its team and options alone
(``parent_input``) and makes each shard's input, as it starts it, of the
tasks as given (``ShardInputs.of_input``): no ``TaskSpec`` of its tasks is
built in the workflow. Pure: the activity calls ``plan_shards``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from oma.core.contracts.shards import PlannedShards, spans_of
from oma.core.contracts.workflow_ids import longest_task_parent_id
from oma.core.schema import limits
from oma.core.schema.errors import InvalidRunInputError
from oma.core.schema.run_input import TeamRunInput, listed_tasks, parse_team_run_input
from oma.core.schema.task import TaskSpec
from oma.core.schema.task_template import expand


def reads_first(raw: Any) -> bool:
    """Whether a ``TeamRun`` whose decoded input is ``raw`` checks and splits
    it in the ``plan_shards`` activity: a new run (no ``resume``) that
    lists more than ``MAX_RUN_TASKS`` tasks (``listed_tasks``). Cheap: it
    counts lists, it validates nothing."""
    return (
        isinstance(raw, dict)
        and raw.get("resume") is None
        and listed_tasks(raw) > limits.MAX_RUN_TASKS
    )


def check_children(run_id: str, tasks: Sequence[TaskSpec]) -> None:
    """Raise ``InvalidRunInputError`` when a task's ``AgentRun`` in the run
    ``run_id`` of ``tasks`` (under its last shard's id, when sharded) would
    have a workflow id past Temporal's limit (``limits.check_child_ids``)."""
    parent = longest_task_parent_id(run_id, len(tasks), limits.MAX_RUN_TASKS)
    limits.check_child_ids(parent, (t.id for t in tasks))


def plan_shards(raw: Any, run_id: str, *, stored: bool) -> PlannedShards:
    """The shards of the run ``run_id`` whose decoded input is ``raw`` (a
    tasks or plan run of more than ``MAX_RUN_TASKS`` tasks), checked first as
    ``TeamRun`` checks a new run's input: its shape
    (``parse_team_run_input``), its children's ids (``check_children``), its
    tasks and graph, and what a shard holds (``TeamRunInput.check_tasks``).
    ``stored``: the run's payloads go to a payload store.

    Raises what those raise (``InvalidRunInputError``, ``DagValidationError``,
    ``AssigneeRequirementsMismatchError``, ``NoEligibleAgentError``), and
    ``InvalidRunInputError`` for a run that would not be sharded (a run of a
    goal, or of at most ``MAX_RUN_TASKS`` tasks: ``reads_first`` is false)."""
    inp = parse_team_run_input(raw)
    tasks = inp.given_tasks()
    check_children(run_id, tasks)
    shards = inp.check_tasks(tasks, stored=stored) if inp.goal is None else None
    if not shards:
        raise InvalidRunInputError(
            f"plan_shards: the run has {len(tasks)} given task(s), which runs in one TeamRun"
        )
    return PlannedShards(
        spans=[spans_of(shard) for shard in shards],
        first_tasks=[tasks[shard[0]].id for shard in shards],
    )


def parent_input(raw: dict[str, Any]) -> TeamRunInput:
    """``raw`` (an input ``plan_shards`` checked) parsed without its tasks but
    the first, its dependencies left out: its team and options, for a sharded
    run that never builds its tasks. Raises ``InvalidRunInputError`` (for an
    input ``plan_shards`` did not check)."""
    one = dict(raw)
    if isinstance(plan := raw.get("plan"), dict):
        one["plan"] = {**plan, "tasks": _first(plan.get("tasks"))}
    else:
        if raw.get("tasks") is not None:
            one["tasks"] = _first(raw.get("tasks"))
        if raw.get("items") is not None:
            one["items"] = raw["items"][:1]
    return parse_team_run_input(one)


def _first(tasks: Any) -> Any:
    if not isinstance(tasks, list) or not tasks or not isinstance(tasks[0], dict):
        return tasks
    return [{**tasks[0], "depends_on": []}]


class ShardInputs:
    """What a sharded run starts its shards with: per shard (from 0) its
    task count (``sizes``), its first task's id (``first_tasks``) and its
    ``TeamRun`` input (``payload``: the run's team and options, and its
    tasks)."""

    def __init__(
        self, sizes: list[int], first_tasks: list[str], payload: Callable[[int], dict[str, Any]]
    ) -> None:
        self.sizes = sizes
        self.first_tasks = first_tasks
        self.payload = payload

    @classmethod
    def of_tasks(
        cls, inp: TeamRunInput, tasks: Sequence[TaskSpec], shards: list[list[int]]
    ) -> ShardInputs:
        """Of ``tasks``, the run's, built and checked in the workflow, split
        as ``shards`` (indices into ``tasks``): each shard's tasks as built
        (``TeamRunInput.shard_payload``). Runs recorded before
        ``oma.workflows._patches.SHARDS_PLANNED_APART``."""
        return cls(
            [len(shard) for shard in shards],
            [tasks[shard[0]].id for shard in shards],
            lambda n: inp.shard_payload([tasks[i] for i in shards[n]]),
        )

    @classmethod
    def of_input(
        cls, inp: TeamRunInput, raw: dict[str, Any], planned: PlannedShards
    ) -> ShardInputs:
        """Of ``raw``, the run's input as given (``inp``: its team and
        options, ``parent_input``), split as ``planned``: each shard's tasks
        as given, those made of ``task_template`` as the template and their
        items (the shard makes them), in the run's order."""
        plan = raw.get("plan")
        listed: list[dict[str, Any]] = (plan["tasks"] if plan else raw.get("tasks")) or []
        items: list[dict[str, Any]] = raw.get("items") or []
        template = raw.get("task_template")

        def payload(n: int) -> dict[str, Any]:
            indices = planned.indices(n)
            given = [listed[i] for i in indices if i < len(listed)]
            made = [items[i - len(listed)] for i in indices if i >= len(listed)]

            def ids() -> Iterable[str]:
                yield from (t["id"] for t in given)
                if made:
                    yield from (t.id for t in expand(TaskSpec.model_validate(template), made))

            data = inp.shard_base(ids)
            if given:
                data["tasks"] = given
            if made:
                data["task_template"], data["items"] = template, made
            return data

        sizes = [sum(s[1::2]) - sum(s[::2]) for s in planned.spans]
        return cls(sizes, planned.first_tasks, payload)
