"""Activity options shared by the workflows, as the SDK's typed
``ActivityConfig`` (``LocalActivityConfig`` for a local activity): a key
the SDK does not know fails the type check, not a run.

A cancel reaches a running activity in the answer to a heartbeat, so how fast
it lands depends on how often heartbeats are sent (at most every 0.5 s,
``oma.worker.plugin.HEARTBEAT_THROTTLE``), not on the heartbeat timeout. The
heartbeat timeout decides something else: how long the server waits without a
heartbeat before it declares the attempt lost and starts the activity again
(``BACKEND_HEARTBEAT_TIMEOUT``).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType, ActivityConfig, LocalActivityConfig

BACKEND_HEARTBEAT_TIMEOUT = timedelta(seconds=40)
"""The heartbeat timeout of ``process_run``, ``acp_prompt`` and ``tool_call``: a lost worker
is detected (and the command started again elsewhere) within 40 s of its last
heartbeat, and a Temporal server or network outage of up to 30 s starts
nothing a second time (with ``oma.activities._attempt.await_server``, which
keeps an outcome reached during the outage until the server can take it).

The server measures the timeout from the last heartbeat it *received*, and a
heartbeat sent while it is down is lost (the SDK retries it with backoff, then
drops it and sends the next), so after an outage the server sees a gap of: up
to 0.5 s before the outage (the heartbeat throttle), the outage itself, and up
to about 6 s after it (the retry backoff of the heartbeat in flight, at most
5 s plus 20 % jitter; not configurable: the SDK's core fixes a worker's RPC
retries). A server that restarts fires the timers that fell due while it was
down as soon as it loads them. 30 + 0.5 + 6 = 36.5 s < 40 s.
Nothing on either side can tell a crashed worker from an unreachable one
during such a gap, which is why a crash is not detected sooner: 30 s of
outage tolerance costs 40 s of crash detection (external-agents.md,
"At least once").
"""

# A cancelled run ends once its activities really stopped (a process tree
# killed, an ACP turn cancelled, a model call abandoned), not before.
WAIT_CANCELLED = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED

LLM_TURN: ActivityConfig = {
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

LLM_TURN_LOCAL: LocalActivityConfig = {
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": RetryPolicy(maximum_attempts=3),
}

PLAN_SHARDS: ActivityConfig = {
    "start_to_close_timeout": timedelta(minutes=5),
    "retry_policy": RetryPolicy(maximum_attempts=3),
}
"""A sharded run's input checked and split (``plan_shards``): seconds of CPU
at 100,000 tasks, so an activity of its own, not a local activity, whose time
would be the workflow task's; a refusal is not retried."""

PROCESS_RUN: ActivityConfig = {
    "cancellation_type": WAIT_CANCELLED,
    "start_to_close_timeout": timedelta(hours=2),
    "heartbeat_timeout": BACKEND_HEARTBEAT_TIMEOUT,
    # a failed command is non-retryable by its own error; only a lost worker
    # (heartbeat timeout) makes Temporal start the command again elsewhere
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3),
}

ACP_PROMPT: ActivityConfig = {
    "cancellation_type": WAIT_CANCELLED,
    "start_to_close_timeout": timedelta(hours=2),
    "heartbeat_timeout": BACKEND_HEARTBEAT_TIMEOUT,
    # a prompt turn is not idempotent: a lost worker means a new session, which
    # AgentRun opens itself; protocol errors say themselves they are not retryable
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=2),
}

ACP_PROMPT_ROUTED: ActivityConfig = {
    **ACP_PROMPT,
    # the session's own worker polls its queue all the time: no pick-up in this
    # long means it is gone (AgentRun then opens a session elsewhere)
    "schedule_to_start_timeout": timedelta(seconds=10),
    "retry_policy": RetryPolicy(maximum_attempts=1),
}

ACP_CLOSE_RUN: ActivityConfig = {
    "schedule_to_start_timeout": timedelta(seconds=10),
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": RetryPolicy(maximum_attempts=1),
}


TOOL_CALL: ActivityConfig = {
    "cancellation_type": WAIT_CANCELLED,
    # bash may run up to 600 s, a custom tool as long; the rest are quick
    "start_to_close_timeout": timedelta(minutes=15),
    # as for a process run: a bash command (or any tool) is not started a
    # second time by an outage of up to 30 s; a lost worker is found in 40 s
    "heartbeat_timeout": BACKEND_HEARTBEAT_TIMEOUT,
}


def tool_call(max_attempts: int = 1, interval_s: float = 1.0) -> ActivityConfig:
    """A ``tool_call``'s options (``TOOL_CALL`` and a retry policy). A tool's
    own failure is a result, not an error: only a lost worker (or a crash of
    the activity itself) is retried, and a custom tool's failure as often as
    it declares (``oma.retried``)."""
    return {
        **TOOL_CALL,
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(seconds=interval_s), maximum_attempts=max(3, max_attempts)
        ),
    }


USER_CODE: ActivityConfig = {
    # a before_run hook or an evaluator: the user's code, bounded, not retried
    # (its errors are the user's to fix, not transient)
    "start_to_close_timeout": timedelta(minutes=5),
    "retry_policy": RetryPolicy(maximum_attempts=1),
}


MCP_LIST_TOOLS: ActivityConfig = {
    # starting a server (npx may install it first) and tools/list
    "start_to_close_timeout": timedelta(minutes=2),
    "retry_policy": RetryPolicy(maximum_attempts=3),
}

MCP_SCHEDULE_TO_START = timedelta(seconds=10)
"""A routed MCP ``tool_call`` not picked up in this long: the server's worker
is gone (the call then starts a new server on any worker)."""

MCP_CLOSE_RUN: ActivityConfig = ACP_CLOSE_RUN
