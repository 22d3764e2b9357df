"""What the HTTP providers share: reading an error answer's body and the
delay it asks for, and the errors of a redirect and of a broken stream."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping

import httpx2

from oma.core.schema.errors import ProviderError

MALFORMED_STREAM = "malformed_stream"
"""The ``error_type`` of a streamed answer whose chunk or event is not JSON
or not of the API's shape (ours: the server sent no error type)."""


def body_text(body: object) -> str:
    """An error answer's body as text, cut to 500 characters (``""`` for none)."""
    text = body if isinstance(body, str) else "" if body is None else str(body)
    return text[:500]


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds the API asks to wait: ``retry-after-ms`` (milliseconds, sent by
    Anthropic and OpenAI), else ``retry-after`` (seconds, or an HTTP date,
    RFC 9110 section 10.2.3). ``None`` when neither is there or parses."""
    try:
        return float(headers["retry-after-ms"]) / 1000
    except (KeyError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def redirect_error(api: str, response: httpx2.Response) -> ProviderError:
    """The ``ProviderError`` (not retryable) for a 3xx ``response`` from
    ``api`` (e.g. ``"Chat Completions API at https://host/v1/chat/completions"``).
    The providers' clients never follow a redirect: the request carries the
    worker's key, whose allowed origins are checked before it is sent
    (``oma.runtime.credentials``), not after the server points elsewhere."""
    location = response.headers.get("location") or "nowhere"
    return ProviderError(
        f"{api} answered HTTP {response.status_code}, a redirect to {location[:200]}, which is "
        "not followed (a request with the worker's key goes only to the base URL it was "
        "allowed for): use the URL it redirects to as the base URL",
        error_type="redirect",
        status=response.status_code,
        request_id=response.headers.get("request-id") or response.headers.get("x-request-id"),
    )


def malformed_stream(api: str, sent: str) -> ProviderError:
    """The ``ProviderError`` (retryable) for a streamed answer of ``api``
    (e.g. ``"Chat Completions API at http://host/v1"``) that the request was
    accepted for but that is broken (a proxy cutting a chunk, a server that is
    not quite compatible); ``sent`` says what came."""
    return ProviderError(f"the {api} sent {sent}", error_type=MALFORMED_STREAM, retryable=True)
