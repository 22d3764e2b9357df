"""A local stand-in for the Anthropic Messages API, for tests that drive the real SDK.

``AnthropicServer`` listens on ``127.0.0.1`` (an ephemeral port) in a daemon
thread and answers ``POST /v1/messages`` (with or without ``?beta=true``) with
replies a test scripts in advance: a FIFO queue of ``TextReply``,
``ToolUseReply``, ``ErrorReply``, ``MalformedReply`` and ``RedirectReply``
(their usage, prompt cache counts included, is what ``message_start``
reports), then an optional default responder, then the text ``"ok"``. A
request with ``"stream": true`` gets Server-Sent Events in the order the API
documents (https://docs.anthropic.com/en/api/messages-streaming)::

    message_start → (content_block_start → content_block_delta… → content_block_stop)…
    → message_delta → message_stop

Every request is recorded (path, headers, parsed JSON body, the SSE events sent
back) so a test can assert the exact JSON the SDK put on the wire.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.support.local_api import JsonApiHandler, LocalApiServer

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""The API's ``error.type`` for each HTTP status (https://docs.anthropic.com/en/api/errors)."""


@dataclass(frozen=True)
class TextReply:
    """An assistant message with one ``text`` block.

    The text is streamed in ``pieces`` ``text_delta`` events; ``delay_s``
    seconds pass before each SSE event after ``message_start``. With
    ``hold``, the server waits for that event (at most 60 s) after the text
    deltas, before it ends the block and the message: a turn whose text has
    streamed and that has not ended until the test says so. ``model`` names
    the model that answered (default: the one asked for), as a proxy may.
    """

    text: str
    stop_reason: str = "end_turn"
    input_tokens: int = 10
    output_tokens: int = 5
    pieces: int = 3
    delay_s: float = 0.0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    hold: threading.Event | None = None
    model: str | None = None


@dataclass(frozen=True)
class ToolUseReply:
    """An assistant message ending in ``tool_use`` blocks (``stop_reason`` ``tool_use``).

    ``text``, when non-empty, is a ``text`` block sent before them; ``also``
    holds more ``(id, name, input)`` calls after the first (parallel tool
    use). The JSON of each ``input`` is streamed in ``pieces``
    ``input_json_delta`` events. ``stop_reason`` ``max_tokens`` plays a
    message cut off in its tool calls.
    """

    name: str
    input: dict[str, Any]
    id: str = "toolu_01"
    text: str = ""
    input_tokens: int = 10
    output_tokens: int = 5
    pieces: int = 3
    delay_s: float = 0.0
    also: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    stop_reason: str = "tool_use"
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


@dataclass(frozen=True)
class ErrorReply:
    """An error body ``{"type": "error", "error": {"type", "message"}}`` with ``status``.

    ``error_type`` defaults to the API's type for ``status``. ``headers`` are
    added to the response (e.g. ``retry-after-ms``, ``request-id``). With
    ``mid_stream`` a streaming request gets HTTP 200, ``message_start``, then an
    ``error`` event, as the API does when it overloads during generation.
    """

    status: int
    message: str
    error_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    mid_stream: bool = False

    @property
    def body(self) -> dict[str, Any]:
        error_type = self.error_type or ERROR_TYPES.get(self.status, "api_error")
        return {"type": "error", "error": {"type": error_type, "message": self.message}}


@dataclass(frozen=True)
class MalformedReply:
    """A streaming answer (HTTP 200): ``message_start``, then an
    ``event_name`` event whose ``data:`` line is ``data`` as given (e.g.
    text that is not JSON)."""

    data: str
    event_name: str = "content_block_start"


@dataclass(frozen=True)
class RedirectReply:
    """An HTTP redirect (``status``, 307 by default) to ``location``."""

    location: str
    status: int = 307


Reply = TextReply | ToolUseReply | ErrorReply | MalformedReply | RedirectReply
Responder = Callable[[dict[str, Any]], Reply]
"""Builds a reply from a request's parsed JSON body."""


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, and the SSE events it answered with.

    ``headers`` keys are lower-case; ``body`` is the parsed JSON body;
    ``events`` is ``[(event_name, data)]`` of the SSE answer, in order (empty
    for a non-streaming answer; the last one may not have reached a client that
    hung up); ``received_at`` is when its body had been read
    (``time.monotonic()``, seconds), to measure the gap between two requests;
    ``sent_at[i]`` is when ``events[i]`` was written (the same clock).
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    received_at: float = field(default_factory=time.monotonic)
    sent_at: list[float] = field(default_factory=list)


