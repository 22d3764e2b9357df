"""The size checks a ``TeamRun`` makes of its input, as the client makes
them (``checked_team_run_input``), for a run the stock ``temporal workflow
start`` started: before anything runs, and once a goal run's plan is made.
Runs recorded before ``_patches.GOAL_COPIES_COUNTED`` counted a goal run's
goal and plan once; they replay so."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from oma.core.rules.shards import check_children
    from oma.core.schema.errors import InvalidRunInputError
    from oma.core.schema.run_input import TeamRunInput
    from oma.core.schema.task import TaskSpec
    from oma.workflows import _patches


def check_start(
    inp: TeamRunInput, tasks: Sequence[TaskSpec], *, stored: bool
) -> list[list[int]] | None:
    """Check a new run's input (``tasks``: a tasks or plan run's) before
    anything runs; returns its shards (``TeamRunInput.check_tasks``) for a
    run of more than ``MAX_RUN_TASKS`` tasks. Raises ``InvalidRunInputError``
    (its children's workflow ids too long, ``check_children``; a
    goal too large, or a run too large to carry its state,
    ``TeamRunInput.check_size``) or the task graph's errors
    (``TeamRunInput.check_tasks``). ``stored``: the run's payloads go to a
    payload store (``limits.state_budget``)."""
    check_children(workflow.info().workflow_id, tasks)
    if inp.goal is None:
        return inp.check_tasks(tasks, stored=stored)
    try:
        inp.check_size([], stored=stored)
    except InvalidRunInputError:
        if _patches.patched(_patches.GOAL_COPIES_COUNTED):
            raise  # (before it, nothing checked a goal run before it planned)
    return None


def check_plan(inp: TeamRunInput, tasks: Sequence[TaskSpec], *, stored: bool) -> None:
    """Check a goal run's plan ``tasks`` against the run
    (``TeamRunInput.check_tasks``, every copy counted); raises its errors."""
    try:
        inp.check_tasks(tasks, stored=stored)
    except InvalidRunInputError:
        if _patches.patched(_patches.GOAL_COPIES_COUNTED):
            raise
        inp.check_tasks(tasks, every_copy=False, stored=stored)
