"""No credential of the worker's environment leaves an activity.

A worker interceptor (``temporalio.worker.Interceptor``) replaces the value of
every credential environment variable of the worker
(``oma.core.rules.redact.secret_values``: the redactor's credential names, the
provider adapters' ``CREDENTIAL_ENV_NAMES``, and any ``api_key_env`` an
activity's input names) with ``[redacted]`` in what the activity returns
(process output, ACP text, tool results, model turns), in its heartbeat
details (progress notes) and in the message and details of an error it raises,
before the SDK turns any of it into a payload or a failure for the history.
It sits at the boundary, so every activity is covered, present and future.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ActivityOutboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from oma.core.rules.redact import redact_values, secret_values

_API_KEY_ENV = "api_key_env"
"""The agent field naming the environment variable its provider's key is in."""


class CredentialRedaction(Interceptor):
    """The interceptor; ``environ`` defaults to the worker's ``os.environ``,
    read once per activity (so a variable set after start-up counts)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _RedactingInbound(next, self._environ)


class _RedactingInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, environ: Mapping[str, str] | None) -> None:
        super().__init__(next)
        self._environ = environ
        self._values: frozenset[str] = frozenset()

    def init(self, outbound: ActivityOutboundInterceptor) -> None:
        super().init(_RedactingOutbound(outbound, self))

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        environ = os.environ if self._environ is None else self._environ
        self._values = secret_values(environ, _named_key_envs(input.args))
        try:
            result = await super().execute_activity(input)
        except ApplicationError as err:
            redacted = self._error(err)
            if redacted is err:
                raise
            raise redacted from None
        except Exception as err:
            if not self._values or redact_values(str(err), self._values) == str(err):
                raise
            # Temporal names a plain exception's failure after its class, retryable.
            raise ApplicationError(
                redact_values(str(err), self._values), type=type(err).__name__
            ) from None
        return scrub(result, self._values)

    def _error(self, err: ApplicationError) -> ApplicationError:
        if not self._values:
            return err
        message = redact_values(err.message, self._values)
        details = scrub(list(err.details), self._values)
        if message == err.message and details == list(err.details):
            return err
        return ApplicationError(
            message,
            *details,
            type=err.type,
            non_retryable=err.non_retryable,
            next_retry_delay=err.next_retry_delay,
            category=err.category,
        )


class _RedactingOutbound(ActivityOutboundInterceptor):
    def __init__(self, next: ActivityOutboundInterceptor, inbound: _RedactingInbound) -> None:
        super().__init__(next)
        self._inbound = inbound

    def heartbeat(self, *details: Any) -> None:
        super().heartbeat(*scrub(list(details), self._inbound._values))


def scrub(value: Any, values: frozenset[str]) -> Any:
    """``value`` with ``redact_values`` applied to every string in it: in
    pydantic models (a copy with the changed fields), lists, tuples and dict
    keys and values. Returns ``value`` itself when nothing changed, so a
    result without a secret costs one walk and no copy."""
    if not values:
        return value
    if isinstance(value, str):
        return redact_values(value, values)
    if isinstance(value, BaseModel):
        changed = {}
        for name in type(value).model_fields:
            old = getattr(value, name)
            new = scrub(old, values)
            if new is not old:
                changed[name] = new
        return value.model_copy(update=changed) if changed else value
    if isinstance(value, (list, tuple)):
        items = [scrub(v, values) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return type(value)(items) if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        pairs = [(scrub(k, values), scrub(v, values)) for k, v in value.items()]
        if all(k is a and v is b for (k, v), (a, b) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    return value


def _named_key_envs(args: Any) -> set[str]:
    """Every ``api_key_env`` value anywhere in the activity's arguments."""
    found: set[str] = set()
    stack = list(args)
    while stack:
        item = stack.pop()
        if isinstance(item, BaseModel):
            name = getattr(item, _API_KEY_ENV, None)
            if isinstance(name, str) and name:
                found.add(name)
            stack.extend(getattr(item, f) for f in type(item).model_fields)
        elif isinstance(item, dict):
            name = item.get(_API_KEY_ENV)
            if isinstance(name, str) and name:
                found.add(name)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found
