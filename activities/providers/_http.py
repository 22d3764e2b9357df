"""What the HTTP providers share: reading an error answer's body and the delay it asks for."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping


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
