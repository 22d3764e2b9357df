"""What one attempt of a backend activity (``process_run``, ``acp_prompt``)
knows about itself: its number.

Temporal runs an activity at least once: when the server hears no heartbeat
within the heartbeat timeout it declares the attempt lost and starts the next
one. An attempt says which one it was, so that a run can report how many
times its command ran.
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
