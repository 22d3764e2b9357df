"""The protocol's own copy of stdin and stdout, and nothing else on them.

stdout is the ACP channel: one stray line (a ``print``, a warning, a
subprocess that inherited the descriptor: the embedded dev server, a
worker's process agent or MCP server) would corrupt it for the editor. So,
before anything else runs, ``take_stdio`` moves the protocol to descriptors
of its own and points descriptor 1 at stderr and descriptor 0 at
``/dev/null``: whatever else writes to "stdout" lands in the editor's log of
the agent's stderr, and no child can read the editor's requests.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from typing import BinaryIO


@dataclass(frozen=True)
class ProtocolFiles:
    """The files the protocol reads requests from and writes messages to."""

    reader: BinaryIO
    writer: BinaryIO


def take_stdio() -> ProtocolFiles:
    """Move the protocol off descriptors 0 and 1 (module docstring); the
    files it now reads and writes. Python's ``sys.stdout`` then writes to
    stderr too."""
    sys.stdout.flush()
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    for fd in (protocol_in, protocol_out):
        os.set_inheritable(fd, False)  # (dup's default; said for the reader)
    return ProtocolFiles(
        reader=os.fdopen(protocol_in, "rb", buffering=0),
        writer=os.fdopen(protocol_out, "wb", buffering=0),
    )


async def protocol_streams(
    files: ProtocolFiles, limit: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Asyncio streams over ``files`` (what ``acp.stdio_streams`` makes of
    stdin and stdout), the reader holding at most ``limit`` bytes of one
    message."""
    from acp.stdio import _WritePipeProtocol  # the SDK's drain-aware pipe protocol

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), files.reader)
    protocol = _WritePipeProtocol()
    transport, _ = await loop.connect_write_pipe(lambda: protocol, files.writer)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)
