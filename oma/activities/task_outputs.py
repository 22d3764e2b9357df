"""The ``read_task_outputs`` activity: outputs a ``TeamRun`` kept by reference,
read back from its tasks' ``AgentRun`` results for the tasks that read them
(``oma.records.outputs``), a read that cannot succeed failing the activity."""

from __future__ import annotations

from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from oma.core.contracts.names import ActivityName
from oma.core.contracts.task_outputs import ReadOutputsInput, ReadOutputsOutput
from oma.records.outputs import kept_output


@activity.defn(name=ActivityName.READ_TASK_OUTPUTS)
async def read_task_outputs(inp: ReadOutputsInput) -> ReadOutputsOutput:
    """The output of each ``AgentRun`` in ``inp.refs`` (workflow ids), from
    its result (of the execution ``inp.temporal_run_ids`` names, else the latest),
    through this worker's Temporal client.

    Raises a non-retryable ``ApplicationError`` when a run is gone (past the
    namespace's retention) or did not complete; other errors of the server
    are retried.
    """
    client = activity.client()
    outputs: dict[str, str] = {}
    for ref in inp.refs:
        try:
            outputs[ref] = await kept_output(client, ref, inp.temporal_run_ids.get(ref))
        except WorkflowFailureError as err:
            raise ApplicationError(f"{ref} did not complete: {err}", non_retryable=True) from err
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            raise ApplicationError(f"{ref} is gone: {err.message}", non_retryable=True) from err
    return ReadOutputsOutput(outputs=outputs)
