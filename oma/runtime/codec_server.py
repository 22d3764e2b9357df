"""``oma codec-server``: Temporal's remote codec endpoints over OMA's payload
codec and payload store.

The Temporal Web UI ("Codec Server" setting) and ``temporal ...
--codec-endpoint URL`` send ``POST URL/decode`` (and ``/encode``) with a JSON
body ``{"payloads": [...]}``, each payload in protobuf JSON (``metadata``
values and ``data`` base64), and read the same shape back
(https://docs.temporal.io/production-deployment/data-encryption). The CLI adds
an ``X-Namespace`` header and, with ``--codec-auth``, an ``Authorization``
header; the Web UI sends them from the browser, so the server answers the
CORS preflight (``OPTIONS``) for the configured UI origins.

A payload kept in the payload store (``oma.runtime.payload_store``: the
history holds a reference) is read from the store on ``/decode`` and given
back decoded, so the Web UI and the CLI show what was stored, not the
reference; ``/encode`` encrypts and stores nothing (what it gives back is
sent inline, as the CLI would have sent it).

A refused request is answered 401 at once, with a plain-text body, and logged
(logger ``oma.codec_server``) as it happens, because neither caller says why:
the Web UI reads any JSON answer as decoded payloads (a JSON error body shows
every payload as ``null``; text makes it report a codec failure), and the
``temporal`` CLI retries a failed codec call as a retryable gRPC error until
its deadline, then prints only ``context deadline exceeded``.

Served with aiohttp: an asyncio HTTP/1.1 server with keep-alive, body-size
limits and a test client, so the async codec runs as it does in a worker and
the server needs no thread of its own. The stdlib ``http.server`` would need
its own request limits and threading around an async codec.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Collection, Iterable
from urllib.parse import urlsplit

from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from oma.runtime.codec import DECODE_ERROR_METADATA, MISSING_KEY_METADATA, AesGcmCodec
from oma.runtime.payload_store import PayloadStore, external_storage, retrieve

DEFAULT_PORT = 8081
"""The port Temporal's codec server samples use."""

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest request body accepted: Temporal's default payload size limit
is 2 MiB per payload and a history page holds many."""

_ALLOWED_HEADERS = "Authorization, Content-Type, X-Namespace"

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
"""The names of this machine a loopback URL may use: a UI origin on one of
them admits the others (``oma dev`` prints ``127.0.0.1``, people type
``localhost``), and a server bound to loopback answers only requests whose
``Host`` is one of them."""

log = logging.getLogger("oma.codec_server")


def ui_origins(origins: Iterable[str]) -> frozenset[str]:
    """The origins CORS allows for the UI ``origins`` given: each one as
    written (without a trailing ``/``) and, for a loopback origin, the same
    scheme and port under every name in ``LOOPBACK_HOSTS``."""
    allowed: set[str] = set()
    for origin in origins:
        origin = origin.rstrip("/")
        allowed.add(origin)
        parts = urlsplit(origin)
        host = parts.netloc.rpartition(":")[0] if parts.port else parts.netloc
        if host in LOOPBACK_HOSTS:
            port = f":{parts.port}" if parts.port else ""
            allowed.update(f"{parts.scheme}://{name}{port}" for name in LOOPBACK_HOSTS)
    return frozenset(allowed)


def codec_app(
    codec: AesGcmCodec | None,
    *,
    store: PayloadStore | None = None,
    ui_origin: str | Collection[str] | None = None,
    token: str | None = None,
    loopback_only: bool = False,
) -> web.Application:
    """The aiohttp application serving ``POST /encode`` and ``POST /decode``.

    ``ui_origin`` (e.g. ``http://localhost:8233``, or several) are the origins
    CORS allows, with credentials, widened by ``ui_origins``; ``token``, when
    given, must come as ``Authorization: Bearer <token>`` or the answer is 401
    (text, not JSON: see the module's docstring). ``loopback_only`` answers 403
    to a request whose ``Host`` is not a loopback name, so a web page that
    rebinds its own DNS name to 127.0.0.1 cannot read what this server decodes.
    A body that is not ``{"payloads": [...]}`` of protobuf JSON payloads, or
    one whose ``data`` or a ``metadata`` value is not base64, is a 400 with the
    reason. ``codec`` (``None``: no encryption) decodes and encodes; a
    reference to a payload kept in ``store`` is read from it first, on
    ``decode``. Payloads ``decode`` cannot decrypt (a key this server does not
    hold) come back as they are, still encrypted; a reference it cannot follow
    (no such store, the payload gone) as it is, and the server's console says
    why.
    """
    storage = external_storage(store)
    origins = ui_origins([ui_origin] if isinstance(ui_origin, str) else ui_origin or ())

    @web.middleware
    async def cors_and_auth(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if loopback_only and _host_name(request.host) not in LOOPBACK_HOSTS:
            log.warning(
                "refused %s %s: Host %r is not this machine",
                request.method,
                request.path,
                request.host,
            )
            return web.Response(status=403, text=f"Host {request.host!r} is not this machine")
        if request.method == "OPTIONS":
            response: web.StreamResponse = web.Response(status=204)
        elif token is not None and not _bearer_matches(request, token):
            reason = _refusal(request)
            log.warning("refused %s %s (401): %s", request.method, request.path, reason)
            response = web.Response(status=401, text=reason, headers={"WWW-Authenticate": "Bearer"})
        else:
            response = await handler(request)
        origin = request.headers.get("Origin")
        if origin in origins:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = _ALLOWED_HEADERS
            response.headers["Vary"] = "Origin"
        return response

    async def encode(request: web.Request) -> web.Response:
        payloads = list((await _payloads(request)).payloads)
        return _answer(await codec.encode(payloads) if codec is not None else payloads)

    async def decode(request: web.Request) -> web.Response:
        payloads = [await _retrieved(p) for p in (await _payloads(request)).payloads]
        decoded = await codec.decode(payloads) if codec is not None else payloads
        return _answer([_shown(p) for p in decoded])

    async def _retrieved(payload: Payload) -> Payload:
        try:
            [found] = await retrieve(storage, [payload])
        except Exception as err:  # never a 500: the caller shows the reference
            log.warning("a stored payload left as its reference: %s", err)
            return payload
        return found

    async def preflight(request: web.Request) -> web.Response:
        return web.Response(status=204)

    app = web.Application(middlewares=[cors_and_auth], client_max_size=MAX_BODY_BYTES)
    app.router.add_post("/encode", encode)
    app.router.add_post("/decode", decode)
    app.router.add_route("OPTIONS", "/{tail:.*}", preflight)
    return app


async def serve(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Start ``app`` on ``host:port``; the caller cleans the runner up.

    No access log: a Web UI page decodes many times, and the console (``oma
    dev``'s is its worker's) should show the refusals, which ``codec_app`` logs."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


async def serve_on(app: web.Application, sock: socket.socket) -> web.AppRunner:
    """Start ``app`` on ``sock``, a socket already bound (``oma dev`` binds its
    endpoint's before the dev server starts, which it tells the URL); the
    caller cleans the runner up."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return runner


def _host_name(host: str) -> str:
    """``127.0.0.1`` of ``127.0.0.1:8081``, ``[::1]`` of ``[::1]:8081``."""
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if ":" in host else host


def _refusal(request: web.Request) -> str:
    if "Authorization" not in request.headers:
        return (
            "no Authorization header: this codec server requires 'Authorization: Bearer "
            "<token>' (temporal: --codec-auth 'Bearer <token>'; the Web UI cannot send one)"
        )
    return "wrong bearer token in the Authorization header"


def _bearer_matches(request: web.Request, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # bytes, not str: compare_digest refuses str with a non-ASCII character
    # (a TypeError, a 500); aiohttp reads header bytes as UTF-8 with surrogate
    # escapes, so this gives back the bytes the caller sent
    sent = given.strip().encode("utf-8", "surrogateescape")
    return scheme.lower() == "bearer" and hmac.compare_digest(sent, token.encode())


async def _payloads(request: web.Request) -> Payloads:
    try:
        text = (await request.read()).decode("utf-8")
    except UnicodeDecodeError:
        raise web.HTTPBadRequest(text="the body is not UTF-8 text") from None
    try:
        body = json.loads(text)
        if not isinstance(body, dict):
            raise ValueError("the body is not a JSON object")
        _check_base64(body.get("payloads"))
        return json_format.ParseDict(body, Payloads(), ignore_unknown_fields=True)
    except (ValueError, json_format.ParseError, RecursionError) as err:
        raise web.HTTPBadRequest(
            text=f'expected {{"payloads": [...]}} of protobuf JSON payloads: {err}'
        ) from None


_BASE64 = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")
"""Standard or URL-safe base64, padded or not: what protobuf JSON accepts for
``bytes`` (https://protobuf.dev/programming-guides/json/)."""


def _check_base64(payloads: object) -> None:
    """Raise ``ValueError`` naming the first ``data`` or ``metadata`` value of
    ``payloads`` (a protobuf JSON list) that is not base64. The protobuf parser
    does not check: it skips what is not base64, so ``"!!"`` reads as no
    bytes at all, and the payload would come back 200 and empty."""
    if not isinstance(payloads, list):
        return  # not a list: the protobuf parser says so
    for n, payload in enumerate(payloads):
        if not isinstance(payload, dict):
            continue
        metadata = payload.get("metadata")
        fields = [("data", payload.get("data"))]
        if isinstance(metadata, dict):
            fields += [(f"metadata {key!r}", value) for key, value in metadata.items()]
        for name, value in fields:
            if isinstance(value, str) and not _is_base64(value):
                raise ValueError(f"the {name} of payload {n} is not base64")


def _is_base64(text: str) -> bool:
    # a last group of one character holds no whole byte
    return _BASE64.fullmatch(text) is not None and len(text.rstrip("=")) % 4 != 1


def _answer(payloads: list[Payload]) -> web.Response:
    return web.Response(
        text=json_format.MessageToJson(Payloads(payloads=payloads)),
        content_type="application/json",
    )


def _shown(payload: Payload) -> Payload:
    """A decoded payload without the codec's in-process marks."""
    if MISSING_KEY_METADATA in payload.metadata or DECODE_ERROR_METADATA in payload.metadata:
        payload = Payload(metadata=dict(payload.metadata), data=payload.data)
        payload.metadata.pop(MISSING_KEY_METADATA, None)
        payload.metadata.pop(DECODE_ERROR_METADATA, None)
    return payload
