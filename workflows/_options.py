"""Activity and child-workflow options shared by the workflows.

Heartbeat timeouts are short because cancellation reaches an activity only
through a heartbeat; the worker throttles heartbeats to at most every 0.5 s
(``oma.worker.HEARTBEAT_THROTTLE``), so a cancel lands in about a second.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType

# A cancelled run ends once its activities really stopped (a process tree
# killed, an ACP turn cancelled, a model call abandoned), not before.
WAIT_CANCELLED = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED

LLM_TURN: dict[str, Any] = {
    "cancellation_type": WAIT_CANCELLED,
    "start_to_close_timeout": timedelta(minutes=10),
    "heartbeat_timeout": timedelta(seconds=30),
    # provider errors say themselves whether they are retryable (429/5xx yes, 4xx no)
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=5,
    ),
}

LLM_TURN_LOCAL: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": RetryPolicy(maximum_attempts=3),
}

PROCESS_RUN: dict[str, Any] = {
    "cancellation_type": WAIT_CANCELLED,
    "start_to_close_timeout": timedelta(hours=2),
    "heartbeat_timeout": timedelta(seconds=10),
    # a failed command is non-retryable by its own error; only a lost worker
    # (heartbeat timeout) makes Temporal start the command again elsewhere
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3),
}

ACP_PROMPT: dict[str, Any] = {
    "cancellation_type": WAIT_CANCELLED,
    "start_to_close_timeout": timedelta(hours=2),
    "heartbeat_timeout": timedelta(seconds=10),
    # a prompt turn is not idempotent: a lost worker means a new session, which
    # AgentRun opens itself; protocol errors say themselves they are not retryable
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=2),
}

ACP_PROMPT_ROUTED: dict[str, Any] = {
    **ACP_PROMPT,
    # the session's own worker polls its queue all the time: no pick-up in this
    # long means it is gone (AgentRun then opens a session elsewhere)
    "schedule_to_start_timeout": timedelta(seconds=10),
    "retry_policy": RetryPolicy(maximum_attempts=1),
}

ACP_CLOSE_RUN: dict[str, Any] = {
    "schedule_to_start_timeout": timedelta(seconds=10),
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": RetryPolicy(maximum_attempts=1),
}

TOOL_CALL: dict[str, Any] = {
    "cancellation_type": WAIT_CANCELLED,
    # bash may run up to 600 s; the rest are quick
    "start_to_close_timeout": timedelta(minutes=15),
    "heartbeat_timeout": timedelta(seconds=10),
    # a tool's own failure is a result, not an error: only a lost worker (or a
    # crash of the activity itself) is retried
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3),
}

USER_CODE: dict[str, Any] = {
    # a before_run hook or an evaluator: the user's code, bounded, not retried
    # (its errors are the user's to fix, not transient)
    "start_to_close_timeout": timedelta(minutes=5),
    "retry_policy": RetryPolicy(maximum_attempts=1),
}
