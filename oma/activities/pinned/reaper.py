"""The reaper: the safety net that keeps a pinned resource (an ACP agent's or
a stdio MCP server's subprocess) from outliving its run.

A run closes its resources itself when it ends (the ``acp_close_run`` and
``mcp_close_run`` activities), but no workflow code runs when a run is
terminated, times out, or is cancelled before it learned where a resource
lives. So the worker also asks Temporal, for every run a pool holds
resources of, whether that run is still open, and closes the resources of
every run that is not.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from oma.activities.pinned.pool import PinnedPool

REAP_INTERVAL_S = 0.5
"""Seconds between two checks."""

logger = logging.getLogger(__name__)


def split_run_key(run_key: str) -> tuple[str, str]:
    """``"<workflow id>/<Temporal run id>"`` -> ``(workflow id, Temporal run
    id)``; Temporal run ids have no ``/``."""
    workflow_id, _, temporal_run_id = run_key.rpartition("/")
    return workflow_id, temporal_run_id


async def run_is_open(client: Client, run_key: str) -> bool:
    """Whether the workflow run named by ``run_key`` is still running.

    A run Temporal no longer knows (``NOT_FOUND``) is not open; any other
    error leaves the question open (``True``), so a flaky server never kills
    a live resource.
    """
    workflow_id, temporal_run_id = split_run_key(run_key)
    try:
        desc = await client.get_workflow_handle(workflow_id, run_id=temporal_run_id).describe()
    except RPCError as err:
        return err.status != RPCStatusCode.NOT_FOUND
    return desc.status == WorkflowExecutionStatus.RUNNING


async def reap_closed_runs(pool: PinnedPool[Any], client: Client) -> int:
    """Close the resources of every run in ``pool`` that has ended. Returns how many."""
    closed = 0
    for run_key in sorted(pool.run_keys()):
        if not await run_is_open(client, run_key):
            closed += await pool.close_run(run_key)
            logger.info("closed the subprocesses of ended run %s", run_key)
    return closed


async def reap_forever(
    pool: PinnedPool[Any], client: Client, interval_s: float = REAP_INTERVAL_S
) -> None:
    """``reap_closed_runs`` every ``interval_s`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await reap_closed_runs(pool, client)
        except Exception:  # the next round tries again; never take the worker down
            logger.exception("reaping the subprocesses of ended runs failed")
