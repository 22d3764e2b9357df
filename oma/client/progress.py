"""What a run's tasks report as they go, read without a worker: the latest
output their running activities heartbeated, or the retry Temporal is
waiting out after a failed attempt (``latest_output``). ``oma run``'s live
view and ``oma acp``'s tool calls show it.

Heartbeats rather than a query or a workflow update: the text never enters
a workflow's history or state, the server already keeps the latest details
of every pending activity (``DescribeWorkflowExecution``,
``pending_activities[].heartbeat_details``), and any client reads them
without a worker (the Web UI shows the same details).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import Client

from oma.core.contracts.names import ActivityName

DESCRIBE_TIMEOUT = timedelta(seconds=2)
"""How long ``latest_output`` waits for ``DescribeWorkflowExecution``."""


async def latest_output(client: Client, workflow_id: str) -> str:
    """The last line of the latest output a pending activity of
    ``workflow_id`` heartbeated: ``last_line`` (``process_run``), ``last_text``
    (``acp_prompt``, ``llm_turn``), or ``TOOL: last`` (``tool_call``); the most
    recent heartbeat wins. ``""`` when none has any. Raises ``RPCError`` as
    ``DescribeWorkflowExecution`` does (e.g. ``NOT_FOUND`` before the child
    has started)."""
    described = await client.get_workflow_handle(workflow_id).describe(rpc_timeout=DESCRIBE_TIMEOUT)
    found: list[tuple[float, str]] = []
    for pending in described.raw_description.pending_activities:
        retry = _retrying(pending, await _failure_message(client, pending.last_failure))
        if retry:
            found.append((pending.last_attempt_complete_time.ToNanoseconds(), retry))
            continue
        payloads = pending.heartbeat_details.payloads
        if not payloads:
            continue
        [details] = (await client.data_converter.decode(payloads))[:1]
        text = _progress_text(details)
        if text:
            found.append((pending.last_heartbeat_time.ToNanoseconds(), text))
    return max(found)[1] if found else ""


_RETRIED = {ActivityName.LLM_TURN: "the model provider", ActivityName.ACP_PROMPT: "the ACP agent"}

OVERSIZED_FAILURE = "Failure exceeds size limit."
"""The message the Temporal server gives an activity's last failure that it
kept under its size limit, the original failure as its cause."""


async def _failure_message(client: Client, failure: Any) -> str:
    """The message of a pending activity's last failure (a ``Failure``), as
    this client reads it: decrypted with its keys when the failure's message
    is encrypted (``encoded_attributes``: Temporal's bare ``Encoded failure``
    otherwise), or saying which key it lacks (``OmaFailureConverter``). A
    failure over the server's size limit (a provider SDK's long chain of
    causes and stack traces) is kept as ``Failure exceeds size limit.`` with
    the original as its cause: the cause's."""
    while failure.message == OVERSIZED_FAILURE and failure.HasField("cause"):
        failure = failure.cause
    if not failure.HasField("encoded_attributes"):
        return str(failure.message)
    try:
        decoded = await client.data_converter.decode_failure(failure)
    except Exception:  # best effort: the message as the server has it
        return str(failure.message)
    return str(getattr(decoded, "message", None) or decoded)


def _retrying(pending: Any, failure: str) -> str:
    """``retrying the model provider: attempt 3, PROVIDER_ERROR: ...`` for
    a pending activity (``PendingActivityInfo``) whose last attempt failed
    (``failure``: its message, ``_failure_message``) and whose next one has
    not begun to report: waiting out Temporal's retry backoff (an unreachable
    ``base_url`` is retried for about 16 s), or started and not heartbeated
    yet. ``""`` otherwise."""
    from temporalio.api.enums.v1 import PendingActivityState

    last = pending.last_failure
    while last.message == OVERSIZED_FAILURE and last.HasField("cause"):
        last = last.cause
    if pending.attempt < 2 or not failure:
        return ""
    code = last.application_failure_info.type
    if code and not failure.startswith(code):
        failure = f"{code}: {failure}"
    waiting = pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
    silent = pending.last_heartbeat_time.ToNanoseconds() < pending.last_started_time.ToNanoseconds()
    if not (waiting or silent):
        return ""
    what = _RETRIED.get(pending.activity_type.name, pending.activity_type.name)
    first = failure.strip().splitlines()[0] if failure.strip() else failure
    return f"retrying {what}: attempt {pending.attempt}, {first}"


def _progress_text(details: Any) -> str:
    if not isinstance(details, dict):
        return ""
    text = details.get("last_line") or details.get("last_text")
    if not text and details.get("tool"):
        text = f"{details['tool']}: {details.get('last') or 'running'}"
    if not isinstance(text, str):
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
