"""``oma codec-server``: Temporal's remote codec endpoints over OMA's payload codec.

The Temporal Web UI ("Codec Server" setting) and ``temporal ...
--codec-endpoint URL`` send ``POST URL/decode`` (and ``/encode``) with a JSON
body ``{"payloads": [...]}``, each payload in protobuf JSON (``metadata``
values and ``data`` base64), and read the same shape back
(https://docs.temporal.io/production-deployment/data-encryption). The CLI adds
an ``X-Namespace`` header and, with ``--codec-auth``, an ``Authorization``
header; the Web UI sends them from the browser, so the server answers the
CORS preflight (``OPTIONS``) for the one configured UI origin.

Served with aiohttp: an asyncio HTTP/1.1 server with keep-alive, body-size
limits and a test client, so the async codec runs as it does in a worker and
the server needs no thread of its own. The stdlib ``http.server`` would need
its own request limits and threading around an async codec.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from oma.runtime.codec import DECODE_ERROR_METADATA, PLAINTEXT_METADATA, AesGcmCodec

DEFAULT_PORT = 8081
"""The port Temporal's codec server samples use."""

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest request body accepted: Temporal's default payload size limit
is 2 MiB per payload and a history page holds many."""

_ALLOWED_HEADERS = "Authorization, Content-Type, X-Namespace"


def codec_app(
    codec: AesGcmCodec, *, ui_origin: str | None = None, token: str | None = None
) -> web.Application:
    """The aiohttp application serving ``POST /encode`` and ``POST /decode``.

    ``ui_origin`` (e.g. ``http://localhost:8233``) is the one origin CORS
    allows, with credentials; ``token``, when given, must come as
    ``Authorization: Bearer <token>`` or the answer is 401. A body that is not
    ``{"payloads": [...]}`` of protobuf JSON payloads is a 400 with the reason.
    Payloads ``decode`` cannot decrypt (a key this server does not hold) come
    back as they are, still encrypted.
    """

    @web.middleware
    async def cors_and_auth(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.method == "OPTIONS":
            response: web.StreamResponse = web.Response(status=204)
        elif token is not None and not _bearer_matches(request, token):
            response = web.json_response(
                {"message": "missing or wrong bearer token"},
                status=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        else:
            response = await handler(request)
        if ui_origin is not None and request.headers.get("Origin") == ui_origin:
            response.headers["Access-Control-Allow-Origin"] = ui_origin
            response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = _ALLOWED_HEADERS
            response.headers["Vary"] = "Origin"
        return response

    async def encode(request: web.Request) -> web.Response:
        payloads = await _payloads(request)
        return _answer(await codec.encode(payloads.payloads))

    async def decode(request: web.Request) -> web.Response:
        payloads = await _payloads(request)
        return _answer([_shown(p) for p in await codec.decode(payloads.payloads)])

    async def preflight(request: web.Request) -> web.Response:
        return web.Response(status=204)

    app = web.Application(middlewares=[cors_and_auth], client_max_size=MAX_BODY_BYTES)
    app.router.add_post("/encode", encode)
    app.router.add_post("/decode", decode)
    app.router.add_route("OPTIONS", "/{tail:.*}", preflight)
    return app


async def serve(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Start ``app`` on ``host:port``; the caller cleans the runner up."""
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


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
        return json_format.Parse(text, Payloads(), ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError) as err:
        raise web.HTTPBadRequest(
            text=f'expected {{"payloads": [...]}} of protobuf JSON payloads: {err}'
        ) from None


def _answer(payloads: list[Payload]) -> web.Response:
    return web.Response(
        text=json_format.MessageToJson(Payloads(payloads=payloads)),
        content_type="application/json",
    )


def _shown(payload: Payload) -> Payload:
    """A decoded payload without the codec's in-process marks."""
    if PLAINTEXT_METADATA in payload.metadata or DECODE_ERROR_METADATA in payload.metadata:
        payload = Payload(metadata=dict(payload.metadata), data=payload.data)
        payload.metadata.pop(PLAINTEXT_METADATA, None)
        payload.metadata.pop(DECODE_ERROR_METADATA, None)
    return payload
