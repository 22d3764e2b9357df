"""What one attempt of a backend activity (``process_run``, ``acp_prompt``)
knows about itself: its number, and whether Temporal still accepts it.

Temporal runs an activity at least once: when the server hears no heartbeat
within the heartbeat timeout it declares the attempt lost and starts the next
one, while the first may still be running on a worker that was only cut off.
These helpers let an attempt say which one it was, and stop at once when the
server has moved on.
"""

from __future__ import annotations

from temporalio import activity


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
