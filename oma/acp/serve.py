"""``oma acp``: the process, from its stdio to the Temporal connection.

The order matters: the protocol takes stdin and stdout before anything can
write to them (``oma.acp.stdio``); log lines go to stderr; the Temporal
connection (and, when nothing listens on ``TEMPORAL_ADDRESS``, the embedded
dev server and a worker in this process: ``oma.client.embedded.serving``, as
``oma run`` does) starts at once, in its own task, while ``initialize`` is
answered; a session waits for it. When the editor closes stdin, the agent
ends, and with it what this process started: a run goes on under any other
worker, or with the embedded server's next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from oma.acp.stdio import ProtocolFiles, protocol_streams, take_stdio
from oma.core.schema.errors import OMAError, TemporalUnavailableError


def acp_command(team: Path | None, task_queue: str | None, verbose: bool) -> int:
    """Serve ACP on stdio until the client closes it; the exit status (0, or
    130 on SIGTERM/SIGINT)."""
    files = take_stdio()
    from oma.runtime.logs import route_logs

    route_logs(None, logging.INFO if verbose else logging.WARNING)
    if task_queue:
        os.environ["OMA_TASK_QUEUE"] = task_queue
    try:
        asyncio.run(_serve(files, team.resolve() if team else None))
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 130
    return 0


async def _serve(files: ProtocolFiles, team: Path | None) -> None:
    from acp import run_agent

    from oma.acp.agent import TeamAgent

    main = asyncio.current_task()
    assert main is not None
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, main.cancel)
    temporal = _Temporal()
    reader, writer = await protocol_streams(files)
    agent: Any = TeamAgent(team, temporal.connect)  # (the SDK's Agent protocol, by name)
    try:
        await run_agent(agent, writer, reader, use_unstable_protocol=True)
    finally:
        await agent.settle()  # (a cancel the editor sent as it quit reaches its run)
        await temporal.stop()


class _Temporal:
    """The connection, held by a task of its own from the start; one that
    failed is tried again by the next session that needs it (a server
    started meanwhile is found)."""

    def __init__(self) -> None:
        self._start()

    def _start(self) -> None:
        self.ready: asyncio.Future[tuple[Any, str]] = asyncio.get_running_loop().create_future()
        self.holder = asyncio.create_task(_hold_temporal(self.ready))

    async def connect(self) -> tuple[Any, str]:
        if self.ready.done() and self.ready.exception() is not None:
            await self.stop()
            self._start()
        return await asyncio.shield(self.ready)

    async def stop(self) -> None:
        self.holder.cancel()
        with contextlib.suppress(BaseException):
            await self.holder


async def _hold_temporal(ready: asyncio.Future[tuple[Any, str]]) -> None:
    """Connect as ``oma run`` does (``oma.client.embedded``: the configured
    server, or the embedded dev server and a worker in this process when
    nothing listens there) and hold the connection, the embedded server and
    the worker until cancelled; a failure to connect is what every session is
    then answered with."""
    from oma.client.embedded import configured_connection, serving
    from oma.runtime.dev_server import is_listening, split_address

    try:
        connection = configured_connection()
        if not is_listening(connection.address):
            _, port = split_address(connection.address)
            print(f"starting the embedded Temporal dev server on port {port}", file=sys.stderr)
        async with serving(connection, started_by="oma acp") as (client, served):
            ready.set_result((client, served.task_queue))
            await asyncio.Event().wait()
    except OMAError as err:
        _fail(ready, err)
    except Exception as err:
        _fail(
            ready,
            TemporalUnavailableError(f"cannot connect to Temporal: {err or type(err).__name__}"),
        )


def _fail(ready: asyncio.Future[tuple[Any, str]], err: OMAError) -> None:
    if not ready.done():
        ready.set_exception(err)
