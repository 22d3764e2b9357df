"""The ``read_fork_source`` activity: a fork's first run reads its source run
and makes the input the fork goes on with (``oma.records.fork_source``: the
reading, which ``oma fork`` calls too, to check a fork and say what it keeps
before it starts one), then marks the kept tasks that called a consequential
tool where they ran.
"""

from __future__ import annotations

import logging

from temporalio import activity
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from oma.activities.tools.custom import load_custom_tool
from oma.core.contracts.fork import ForkedRun, ReadForkSourceInput
from oma.core.contracts.names import ActivityName
from oma.core.contracts.workflow_ids import task_workflow_id
from oma.core.schema.errors import OMAError, application_error
from oma.core.schema.fork import is_fork_input, parse_fork_input
from oma.core.schema.team import TeamConfig
from oma.core.schema.tools import CUSTOM_TOOL_PATH
from oma.records.executions import Children, child_execution
from oma.records.fork_source import fitted, fork_of, reuse_of
from oma.records.outputs import agent_run_result

logger = logging.getLogger(__name__)


@activity.defn(name=ActivityName.READ_FORK_SOURCE)
async def read_fork_source(inp: ReadForkSourceInput) -> ForkedRun:
    """The fork ``inp.workflow_id`` of its source run (``fork_of``).

    Raises a non-retryable ``ApplicationError`` of the error's code when the
    fork cannot be made (``INVALID_FORK``, ``INVALID_RUN_INPUT``, ...); the
    server's errors are retried.
    """
    try:
        own = activity.info().workflow_run_id
        if is_fork_input(inp.fork):
            fork = parse_fork_input(inp.fork)
            forked = await fork_of(
                activity.client(), fork, inp.workflow_id, own_temporal_run_id=own, stored=inp.stored
            )
        else:
            forked = await reuse_of(
                activity.client(),
                inp.fork,
                inp.workflow_id,
                own_temporal_run_id=own,
                stored=inp.stored,
            )
        await _consequential(activity.client(), forked)
        return fitted(forked, inp.workflow_id, stored=inp.stored)
    except OMAError as err:
        # more than the worker's conversion (oma.worker.activity_errors): a
        # fork that cannot be made ends, on the data converter's errors too
        # (a source run this worker cannot read), and its failure has no cause
        raise application_error(err) from None


async def _consequential(client: Client, forked: ForkedRun) -> None:
    """Mark each kept task whose agent has consequential tools
    (``@oma.consequential``) and that called one where it ran
    (``reused_consequential``), with a warning: reuse never skips such a call
    silently. Reads the result of each such task's ``AgentRun``."""
    if forked.resume is None:
        return
    team = TeamConfig.model_validate(forked.input["team"])
    children: dict[tuple[str, str], Children] = {}
    for state in forked.resume.result.tasks:
        agent = team.agent(state.assignee or "")
        if state.reused_from is None or agent is None:
            continue
        gated = {
            match.group(1)
            for path in agent.tools or []
            if (match := CUSTOM_TOOL_PATH.match(path)) and _is_consequential(path)
        }
        if not gated:
            continue
        ref = task_workflow_id(state.reused_from.run_id, state.reused_from.task_id)
        try:
            execution = state.output_run_id or await child_execution(
                client, state.reused_from, ref, children
            )
            result = await agent_run_result(client, ref, execution)
        except (RPCError, WorkflowFailureError) as err:
            logger.warning("the tool calls of %s not read: %s", ref, err)
            continue
        called = sorted({c.name for c in result.tool_calls} & gated)
        if called:
            state.reused_consequential = called
            forked.warnings.append(
                f"task {state.id} is reused: it called the consequential tool(s) "
                f"{', '.join(called)} in {ref}, which are not called again"
            )


def _is_consequential(path: str) -> bool:
    try:
        return load_custom_tool(path).traits.consequential
    except OMAError:
        return False
