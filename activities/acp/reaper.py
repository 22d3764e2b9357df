"""The safety net that keeps an ACP agent or stdio MCP server subprocess from
outliving its run.

A run closes its sessions itself when it ends (the ``acp_close_run``
activity), but no workflow code runs when a run is terminated, times out, or
is cancelled before it learned where a session lives. So the worker also
asks Temporal, for every run it holds sessions of, whether that run is still
open, and closes the sessions of every run that is not.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode


class RunScopedPool(Protocol):
    """What the reaper closes: a worker's ACP sessions (``SessionPool``) or
    MCP servers (``McpServerPool``), by run."""

    def run_keys(self) -> set[str]: ...

    async def close_run(self, run_key: str) -> int: ...


REAP_INTERVAL_S = 0.5
"""Seconds between two checks (only while the pool holds a session)."""

logger = logging.getLogger(__name__)


def split_run_key(run_key: str) -> tuple[str, str]:
    """``"<workflow id>/<run id>"`` -> ``(workflow id, run id)``; run ids have no ``/``."""
    workflow_id, _, run_id = run_key.rpartition("/")
    return workflow_id, run_id


async def run_is_open(client: Client, run_key: str) -> bool:
    """Whether the workflow run named by ``run_key`` is still running.

    A run Temporal no longer knows (``NOT_FOUND``) is not open; any other
    error leaves the question open (``True``), so a flaky server never kills
    a live session.
    """
    workflow_id, run_id = split_run_key(run_key)
    try:
        desc = await client.get_workflow_handle(workflow_id, run_id=run_id).describe()
    except RPCError as err:
        return err.status != RPCStatusCode.NOT_FOUND
    return desc.status == WorkflowExecutionStatus.RUNNING


async def reap_closed_runs(pool: RunScopedPool, client: Client) -> int:
    """Close the sessions of every run in ``pool`` that has ended. Returns how many."""
    closed = 0
    for run_key in sorted(pool.run_keys()):
        if not await run_is_open(client, run_key):
            closed += await pool.close_run(run_key)
            logger.info("closed the subprocesses of ended run %s", run_key)
    return closed


async def reap_forever(
    pool: RunScopedPool, client: Client, interval_s: float = REAP_INTERVAL_S
) -> None:
    """``reap_closed_runs`` every ``interval_s`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await reap_closed_runs(pool, client)
        except Exception:  # the next round tries again; never take the worker down
            logger.exception("reaping the subprocesses of ended runs failed")
