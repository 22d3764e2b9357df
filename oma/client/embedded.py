"""A client that works with nothing else running: the embedded Temporal dev
server and a worker in this process when no server listens
(``OpenMultiAgent.embedded``, ``oma run``)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio.client import Client

from oma.core.schema.errors import TemporalUnavailableError
from oma.runtime.connection import EMBEDDED_DB, Connection
from oma.runtime.dev_server import DevServer, is_listening, split_address
from oma.runtime.logs import forward_core_logs

__all__ = ["EMBEDDED_DB", "configured_connection", "serving"]


def configured_connection() -> Connection:
    """``Connection.from_env()``, with ``OMA_CODEC_KEYS`` and
    ``OMA_CREDENTIALS`` checked first, so a malformed one fails here, before
    anything starts (``oma run``, ``oma acp``, the commands that read runs).

    Raises the ``OMAError`` of what is wrong: a bad profile, codec key or
    credential rule."""
    from oma.runtime.codec import keys_from_env

    keys_from_env()
    if os.environ.get("OMA_CREDENTIALS"):  # (httpx2 parses it: only when it is set)
        from oma.runtime.credentials import CredentialPolicy

        CredentialPolicy.from_env()
    return Connection.from_env()


@asynccontextmanager
async def serving(
    connection: Connection, *, worker: bool | None = None, started_by: str = ""
) -> AsyncIterator[tuple[Client, Connection]]:
    """A client of ``connection``'s server that works with nothing else running,
    and the connection it uses (``OpenMultiAgent.embedded``, ``oma run``).

    When nothing listens at the address (a port on this machine), the
    embedded Temporal dev server starts there (histories in ``EMBEDDED_DB``,
    its log and, unless ``OMA_PAYLOAD_STORE`` names another, its payload
    store, ``.oma/payloads``, beside it; ``started_by`` names who started it for a second one
    to say) with a worker in this process, and both stop on exit. When a
    server listens, it only connects. ``worker`` True or False runs a worker
    in this process, or none, in either case.

    Raises ``TemporalUnavailableError`` when the server cannot be started (the
    port taken, ``EMBEDDED_DB`` held by another embedded server, whose
    address the message names; the message points to the server's log) or
    no server answers.
    """
    server: DevServer | None = None
    if not is_listening(connection.address):
        _, port = split_address(connection.address)
        log_file = EMBEDDED_DB.with_name("dev-server.log")
        server = DevServer(
            port=port,
            db_file=EMBEDDED_DB,
            log_file=log_file,
            namespaces=[connection.namespace],
            started_by=started_by,
        )
        try:
            await asyncio.to_thread(server.start)
        except TemporalUnavailableError as err:
            raise TemporalUnavailableError(f"{err.message}; see {log_file}") from None
        connection = connection.at(server.address)
    in_process = worker if worker is not None else server is not None
    if in_process:
        # the in-process worker's SDK warnings (e.g. "Query not found") would
        # otherwise be written to this program's stdout
        forward_core_logs()
    try:
        client = await connection.connect()
        if in_process:
            from oma.worker import build_worker  # the worker's imports only when it runs

            async with build_worker(client, connection.task_queue):
                yield client, connection
        else:
            yield client, connection
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)
