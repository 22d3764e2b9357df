"""A TCP proxy a test can cut: a network outage between one worker and a
Temporal server that itself stays up."""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target`` (``host:port``).

    ``cut()`` drops every connection and makes new ones close at once, as a
    network that lost its route would; ``heal()`` lets connections through
    again. Use as an async context manager; ``address`` is where to connect.
    """

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host, int(port))
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._cut = False

    @property
    def address(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def cut(self) -> None:
        self._cut = True
        for writer in list(self._links):
            writer.transport.abort()

    def heal(self) -> None:
        self._cut = False

    async def __aenter__(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.cut()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._links |= {writer, up_writer}
        pipes = [
            asyncio.create_task(self._pipe(reader, up_writer)),
            asyncio.create_task(self._pipe(up_reader, writer)),
        ]
        self._tasks.update(pipes)
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in (writer, up_writer):
                w.transport.abort()
                self._links.discard(w)
            for pipe in pipes:
                pipe.cancel()
                self._tasks.discard(pipe)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(64 * 1024):
                writer.write(data)
                await writer.drain()
