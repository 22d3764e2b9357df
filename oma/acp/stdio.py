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

A line is at most ``MAX_MESSAGE_BYTES``: stdin is read in chunks of
``READ_CHUNK_BYTES``, and a longer line is let go of as it is read (never
held whole), then refused: a request (its ``id`` found in the line's first
``HEAD_BYTES``) gets a JSON-RPC error ``-32600`` whose ``data.code`` is
``ACP_MESSAGE_TOO_LARGE``; the connection goes on. So what the agent holds of
one message is bounded, whatever the editor (or a hostile peer) sends.
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

from oma.core.schema.errors import AcpMessageTooLargeError

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 50 * 1024 * 1024
"""The longest line (one JSON-RPC message, its newline included) the agent
reads from the editor, in bytes: a prompt's images and files travel in it
(base64, a third larger than the files)."""

READ_CHUNK_BYTES = 1024 * 1024
"""The stdin reader's buffer limit, in bytes: a line is read in chunks of
about this size (at most twice it buffered)."""

HEAD_BYTES = 64 * 1024
"""How much of a line over ``MAX_MESSAGE_BYTES`` is kept to find its ``id``."""

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
    files: ProtocolFiles,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Asyncio streams over ``files`` (what ``acp.stdio_streams`` makes of
    stdin and stdout), the reader giving only the lines ``checked_line``
    keeps, each at most ``MAX_MESSAGE_BYTES`` (a longer one refused, module
    docstring)."""
    from acp.stdio import _WritePipeProtocol  # the SDK's drain-aware pipe protocol

    loop = asyncio.get_running_loop()
    protocol = _WritePipeProtocol()
    transport, _ = await loop.connect_write_pipe(lambda: protocol, files.writer)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    raw = asyncio.StreamReader(limit=READ_CHUNK_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(raw), files.reader)
    # (a line in it is never longer than MAX_MESSAGE_BYTES: the SDK reads it at once)
    checked = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES)
    pump = asyncio.create_task(_pump(raw, checked, writer))
    _PUMPS.add(pump)  # (a task only the loop refers to may be collected mid-run)
    pump.add_done_callback(_PUMPS.discard)
    return checked, writer


@dataclass(frozen=True)
class TooLong:
    """A line over ``MAX_MESSAGE_BYTES``: its size in bytes and its first
    ``HEAD_BYTES``."""

    size: int
    head: bytes


async def _pump(
    raw: asyncio.StreamReader, checked: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Move each line of ``raw`` that ``checked_line`` keeps to ``checked``,
    then its end; refuse each line that is too long (``refusal``)."""
    try:
        while line := await _read_line(raw):
            if isinstance(line, TooLong):
                answer = refusal(line)
                if answer is not None:
                    writer.write(answer)
                continue
            kept = checked_line(line)
            if kept is not None:
                checked.feed_data(kept)
    finally:
        checked.feed_eof()


async def _read_line(reader: asyncio.StreamReader) -> bytes | TooLong:
    """One line (``b""`` at the end), read in chunks; past
    ``MAX_MESSAGE_BYTES`` the rest of it is read and let go of, and it is a
    ``TooLong``."""
    parts: list[bytes] | None = []
    size = 0
    head = b""
    while True:
        ended = True
        try:
            part = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError as err:
            part, ended = await reader.readexactly(err.consumed), False
        except asyncio.IncompleteReadError as err:
            part = err.partial
        size += len(part)
        if parts is not None and size > MAX_MESSAGE_BYTES:
            head, parts = (parts[0] if parts else part)[:HEAD_BYTES], None
        if parts is not None:
            parts.append(part)
        if ended:
            return b"".join(parts) if parts is not None else TooLong(size, head)


def refusal(line: TooLong) -> bytes | None:
    """The JSON-RPC error line that refuses ``line`` (``-32600``, ``data`` the
    ``AcpMessageTooLargeError``'s code and message), or ``None`` when its
    first bytes name no request id (a notification, or an id past them):
    logged either way."""
    err = AcpMessageTooLargeError(
        f"a message from the editor is {line.size} bytes; one message (a JSON-RPC line) "
        f"may be at most {MAX_MESSAGE_BYTES} bytes ({MAX_MESSAGE_BYTES // (1024 * 1024)} MiB): "
        "attach large files as resource links (their paths), not their contents"
    )
    logger.warning("refused a line from the client: %s", err.message)
    rpc_id = _leading_id(line.head)
    if rpc_id is None:
        return None
    from acp import RequestError

    from oma.acp.rpc_errors import oma_request_error

    error = oma_request_error(RequestError.invalid_request(), err).to_error_obj()
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "error": error}).encode() + b"\n"


def _leading_id(head: bytes) -> str | int | None:
    """The ``id`` of the JSON object ``head`` begins (cut anywhere), when a
    string or an integer comes before the first member that does not end in it."""
    text = head.decode("utf-8", "ignore")
    decoder = json.JSONDecoder()
    at = _skip_space(text, 0)
    if not text.startswith("{", at):
        return None
    at += 1
    with contextlib.suppress(ValueError, RecursionError):
        while True:
            key, at = decoder.raw_decode(text, _skip_space(text, at))
            at = _skip_space(text, at)
            if not isinstance(key, str) or not text.startswith(":", at):
                return None
            value, at = decoder.raw_decode(text, _skip_space(text, at + 1))
            if key == "id":
                ok = isinstance(value, str | int) and not isinstance(value, bool)
                return value if ok else None
            at = _skip_space(text, at)
            if not text.startswith(",", at):
                return None
            at += 1
    return None


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


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
        from acp import RequestError

        given = message["error"]
        internal = RequestError.internal_error().code
        message["error"] = {
            "code": internal,
            "message": given if isinstance(given, str) else "Error",
        }
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
