"""What the local stand-ins for the model APIs share (``tests/support/anthropic_server.py``,
``tests/support/openai_server.py``): an HTTP server on ``127.0.0.1`` in a daemon
thread, a FIFO queue of scripted replies, an optional default responder, and
the record of every request."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar
from urllib.parse import urlsplit

SOCKET_TIMEOUT_S = 5.0
"""How long a handler waits on a stuck client, and ``stop`` on the server thread."""

ReplyT = TypeVar("ReplyT")
RequestT = TypeVar("RequestT")


class LocalApiServer(Generic[ReplyT, RequestT]):
    """Serves ``handler`` (a ``BaseHTTPRequestHandler`` class whose ``owner``
    is set to this server) on an ephemeral port. Use as a context manager, or
    call ``start()`` and ``stop()``. Thread-safe: the test thread scripts
    replies while the server thread answers. A subclass gives ``handler``,
    ``fallback`` (the reply when nothing is queued and there is no default
    responder) and ``base_url``."""

    handler: type[BaseHTTPRequestHandler]
    fallback: ReplyT

    def __init__(
        self,
        default_responder: Callable[[dict[str, Any]], ReplyT] | None = None,
        *,
        keep_requests: bool = True,
    ) -> None:
        self.default_responder = default_responder
        self.keep_requests = keep_requests
        """Whether ``requests`` keeps what was received (a benchmark's
        hundreds of megabytes of conversations need not be)."""
        self._lock = threading.Lock()
        self._replies: deque[ReplyT] = deque()
        self._requests: list[RequestT] = []
        self._request_count = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> Self:
        """Bind an ephemeral port and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        handler = type("Handler", (self.handler,), {"owner": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (idempotent)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=SOCKET_TIMEOUT_S)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``."""
        if self._httpd is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- scripting ---------------------------------------------------------

    def reply(self, reply: ReplyT) -> None:
        """Queue ``reply`` for the next request."""
        with self._lock:
            self._replies.append(reply)

    def reset(self) -> None:
        """Forget queued replies, recorded requests and the default responder."""
        with self._lock:
            self._replies.clear()
            self._requests.clear()
            self.default_responder = None

    @property
    def requests(self) -> list[RequestT]:
        """A snapshot of the requests received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    # -- used by the handler -----------------------------------------------

    def _record(self, request: RequestT) -> str:
        with self._lock:
            if self.keep_requests:
                self._requests.append(request)
            self._request_count += 1
            return f"req_test_{self._request_count:04d}"

    def _next_reply(self, body: dict[str, Any]) -> ReplyT:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
            responder = self.default_responder
        return responder(body) if responder is not None else self.fallback


MAX_BODY_BYTES = 32 * 1024 * 1024
"""The largest request body the servers read."""


class JsonApiHandler(BaseHTTPRequestHandler):
    """The request handling both APIs share: one POST ``route``, a JSON body
    (404, 413 and 400 in the API's own error shape, ``error_body``
    otherwise), and JSON answers that close the connection."""

    route: str
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT_S  # a stuck client cannot hold a handler thread forever

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The API's error JSON for ``status``."""
        raise TypeError(f"{type(self).__name__} gives no error_body")

    def request_json(self) -> Any | None:
        """The request's JSON body; ``None`` once an error answer was sent."""
        if urlsplit(self.path).path != self.route:
            self.send_json(404, self.error_body(404, f"no route for POST {self.path}"), {})
            return None
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            self.send_json(413, self.error_body(413, "request body too large"), {})
            return None
        try:
            return json.loads(self.rfile.read(length))
        except ValueError:
            self.send_json(400, self.error_body(400, "request body is not JSON"), {})
            return None

    def send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True