class AnthropicServer(LocalApiServer[Reply, RecordedRequest]):
    """A programmable Anthropic Messages API on ``127.0.0.1``; see the module docstring.

    Use as a context manager, or call ``start()`` and ``stop()``. Thread-safe:
    the test thread scripts replies while the server thread answers.
    """

    fallback = TextReply("ok")

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``, for the SDK's ``base_url``."""
        return self.origin

    def reply_text(
        self,
        text: str,
        stop_reason: str = "end_turn",
        input_tokens: int = 10,
        output_tokens: int = 5,
        **options: Any,
    ) -> None:
        """Queue a ``TextReply`` (``options``: ``pieces``, ``delay_s``)."""
        self.reply(TextReply(text, stop_reason, input_tokens, output_tokens, **options))

    def reply_tool_use(
        self, name: str, input: dict[str, Any], id: str = "toolu_01", **options: Any
    ) -> None:
        """Queue a ``ToolUseReply`` (``options``: ``text``, tokens, ``pieces``, ``delay_s``)."""
        self.reply(ToolUseReply(name, input, id, **options))

    def reply_error(
        self,
        status: int,
        message: str,
        error_type: str | None = None,
        headers: dict[str, str] | None = None,
        mid_stream: bool = False,
    ) -> None:
        """Queue an ``ErrorReply``."""
        self.reply(ErrorReply(status, message, error_type, dict(headers or {}), mid_stream))

    def reply_malformed(self, data: str, event_name: str = "content_block_start") -> None:
        """Queue a ``MalformedReply``."""
        self.reply(MalformedReply(data, event_name))

    def reply_redirect(self, location: str, status: int = 307) -> None:
        """Queue a ``RedirectReply``."""
        self.reply(RedirectReply(location, status))


class _MessagesHandler(JsonApiHandler):
    owner: AnthropicServer
    route = "/v1/messages"

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return ErrorReply(status, message).body

    def do_POST(self) -> None:
        body = self.request_json()
        if body is None:
            return
        recorded = RecordedRequest(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        request_id = self.owner._record(recorded)
        reply = self.owner._next_reply(body)
        streaming = isinstance(body, dict) and body.get("stream") is True
        model = body.get("model", "") if isinstance(body, dict) else ""
        model = getattr(reply, "model", None) or model
        headers = {"request-id": request_id}
        if isinstance(reply, RedirectReply):
            self.send_json(reply.status, {}, headers | {"location": reply.location})
            return
        if isinstance(reply, MalformedReply):
            start = next(_events(TextReply(""), model, request_id))
            self._start_sse(headers)
            self.wfile.write(
                f"event: {start[0]}\ndata: {json.dumps(start[1])}\n\n"
                f"event: {reply.event_name}\ndata: {reply.data}\n\n".encode()
            )
            self.wfile.flush()
            return
        if isinstance(reply, ErrorReply):
            headers |= reply.headers
            if not (reply.mid_stream and streaming):
                self.send_json(reply.status, reply.body, headers)
                return
        assert not isinstance(reply, MalformedReply | RedirectReply)
        if streaming:
            self._send_sse(_events(reply, model, request_id), headers, recorded, reply)
        else:
            assert not isinstance(reply, ErrorReply)
            self.send_json(200, _message(reply, model, request_id), headers)

    def _start_sse(self, headers: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")  # the body ends when the socket closes
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True

    def _send_sse(
        self,
        events: Iterator[tuple[str, dict[str, Any]]],
        headers: dict[str, str],
        recorded: RecordedRequest,
        reply: TextReply | ToolUseReply | ErrorReply,
    ) -> None:
        self._start_sse(headers)
        delay_s = 0.0 if isinstance(reply, ErrorReply) else reply.delay_s
        hold = reply.hold if isinstance(reply, TextReply) else None
        for i, (name, data) in enumerate(events):
            if i and delay_s:
                time.sleep(delay_s)
            if hold is not None and name == "content_block_stop":
                hold.wait(timeout=60)
            # Recorded before it is written, so a client that has read the last
            # event always finds it recorded.
            recorded.events.append((name, data))
            recorded.sent_at.append(time.monotonic())
            try:
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return  # the client gave up (e.g. its read timeout); nothing to report


def _content(reply: TextReply | ToolUseReply) -> list[dict[str, Any]]:
    if isinstance(reply, TextReply):
        return [{"type": "text", "text": reply.text}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for tool_id, name, tool_input in ((reply.id, reply.name, reply.input), *reply.also):
        blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
    return blocks


def _stop_reason(reply: TextReply | ToolUseReply) -> str:
    return reply.stop_reason


def _message(reply: TextReply | ToolUseReply, model: str, request_id: str) -> dict[str, Any]:
    """The non-streaming answer: a complete ``Message`` object."""
    return {
        "id": f"msg_{request_id}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _content(reply),
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _usage(reply, reply.output_tokens),
    }


def _usage(reply: TextReply | ToolUseReply | ErrorReply, output_tokens: int) -> dict[str, int]:
    if isinstance(reply, ErrorReply):
        return {"input_tokens": 10, "output_tokens": output_tokens}
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": reply.cache_creation_input_tokens,
        "cache_read_input_tokens": reply.cache_read_input_tokens,
    }


def _events(
    reply: TextReply | ToolUseReply | ErrorReply, model: str, request_id: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The streaming answer, event by event, as ``(event_name, data)``."""
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": f"msg_{request_id}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": _usage(reply, 1),
            },
        },
    )
    if isinstance(reply, ErrorReply):
        yield ("error", reply.body)
        return
    for index, block in enumerate(_content(reply)):
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": p} for p in _split(block["text"], reply.pieces)
            ]
        else:
            start = {**block, "input": {}}
            partial = _split(json.dumps(block["input"]), reply.pieces)
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in partial]
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield ("content_block_stop", {"type": "content_block_stop", "index": index})
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        },
    )
    yield ("message_stop", {"type": "message_stop"})


def _split(text: str, pieces: int) -> list[str]:
    """``text`` cut into at most ``pieces`` consecutive non-empty pieces (``[""]`` if empty)."""
    if not text:
        return [""]
    size = math.ceil(len(text) / max(1, pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


AnthropicServer.handler = _MessagesHandler
