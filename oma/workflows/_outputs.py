"""A resumed ``TeamRun`` reads back the outputs it kept by reference that its
waiting tasks read (``oma.core.rules.payload_fit``), before it dispatches them."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityConfig

with workflow.unsafe.imports_passed_through():
    from oma.core.contracts.names import ActivityName
    from oma.core.contracts.task_outputs import ReadOutputsInput, ReadOutputsOutput
    from oma.core.rules.payload_fit import read_batches
    from oma.core.rules.task_graph import TaskGraph
    from oma.core.rules.team_run_state import read_next
    from oma.core.schema.limits import MAX_DEPENDENCY_PAYLOAD_BYTES
    from oma.core.schema.results import TeamRunResult
    from oma.core.schema.task import TERMINAL_STATUSES
    from oma.workflows._waiting import reraise_cancel

READ_OUTPUTS: ActivityConfig = {
    "start_to_close_timeout": timedelta(minutes=1),
    "retry_policy": RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=10),
}


async def read_back(graph: TaskGraph, result: TeamRunResult) -> None:
    """Put back into ``graph`` the outputs kept by reference that a task still
    to run reads as a dependency (``memory_scope`` ``dependencies``): read
    with the ``read_task_outputs`` activity, from the children's results. A
    fork (``result.forked_from``) or a run that reused tasks (``reused_from``)
    reads back every output a task still to run or its synthesis reads
    (``read_next``), from the children of the runs that ran them: its kept
    outputs start by reference.

    An output over ``MAX_DEPENDENCY_PAYLOAD_BYTES`` is not read (its readers
    fail on its size, ``output_bytes``, as they would with it); one that
    cannot be read stays by reference, and its readers fail saying so
    (``oma.core.rules.prompt``). A run with no output kept by reference schedules
    nothing.
    """
    waiting = [t for t in graph.specs.values() if graph[t.id].status not in TERMINAL_STATUSES]
    read = dict.fromkeys(
        d for t in waiting if t.memory_scope == "dependencies" for d in t.depends_on
    )
    # (no run before forks and reuse has either: older runs replay the same)
    if result.forked_from is not None or any(s.reused_from is not None for s in graph):
        everything = read_next(graph.specs.values(), graph, everything=result.goal is not None)
        read = dict.fromkeys(t for t in graph.specs if t in everything)
    kept = {
        state.output_ref: state
        for state in (graph[d] for d in read)
        if state.output is None
        and state.output_ref is not None
        and (state.output_bytes or 0) <= MAX_DEPENDENCY_PAYLOAD_BYTES
    }
    for batch in read_batches((ref, s.output_bytes or 0) for ref, s in kept.items()):
        try:
            got = await workflow.execute_activity(
                ActivityName.READ_TASK_OUTPUTS,
                ReadOutputsInput(
                    refs=batch,
                    temporal_run_ids={r: run for r in batch if (run := kept[r].output_run_id)},
                ),
                result_type=ReadOutputsOutput,
                **(
                    READ_OUTPUTS
                    | {"summary": f"read back {len(batch)} output(s) kept by reference"}
                ),
            )
        except ActivityError as err:
            reraise_cancel(err)
            workflow.logger.warning("outputs kept by reference not read back: %s", err)
            continue
        for ref, output in got.outputs.items():
            state = kept[ref]
            state.output, state.output_ref, state.output_bytes = output, None, None
