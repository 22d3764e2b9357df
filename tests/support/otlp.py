"""An OTLP/HTTP receiver on 127.0.0.1, for the tests that trace a real process."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Collector:
    """An OTLP/HTTP receiver on 127.0.0.1: each ``ExportTraceServiceRequest``
    POSTed to ``/v1/traces``."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    received.append(ExportTraceServiceRequest.FromString(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(service.name, span name, attributes) of every span received."""
        out = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        values = {a.key: a.value for a in span.attributes}
                        out.append((resource["service.name"], span.name, values))
        return out
