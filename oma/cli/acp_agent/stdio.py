"""The protocol's own copy of stdin and stdout, and nothing else on them.

stdout is the ACP channel: one stray line (a ``print``, a warning, a
subprocess that inherited the descriptor: the embedded dev server, a
worker's process agent or MCP server) would corrupt it for the editor. So,
before anything else runs, ``take_stdio`` moves the protocol to descriptors
of its own and points descriptor 1 at stderr and descriptor 0 at
``/dev/null``: whatever else writes to "stdout" lands in the editor's log of
the agent's stderr, and no child can read the editor's requests.

What the editor sends passes ``checked_line`` on its way to the SDK: a line
that is JSON but not a JSON-RPC message (an array, a string, ``null``) or a
response whose ``error`` is not an object would end the SDK's receive loop
(the agent process crashed, or, for ``null``, took it for the end of input),
so such a line is dropped, as a line that is not JSON is (each with one log
line), and an ``error`` that is not an object is made one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any, BinaryIO

logger = logging.getLogger(__name__)

LOGGED_LINE_CHARS = 200
"""How much of a dropped line the log shows, in characters."""

_PUMPS: set[asyncio.Task[None]] = set()

_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
_JSON_KINDS[type(None)] = "null"


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
    message at a time and giving only the lines ``checked_line`` keeps."""
    from acp.stdio import _WritePipeProtocol  # the SDK's drain-aware pipe protocol

    loop = asyncio.get_running_loop()
    raw = asyncio.StreamReader(limit=limit)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(raw), files.reader)
    checked = asyncio.StreamReader(limit=limit)
    pump = asyncio.create_task(_pump(raw, checked))
    _PUMPS.add(pump)  # (a task only the loop refers to may be collected mid-run)
    pump.add_done_callback(_PUMPS.discard)
    protocol = _WritePipeProtocol()
    transport, _ = await loop.connect_write_pipe(lambda: protocol, files.writer)
    return checked, asyncio.StreamWriter(transport, protocol, None, loop)


async def _pump(raw: asyncio.StreamReader, checked: asyncio.StreamReader) -> None:
    """Move each line of ``raw`` that ``checked_line`` keeps to ``checked``,
    then its end."""
    try:
        while line := await _read_line(raw):
            kept = checked_line(line)
            if kept is not None:
                checked.feed_data(kept)
    finally:
        checked.feed_eof()


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    """One line, however long (a line over the reader's limit is read in
    parts, as the SDK reads it); ``b""`` at the end."""
    parts: list[bytes] = []
    while True:
        try:
            parts.append(await reader.readuntil(b"\n"))
            return b"".join(parts)
        except asyncio.LimitOverrunError as err:
            parts.append(await reader.readexactly(err.consumed))
        except asyncio.IncompleteReadError as err:
            parts.append(err.partial)
            return b"".join(parts)


def checked_line(line: bytes) -> bytes | None:
    """``line`` as the SDK may read it, or ``None`` to drop it (module
    docstring): a JSON object is kept (a response's ``error`` that is not an
    object made ``{"code": -32603, "message": ...}``); a blank line, a line
    that is not JSON, any other JSON value, and an object whose ``id`` is
    not a string, a number or null, or whose ``method`` is not a string, is
    dropped (all but a blank line logged)."""
    if not line.strip():
        return None
    message: Any = None
    why: str | None = "not JSON"
    with contextlib.suppress(ValueError, RecursionError):
        message = json.loads(line)
        why = _not_a_message(message)
    if why is not None:
        shown = line[:LOGGED_LINE_CHARS].decode("utf-8", "replace").rstrip()
        logger.warning("dropped a line from the client: %s: %s", why, shown)
        return None
    if "method" not in message and "error" in message and not isinstance(message["error"], dict):
        given = message["error"]
        message["error"] = {"code": -32603, "message": given if isinstance(given, str) else "Error"}
        return json.dumps(message).encode() + b"\n"
    return line


def _not_a_message(message: Any) -> str | None:
    if not isinstance(message, dict):
        return f"JSON {_JSON_KINDS.get(type(message), 'value')}, not a JSON-RPC message"
    rpc_id = message.get("id")
    if isinstance(rpc_id, bool) or not isinstance(rpc_id, str | int | float | None):
        return "its id is not a string, a number or null"
    if "method" in message and not isinstance(message["method"], str):
        return "its method is not a string"
    return None
