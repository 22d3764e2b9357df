"""Turning OMA errors into Temporal failures, once, for every activity."""

from __future__ import annotations

from datetime import timedelta

from temporalio.exceptions import ApplicationError

from oma.errors import OMAError, ProviderError


def application_error(err: OMAError) -> ApplicationError:
    """The ``ApplicationError`` an activity raises for ``err``.

    ``type`` is the error's stable ``code``; ``non_retryable`` mirrors
    ``err.retryable``; a provider's requested delay becomes Temporal's
    ``next_retry_delay`` so the retry honours ``retry-after``.
    """
    details: dict[str, object] = {"code": err.code}
    delay = None
    if isinstance(err, ProviderError):
        details |= {"status": err.status, "request_id": err.request_id}
        if err.retry_after_s is not None and err.retry_after_s > 0:
            delay = timedelta(seconds=err.retry_after_s)
    return ApplicationError(
        err.message,
        details,
        type=err.code,
        non_retryable=not err.retryable,
        next_retry_delay=delay,
    )
