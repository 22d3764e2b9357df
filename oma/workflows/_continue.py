"""A long ``TeamRun`` continues as new before its history grows large: when
to, and what the next run starts from."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from oma.core.rules.task_graph import TaskGraph
    from oma.core.rules.team_run_state import carried, read_next
    from oma.core.schema import limits
    from oma.core.schema.run_input import TeamRunInput
    from oma.core.schema.run_state import TeamRunState
    from oma.workflows._visibility import Visibility


STORED_HISTORY_BYTES = 10 * 1024 * 1024
"""How large a history of a run with a payload store grows before the run
continues as new: Temporal's warning size (the server's
``limit.historySize.warn``), a fifth of the 50 MB past which it ends a run."""


def due(history_event_limit: int, *, stored: bool = False) -> bool:
    """Whether the run should continue as new: the history reached
    ``history_event_limit`` events (``options``), or Temporal suggests it.

    A run whose payloads go to a payload store (``stored``) does not take the
    suggestion, which the server makes from 4,096 events on (the dev
    server's default): each new run reads and rebuilds the whole carried
    state, so a 100,000-task run would do it a hundred times. It continues at
    ``history_event_limit`` events, or once its history is
    ``STORED_HISTORY_BYTES`` (its large payloads are references there)."""
    info = workflow.info()
    long = info.get_current_history_length() >= history_event_limit
    if stored:
        return long or info.get_current_history_size() >= STORED_HISTORY_BYTES
    return info.is_continue_as_new_suggested() or long


def continue_as_new(
    inp: TeamRunInput,
    state: TeamRunState,
    graph: TaskGraph,
    visibility: Visibility,
    *,
    stored: bool,
) -> None:
    """Go on in a new run with the same input (as the user wrote it: the
    defaults dropped would lose the backends' ``kind`` tags) and ``state``,
    the two within the run's budget (``limits.state_budget(stored)``; the
    outputs the tasks still to run read kept first). Raises ``RunStateTooLargeError`` when the state
    cannot fit (the run stops, rather than fail its workflow task for good);
    else never returns (``workflow.continue_as_new``): the run's
    ``visibility`` says this execution continued as new. On a versioned worker
    the next run starts on the deployment's current build, not this run's
    (``ContinueAsNewVersioningBehavior.AUTO_UPGRADE``)."""
    next_input = inp.payload()
    first = read_next(graph.specs.values(), graph, everything=bool(inp.goal))
    next_input["resume"] = carried(
        state,
        workflow.info().workflow_id,
        limits.state_budget(stored) - limits.json_size(next_input),
        first,
    )
    workflow.continue_as_new(
        next_input,
        search_attributes=visibility.continuing(),
        initial_versioning_behavior=_upgrading(),
    )


def _upgrading() -> workflow.ContinueAsNewVersioningBehavior | None:
    """On a versioned worker, the next run starts on the deployment's current
    build, not on the one this run is pinned to: the carried state is what
    the two builds share. An unversioned worker sends none (the server
    refuses a versioning behaviour from a worker that has no deployment)."""
    if workflow.info().get_current_deployment_version() is None:
        return None
    return workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE
