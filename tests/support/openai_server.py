"""A local stand-in for the OpenAI Chat Completions API, for tests that drive the real SDK.

``OpenAIServer`` listens on ``127.0.0.1`` (an ephemeral port) in a daemon
thread and answers ``POST /v1/chat/completions`` with replies a test scripts
in advance: a FIFO queue of ``TextReply``, ``ToolCallsReply``,
``ErrorReply``, ``MalformedReply`` and ``RedirectReply``, then an optional
default responder, then the text ``"ok"``.
A request with ``"stream": true`` gets Server-Sent Events as the API sends
them (https://platform.openai.com/docs/api-reference/chat-streaming)::

    data: {chunk: role} → data: {chunk: delta.content | delta.tool_calls}…
    → data: {chunk: finish_reason} → data: {chunk: usage, choices: []} → data: [DONE]

(the usage chunk only with ``stream_options.include_usage``). Every request is
recorded (path, headers, parsed JSON body, the chunks sent back) so a test can
assert the exact JSON the SDK put on the wire.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.support.local_api import JsonApiHandler, LocalApiServer

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}
"""The ``error.type`` OpenAI sends with each HTTP status."""


@dataclass(frozen=True)
class TextReply:
    """An assistant message with text ``content``, streamed in ``pieces``
    ``delta.content`` chunks; ``delay_s`` seconds pass before each chunk
    after the first. ``cached_tokens`` is ``prompt_tokens_details.cached_tokens``
    (part of ``prompt_tokens``, as the API counts)."""

    text: str
    finish_reason: str = "stop"
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: int = 0
    pieces: int = 3
    delay_s: float = 0.0


@dataclass(frozen=True)
class ToolCallsReply:
    """An assistant message with ``tool_calls`` (``finish_reason`` ``tool_calls``).

    ``calls`` are ``(id, name, arguments)``; ``arguments`` is a dict (sent as
    JSON) or a raw string (to send broken JSON), streamed in ``pieces``
    ``delta.tool_calls[].function.arguments`` chunks. ``text``, when
    non-empty, is ``content`` sent before them.
    """

    calls: tuple[tuple[str, str, dict[str, Any] | str], ...]
    text: str = ""
    finish_reason: str = "tool_calls"
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: int = 0
    pieces: int = 3
    delay_s: float = 0.0


@dataclass(frozen=True)
class ErrorReply:
    """An error body ``{"error": {"message", "type", "param", "code"}}`` with
    ``status``; ``headers`` are added (e.g. ``retry-after-ms``). With
    ``mid_stream`` a streaming request gets HTTP 200, one chunk, then
    ``data: {"error": ...}``."""

    status: int
    message: str
    error_type: str | None = None
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    mid_stream: bool = False

    @property
    def body(self) -> dict[str, Any]:
        error_type = self.error_type or ERROR_TYPES.get(self.status, "server_error")
        return {
            "error": {
                "message": self.message,
                "type": error_type,
                "param": None,
                "code": self.code,
            }
        }


@dataclass(frozen=True)
class MalformedReply:
    """A streaming answer (HTTP 200) whose second ``data:`` line is ``data``
    as given (e.g. text that is not JSON), after one well-formed chunk."""

    data: str


@dataclass(frozen=True)
class RedirectReply:
    """An HTTP redirect (``status``, 307 by default) to ``location``."""

    location: str
    status: int = 307


Reply = TextReply | ToolCallsReply | ErrorReply | MalformedReply | RedirectReply
Responder = Callable[[dict[str, Any]], Reply]
"""Builds a reply from a request's parsed JSON body."""


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, and the chunks it answered with
    (``headers`` keys lower-case; ``chunks`` the parsed ``data:`` payloads,
    ``[DONE]`` left out)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    chunks: list[dict[str, Any]] = field(default_factory=list)
    received_at: float = field(default_factory=time.monotonic)


