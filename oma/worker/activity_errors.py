"""Where an activity's ``OMAError`` becomes the failure Temporal records.

Activity code raises the product's own errors (``oma.core.schema.errors``)
and the in-process ``oma.Agent``, which calls the same functions, catches
them as they are. On a worker this interceptor
(``temporalio.worker.Interceptor``, installed by ``OmaPlugin``) turns each
into the ``ApplicationError`` of ``application_error`` at the boundary:
``type`` the error's code, ``non_retryable`` from its class (a
``ProviderError``'s per response), its structured fields in the details,
and for a backend activity (``BACKEND_ACTIVITIES``) the attempt too. The
failure stands for the error: its causes are the error's own causes, never
the error again.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from oma.core.contracts.names import BACKEND_ACTIVITIES
from oma.core.schema.errors import OMAError, application_error
from oma.runtime.converter import CONVERTER_ERRORS


class ActivityErrors(Interceptor):
    """The interceptor. It goes innermost, after every other interceptor of
    the worker, so that they (credential redaction, tracing) see the
    ``ApplicationError`` the history records."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ConvertingInbound(next)


class _ConvertingInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await super().execute_activity(input)
        except CONVERTER_ERRORS:
            raise  # the failure converter's to give (retryable, typed by code)
        except OMAError as err:
            info = activity.info()
            attempt = info.attempt if info.activity_type in BACKEND_ACTIVITIES else None
            raise application_error(err, attempt=attempt) from _cause(err)


def _cause(err: BaseException) -> BaseException | None:
    """What ``err`` was raised from, as a traceback shows it: its explicit
    cause, else the exception it was raised while handling."""
    return err.__cause__ or (None if err.__suppress_context__ else err.__context__)
