"""Outputs a ``TeamRun`` kept by reference (``TaskState.output_ref``: the
result of the task's ``AgentRun``, which holds it whole, of its execution
``output_run_id``, else the latest), read back from those results."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from oma.core.schema.results import AgentRunResult
from oma.core.schema.task import TaskState

logger = logging.getLogger(__name__)

OUTPUT_READS = 8
"""How many kept outputs are read back at once."""


async def agent_run_result(
    client: Client, ref: str, temporal_run_id: str | None = None
) -> AgentRunResult:
    """The result of the ``AgentRun`` ``ref`` (a workflow id), of its
    execution ``temporal_run_id`` (``None``: the latest). Raises ``RPCError`` (e.g.
    ``NOT_FOUND`` for a run past the namespace's retention) and
    ``WorkflowFailureError`` (a run that did not complete)."""
    handle = client.get_workflow_handle(ref, run_id=temporal_run_id, result_type=AgentRunResult)
    result: AgentRunResult = await handle.result()
    return result


async def kept_output(client: Client, ref: str, temporal_run_id: str | None = None) -> str:
    """The output kept by reference at ``ref`` (of its execution
    ``temporal_run_id``): its ``AgentRun``'s result's. Raises as
    ``agent_run_result``."""
    return (await agent_run_result(client, ref, temporal_run_id)).output


async def read_task_outputs(client: Client, tasks: Iterable[TaskState]) -> None:
    """Read back into each of ``tasks`` without an output the output it kept
    by reference (``output_ref``, ``output_run_id``), ``OUTPUT_READS`` at a
    time; ``output_ref`` stays, saying where it came from. An output that
    cannot be read (e.g. the child's history is past the namespace's
    retention) stays by reference, logged."""
    limit = asyncio.Semaphore(OUTPUT_READS)

    async def read(task: TaskState, ref: str) -> None:
        async with limit:
            try:
                task.output = await kept_output(client, ref, task.output_run_id)
            except (RPCError, WorkflowFailureError) as err:
                logger.warning("the output of task %s (%s) cannot be read: %s", task.id, ref, err)

    await asyncio.gather(
        *(read(t, t.output_ref) for t in tasks if t.output is None and t.output_ref)
    )