class OpenAIServer(LocalApiServer[Reply, RecordedRequest]):
    """A programmable Chat Completions API on ``127.0.0.1``; see the module docstring.

    Use as a context manager, or call ``start()`` and ``stop()``. Thread-safe.
    """

    fallback = TextReply("ok")

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, for the SDK's ``base_url``."""
        return self.origin + "/v1"

    def reply_text(self, text: str, **options: Any) -> None:
        """Queue a ``TextReply`` (``options``: its other fields)."""
        self.reply(TextReply(text, **options))

    def reply_tool_call(
        self, name: str, arguments: dict[str, Any] | str, id: str = "call_01", **options: Any
    ) -> None:
        """Queue a ``ToolCallsReply`` with one call (``options``: its other fields)."""
        self.reply(ToolCallsReply(((id, name, arguments),), **options))

    def reply_malformed(self, data: str) -> None:
        """Queue a ``MalformedReply``."""
        self.reply(MalformedReply(data))

    def reply_redirect(self, location: str, status: int = 307) -> None:
        """Queue a ``RedirectReply``."""
        self.reply(RedirectReply(location, status))

    def reply_error(self, status: int, message: str, **options: Any) -> None:
        """Queue an ``ErrorReply`` (``options``: ``error_type``, ``code``, ``headers``,
        ``mid_stream``)."""
        self.reply(ErrorReply(status, message, **options))


class _ChatHandler(JsonApiHandler):
    owner: OpenAIServer
    route = "/v1/chat/completions"

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
        streaming = body.get("stream") is True
        headers = {"x-request-id": request_id}
        if isinstance(reply, RedirectReply):
            self.send_json(reply.status, {}, headers | {"location": reply.location})
            return
        if isinstance(reply, MalformedReply):
            self._send_malformed(reply, body.get("model", ""), request_id, headers)
            return
        if isinstance(reply, ErrorReply):
            headers |= reply.headers
            if not (reply.mid_stream and streaming):
                self.send_json(reply.status, reply.body, headers)
                return
        model = body.get("model", "")
        assert not isinstance(reply, MalformedReply | RedirectReply)
        if streaming:
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._send_sse(_chunks(reply, model, request_id, usage), headers, recorded, reply)
        else:
            assert not isinstance(reply, ErrorReply)
            self.send_json(200, _completion(reply, model, request_id), headers)

    def _send_malformed(
        self, reply: MalformedReply, model: str, request_id: str, headers: dict[str, str]
    ) -> None:
        first = next(_chunks(TextReply(""), model, request_id, include_usage=False))
        self._start_sse(headers)
        self.wfile.write(f"data: {json.dumps(first)}\n\ndata: {reply.data}\n\n".encode())
        self.wfile.flush()

    def _start_sse(self, headers: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True

    def _send_sse(
        self,
        chunks: Iterator[dict[str, Any]],
        headers: dict[str, str],
        recorded: RecordedRequest,
        reply: TextReply | ToolCallsReply | ErrorReply,
    ) -> None:
        self._start_sse(headers)
        delay_s = 0.0 if isinstance(reply, ErrorReply) else reply.delay_s
        try:
            for i, chunk in enumerate(chunks):
                if i and delay_s:
                    time.sleep(delay_s)
                recorded.chunks.append(chunk)
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            if not isinstance(reply, ErrorReply):
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return


def _arguments(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _usage(reply: TextReply | ToolCallsReply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cached_tokens, "audio_tokens": 0},
    }


def _completion(reply: TextReply | ToolCallsReply, model: str, request_id: str) -> dict[str, Any]:
    """The non-streaming answer: a complete ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if isinstance(reply, ToolCallsReply):
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": _arguments(a)}}
            for i, n, a in reply.calls
        ]
    return {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        "usage": _usage(reply),
    }


def _chunks(
    reply: TextReply | ToolCallsReply | ErrorReply, model: str, request_id: str, include_usage: bool
) -> Iterator[dict[str, Any]]:
    """The streaming answer, chunk by chunk."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{request_id}",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    yield chunk({"role": "assistant", "content": ""})
    if isinstance(reply, ErrorReply):
        yield reply.body
        return
    if reply.text:
        for piece in _split(reply.text, reply.pieces):
            yield chunk({"content": piece})
    if isinstance(reply, ToolCallsReply):
        for index, (call_id, name, arguments) in enumerate(reply.calls):
            pieces = _split(_arguments(arguments), reply.pieces)
            first = {"id": call_id, "type": "function", "function": {"name": name}}
            for n, piece in enumerate(pieces):
                call: dict[str, Any] = {"index": index, **(first if n == 0 else {})}
                call["function"] = {**call.get("function", {}), "arguments": piece}
                yield chunk({"tool_calls": [call]})
    yield chunk({}, reply.finish_reason)
    if include_usage:
        yield {
            "id": f"chatcmpl-{request_id}",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "choices": [],
            "usage": _usage(reply),
        }


def _split(text: str, pieces: int) -> list[str]:
    """``text`` cut into at most ``pieces`` consecutive non-empty pieces (``[""]`` if empty)."""
    if not text:
        return [""]
    size = math.ceil(len(text) / max(1, pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


OpenAIServer.handler = _ChatHandler
