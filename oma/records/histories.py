"""A run's histories as the server keeps them: one execution's, its
execution and those it continued from, and its children's, each child's
continue-as-new chain followed forward; what the run viewer reads a run
from, and ``oma replay`` a run on the server."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TypeVar

from temporalio.client import Client, WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode

from oma.records.executions import started_children
from oma.records.history_files import started

T = TypeVar("T")

FETCHES_AT_ONCE = 32
"""How many child histories a reader fetches at a time (a 5,000-task run's
5,000, one after the other, took 17 s of round trips)."""

ChildHistory = Callable[[str, str], Awaitable[WorkflowHistory | None]]
"""``(workflow id, Temporal run id)`` -> that execution's history, ``None`` when there
is none."""


async def history_of(
    client: Client, workflow_id: str, temporal_run_id: str | None = None
) -> WorkflowHistory:
    """The history of ``workflow_id``'s execution ``temporal_run_id`` (none:
    its latest). Raises ``RPCError`` (``NOT_FOUND`` for an unknown workflow
    id or execution)."""
    return await client.get_workflow_handle(workflow_id, run_id=temporal_run_id).fetch_history()


async def fetch_histories(
    client: Client,
    workflow_id: str,
    temporal_run_id: str | None = None,
    *,
    children: bool = True,
) -> list[WorkflowHistory]:
    """The histories of ``workflow_id`` (its execution ``temporal_run_id``,
    else its latest run, and the runs it continued from) and, with ``children``, of
    every child those runs started (each child's continue-as-new chain
    followed forward; ``FETCHES_AT_ONCE`` at a time, in order). Raises
    ``temporalio.service.RPCError`` (``NOT_FOUND`` for an unknown workflow id).

    To read a run without holding every child's history, fetch its own
    (without ``children``) and give ``build_run_view`` ``server_histories``."""
    chain = await execution_chain(client, workflow_id, temporal_run_id)
    histories = list(chain)
    if children:
        fetch = server_histories(client)
        async for runs in in_order(
            (chain_of(fetch, x.workflow_id, x.run_id) for x in started_children(chain)),
            FETCHES_AT_ONCE,
        ):
            histories.extend(runs)
    return histories


async def execution_chain(
    client: Client,
    workflow_id: str,
    temporal_run_id: str | None,
    *,
    later: bool = False,
    limit: asyncio.Semaphore | None = None,
) -> list[WorkflowHistory]:
    """The histories of ``workflow_id``'s execution ``temporal_run_id`` (none:
    its latest) and of those it continued as new from, with ``later`` those it
    continued as new in too, in order; each fetch under ``limit``, if given.
    Raises ``RPCError`` (``NOT_FOUND`` for an unknown workflow id)."""

    async def history(execution: str | None) -> WorkflowHistory:
        async with limit or contextlib.nullcontext():
            return await history_of(client, workflow_id, execution)

    found = [await history(temporal_run_id)]
    while previous := started(found[0]).continued_execution_run_id:
        found.insert(0, await history(previous))
    while later and (following := continued_as(found[-1])):
        found.append(await history(following))
    return found


def server_histories(client: Client) -> ChildHistory:
    """A ``ChildHistory`` that fetches from the server ``client`` talks to."""

    async def fetch(workflow_id: str, temporal_run_id: str) -> WorkflowHistory | None:
        try:
            return await history_of(client, workflow_id, temporal_run_id)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise

    return fetch


async def chain_of(
    fetch: ChildHistory, workflow_id: str, temporal_run_id: str
) -> list[WorkflowHistory]:
    """The histories of ``workflow_id``'s execution ``temporal_run_id`` and of
    those it continued as."""
    runs: list[WorkflowHistory] = []
    following: str | None = temporal_run_id
    while following and (history := await fetch(workflow_id, following)) is not None:
        runs.append(history)
        following = continued_as(history)
    return runs


async def in_order(works: Iterable[Awaitable[T]], at_once: int) -> AsyncIterator[T]:
    """The results of ``works``, in their order, at most ``at_once`` of them
    started and not yet taken: the rest start as the first are taken."""
    running: deque[asyncio.Future[T]] = deque()
    pending = iter(works)
    try:
        for work in pending:
            running.append(asyncio.ensure_future(work))
            if len(running) >= at_once:
                break
        while running:
            result = await running.popleft()
            for work in pending:  # the next one, if any
                running.append(asyncio.ensure_future(work))
                break
            yield result
    finally:
        for future in running:
            future.cancel()


def continued_as(history: WorkflowHistory) -> str | None:
    """The Temporal run id of the execution ``history`` continued as, if it did."""
    last = history.events[-1]
    if last.HasField("workflow_execution_continued_as_new_event_attributes"):
        return str(last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id)
    return None
