"""The ``plan_shards`` activity: a sharded run's input checked and
split into shards off the workflow's thread (``oma.core.rules.shards``)."""

from __future__ import annotations

import asyncio

from temporalio import activity

from oma.core.contracts.names import ActivityName
from oma.core.contracts.shards import PlannedShards, PlanShardsInput
from oma.core.rules import shards
from oma.core.schema.errors import OMAError, application_error


@activity.defn(name=ActivityName.PLAN_SHARDS)
async def plan_shards(inp: PlanShardsInput) -> PlannedShards:
    """The shards of the run ``inp.workflow_id`` (``shards.plan_shards``), in
    a thread: at 100,000 tasks the checks take seconds of CPU, which would
    stall every other run this worker serves.

    Raises a non-retryable ``ApplicationError`` of the error's code when the
    input is refused (``INVALID_RUN_INPUT``, ``INVALID_TASK_GRAPH``, ...)."""
    try:
        return await asyncio.to_thread(
            shards.plan_shards, inp.input, inp.workflow_id, stored=inp.stored
        )
    except OMAError as err:
        raise application_error(err) from None
