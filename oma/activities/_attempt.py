"""What one attempt of a backend activity (``process_run``, ``acp_prompt``)
knows about itself: its number, whether Temporal still accepts it, and when
its outcome can be reported.

Temporal runs an activity at least once: when the server hears no heartbeat
within the heartbeat timeout it declares the attempt lost and starts the next
one, while the first may still be running on a worker that was only cut off.
These helpers let an attempt say which one it was, stop at once when the
server has moved on, and not lose its outcome to a server that is briefly
away (external-agents.md, "At least once").
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from temporalio import activity
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.service import RPCError, RPCStatusCode

SERVER_PROBE_INTERVAL_S = 0.5
"""Seconds between two checks of whether the server answers again."""

SERVER_PROBE_TIMEOUT = timedelta(seconds=1)
"""How long one check waits for the server's answer."""

_SERVER_AWAY = (
    RPCStatusCode.UNAVAILABLE,  # nothing accepts the connection
    RPCStatusCode.DEADLINE_EXCEEDED,  # nothing answers in time
    RPCStatusCode.UNKNOWN,  # the connection broke ("transport error")
    RPCStatusCode.CANCELLED,  # the connection was dropped mid-call
)
"""What a call gets when it does not reach a server; any other answer, even an
error, means the server is there."""


def attempt_number() -> int:
    """This activity's attempt: 1 the first time, 2 when Temporal started it
    again, ... (``activity.info().attempt``); 1 outside an activity (the
    in-process ``Agent`` calls activities as plain functions)."""
    return activity.info().attempt if activity.in_activity() else 1


def with_attempt(details: dict[str, object], attempt: int) -> dict[str, object]:
    """Heartbeat ``details`` with ``"attempt"`` added from the second attempt
    on: a heartbeat timeout's failure carries the last heartbeat's details,
    which is how the workflow learns how many attempts ran out."""
    return {**details, "attempt": attempt} if attempt > 1 else details


def attempt_superseded() -> bool:
    """Whether this activity was cancelled because Temporal no longer accepts
    this attempt, so that another one may already be running.

    That is ``activity.cancellation_details()`` with ``not_found`` (the server
    refused a heartbeat: the attempt timed out and was retried, or its workflow
    is gone), ``timed_out`` (the SDK's own timer saw the heartbeat or
    start-to-close timeout pass) or ``reset`` (an operator reset the activity,
    which starts it again). A cancel the workflow asked for
    (``cancel_requested``), a worker shutting down, or a pause are not: they
    stop the only attempt there is, and leave it its grace period.
    """
    if not activity.in_activity():
        return False
    details = activity.cancellation_details()
    return details is not None and (details.not_found or details.timed_out or details.reset)


async def await_server() -> None:
    """Return once the Temporal server answers, so that the outcome the activity
    is about to return is not lost.

    The SDK reports an activity's result (or failure) with a fixed retry
    budget (10 s of backoff, so the last try comes 15 to 18 s after the
    first); a result reached during a longer outage is dropped, and the server
    then times the attempt out and runs the command again. So
    before returning, the activity asks the server for its system info
    (``GetSystemInfo``, no retries, ``SERVER_PROBE_TIMEOUT`` each) every
    ``SERVER_PROBE_INTERVAL_S`` seconds until it answers (one round trip
    when it is up), or until the heartbeat timeout has passed (by then the
    server has given the attempt up anyway). The caller keeps heartbeating
    meanwhile. Outside an activity, or without a client (a test's
    ``ActivityEnvironment``), it returns at once.
    """
    if not activity.in_activity():
        return
    try:
        client = activity.client()
    except RuntimeError:
        return
    timeout = activity.info().heartbeat_timeout or timedelta(0)
    deadline = time.monotonic() + timeout.total_seconds()
    waited = False
    while True:
        try:
            await client.workflow_service.get_system_info(
                GetSystemInfoRequest(), retry=False, timeout=SERVER_PROBE_TIMEOUT
            )
            return
        except RPCError as err:
            if err.status not in _SERVER_AWAY or time.monotonic() >= deadline:
                return
        if not waited:
            waited = True
            activity.logger.warning("the Temporal server does not answer: holding the outcome")
        await asyncio.sleep(SERVER_PROBE_INTERVAL_S)
