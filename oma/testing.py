"""Regression tests that run offline, from a recorded run: ``recorded``.

A real run (on Claude, say) records every model turn's request and answer in
its histories. ``recorded`` runs a team against those recordings instead of
the provider: the same team and tasks get the same answers, without a key
and without a network, and a change to a prompt, a task, a tool or the code
that changes what a model is asked fails the test with ``RECORDING_MISS``,
naming the agent, the task, the turn and what differs (docs/fork.md).
Everything else is real: a Temporal dev server, a worker, tools, processes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal

from oma.activities.llm_turn import LlmActivities
from oma.activities.recordings import Recording, read, recording_of
from oma.client.api import OpenMultiAgent
from oma.records.history_files import read_history_files
from oma.runtime.codec import keys_from_env
from oma.runtime.connection import Connection
from oma.runtime.converter import data_converter
from oma.runtime.dev_server import DevServer, free_port
from oma.worker import Activities, build_worker, session_task_queue

__all__ = ["recorded", "recording"]


@asynccontextmanager
async def recorded(
    source: str | Path,
    *,
    on_miss: Literal["strict", "fallback"] = "strict",
    task_queue: str = "oma-recorded",
    temporal_run_id: str | None = None,
) -> AsyncIterator[OpenMultiAgent]:
    """An ``OpenMultiAgent`` whose runs' model turns are answered from the
    turns ``source`` recorded, on a Temporal dev server of its own (in
    memory, on a free port) with a worker in this process; both stop on exit.

    ``source``: a directory (or file) of exported histories (``temporal
    workflow show --workflow-id ID --output json``) of a ``TeamRun`` and its
    ``AgentRun`` children, whose histories hold the model turns; or the
    workflow id of a ``TeamRun`` on the server Temporal's environment
    configuration names (``TEMPORAL_ADDRESS``, ...), read from there first:
    its execution ``temporal_run_id`` (a Temporal run id; none: its latest).

    A turn whose request (model, system prompt, tools, messages) a recorded
    turn made gets its answer, usage and stop reason; any other fails its
    task ``RECORDING_MISS`` (``on_miss`` ``strict``) or calls the live
    provider (``fallback``). Payloads encrypted with ``OMA_CODEC_KEYS`` are
    read with them. Raises ``HistoryReadError``-like ``OSError``/``ValueError``
    for unreadable files, ``InvalidForkError`` for an unknown run id, and
    ``TemporalUnavailableError`` when the dev server cannot start.
    """
    replay = await recording(source, temporal_run_id)
    with DevServer(port=free_port(), started_by="oma.testing.recorded") as server:
        client = await Connection.local(server.address, task_queue).connect()
        activities = Activities(
            session_task_queue=session_task_queue(task_queue),
            llm=LlmActivities(replay=replay, on_miss=on_miss),
        )
        async with build_worker(client, task_queue, activities):
            yield OpenMultiAgent(client=client, task_queue=task_queue)


async def recording(source: str | Path, temporal_run_id: str | None = None) -> Recording:
    """The model turns ``source`` (its execution ``temporal_run_id``) recorded
    (see ``recorded``)."""
    path = Path(source)
    if path.exists():
        converter = data_converter(keys_from_env(), Connection.from_env().store)
        return await recording_of(read_history_files([path]), converter, str(source))
    client = await Connection.from_env().connect()
    return await read(client, str(source), temporal_run_id)
