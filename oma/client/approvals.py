"""Approvals from the client: the ``pending_approvals`` query, the
``decide`` update, and the review that offers a team run's open requests to
Python callbacks while the client awaits the run (``OpenMultiAgent``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal

from pydantic import ValidationError
from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from oma.client.runs import read_outputs, team_run_result
from oma.core.contracts.names import QueryName, UpdateName
from oma.core.schema.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    Decision,
    DecisionValue,
    PendingApproval,
    Reviewer,
    upstream_output,
)
from oma.core.schema.errors import (
    ERRORS,
    ApprovalConflictError,
    ApprovalStaleDecisionError,
    ApprovalUnknownRequestError,
    InvalidRunInputError,
    error_from_failure,
)
from oma.core.schema.results import TeamRunResult
from oma.core.schema.validation import format_validation_error
from oma.records.outputs import kept_output
from oma.runtime.approval_callbacks import ApprovalCallback, answer_decision, call_approval_callback

logger = logging.getLogger(__name__)

CALLBACK_REVIEWER_ID = "oma:python-callback"
"""The reviewer id recorded for a callback's decision unless ``reviewer`` is given."""

POLL_INTERVAL_S = 0.3
"""Seconds between two ``pending_approvals`` queries while callbacks wait for requests."""

STOP_GRACE_S = 5.0
"""Seconds a review loop told to stop gets to finish the call it is in (a
query, a decision) before it is cancelled."""


class CallbackReview:
    """Offers the open requests of the ``TeamRun`` ``handle`` to
    ``callbacks`` (by name: ``on_plan_ready``, ``on_task_dispatch``,
    ``on_approval``) and sends their answers as ``reviewer``, polling
    ``pending_approvals`` every ``POLL_INTERVAL_S`` seconds
    (``OpenMultiAgent`` says how requests are offered)."""

    def __init__(
        self,
        handle: WorkflowHandle[Any, TeamRunResult],
        callbacks: Mapping[str, ApprovalCallback | None],
        reviewer: Reviewer,
    ) -> None:
        self.handle = handle
        self.callbacks = callbacks
        self.reviewer = reviewer
        self._stop = asyncio.Event()

    async def result(self, client: Client) -> TeamRunResult:
        """The run's result, answering its requests meanwhile; the review
        loop only ends by raising (a callback's error)."""
        result = asyncio.ensure_future(team_run_result(self.handle, client))
        review = asyncio.ensure_future(self._review())
        try:
            await asyncio.wait({result, review}, return_when=asyncio.FIRST_COMPLETED)
            if review.done():
                review.result()
            return await result
        finally:
            # The review loop stops between its calls: one cancelled mid-call
            # leaves the SDK's call running in its own threads, whose answer,
            # arriving as a short-lived process exits, aborted the interpreter
            # ("PyGILState_Release", temporalio/sdk-python#300).
            self._stop.set()
            await asyncio.wait({review}, timeout=STOP_GRACE_S)
            for task in (result, review):
                if not task.done():
                    task.cancel()
                    # cancelled mid-call, the SDK raises its own error rather
                    # than CancelledError (WorkflowUpdateRPCTimeoutOrCancelledError
                    # for a decision still in flight when the run ended)
                    with contextlib.suppress(asyncio.CancelledError, RPCTimeoutOrCancelledError):
                        await task

    async def _review(self) -> None:
        offered: set[str] = set()
        while not self._stop.is_set():
            for request in await self._open_requests():
                if request.request_id not in offered and not self._stop.is_set():
                    offered.add(request.request_id)
                    if await self._offer(request) == "stale":
                        offered.discard(request.request_id)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), POLL_INTERVAL_S)

    async def _open_requests(self) -> list[PendingApproval]:
        # A query can fail while the run has not finished its first workflow
        # task, or while no worker answers: the result wait is what counts,
        # so the next poll simply asks again.
        try:
            return await pending(self.handle)
        except RPCError as err:
            logger.debug("pending_approvals of %s: %s", self.handle.id, err)
            return []

    async def _offer(self, request: ApprovalRequest) -> Literal["decided", "open", "stale"]:
        """Offer ``request`` to its callback and send the answer."""
        name = {"plan": "on_plan_ready", "dispatch": "on_task_dispatch"}.get(request.boundary)
        callbacks = self.callbacks
        if name is None or callbacks[name] is None:
            name = "on_approval"
        callback = callbacks[name]
        if callback is None:
            return "open"
        answer = await call_approval_callback(callback, request)
        value = answer_decision(answer, name)
        if value is None:
            logger.info(
                "%s suspended %s of %s: left open", name, request.request_id, self.handle.id
            )
            return "open"
        try:
            await send_decision(self.handle, request, value, self.reviewer, None)
        except (ApprovalConflictError, ApprovalUnknownRequestError) as err:
            logger.info("%s's %s of %s not recorded: %s", name, value, request.request_id, err)
            return "open"
        except ApprovalStaleDecisionError as err:
            logger.info("%s reviewed a stale %s: offered again: %s", name, request.request_id, err)
            return "stale"
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            # the run closed between the query and the update; its result follows
            logger.info("%s's %s of %s came after the run ended", name, value, request.request_id)
            return "open"
        return "decided"


async def pending(
    handle: WorkflowHandle[Any, Any], rpc_timeout: timedelta | None = None
) -> list[PendingApproval]:
    """The open approval requests of the ``TeamRun`` ``handle``, oldest first
    (the ``pending_approvals`` query), a dispatch request with its
    dependencies' outputs (``upstream``): the previews of outputs the run
    kept by reference read from their ``AgentRun`` results
    (``read_upstream_previews``). Raises ``RPCError``."""
    pending: list[PendingApproval] = await handle.query(
        QueryName.PENDING_APPROVALS, result_type=list[PendingApproval], rpc_timeout=rpc_timeout
    )
    await read_upstream_previews(handle._client, pending)
    return pending


async def read_upstream_previews(client: Client, requests: list[PendingApproval]) -> None:
    """Fill in the preview of every upstream output of ``requests`` that the
    run kept by reference (``output_ref``), from the result of the
    ``AgentRun`` that holds it. One that cannot be read (past the namespace's
    retention) stays without a preview, logged."""
    for request in requests:
        for n, up in enumerate(request.upstream or []):
            ref = up.output_ref
            if up.preview is not None or ref is None:
                continue
            try:
                output = await kept_output(client, ref, up.output_run_id)
            except (RPCError, WorkflowFailureError) as err:
                logger.warning(
                    "the output of %s (%s) cannot be read: %s", up.task_id, up.output_ref, err
                )
                continue
            assert request.upstream is not None
            request.upstream[n] = upstream_output(
                up.task_id,
                up.title,
                up.assignee,
                up.status,
                output,
                up.output_ref,
                output_run_id=up.output_run_id,
            )


async def upstream_outputs(
    handle: WorkflowHandle[Any, Any],
    request: PendingApproval,
    rpc_timeout: timedelta | None = None,
) -> dict[str, str | None]:
    """The whole output of each dependency ``request`` shows (``upstream``),
    task id -> output, in its order: from the ``state`` query of the
    ``TeamRun`` ``handle``, outputs kept by reference read from the tasks'
    ``AgentRun`` results (``oma.client.runs.read_outputs``); ``None`` for one
    that cannot be read. Raises ``RPCError``."""
    wanted = [up.task_id for up in request.upstream or []]
    if not wanted:
        return {}
    state: TeamRunResult = await handle.query(
        QueryName.STATE, result_type=TeamRunResult, rpc_timeout=rpc_timeout
    )
    state.tasks = [t for t in state.tasks if t.id in wanted]
    await read_outputs(handle._client, state)
    outputs = {t.id: t.output for t in state.tasks}
    return {task_id: outputs.get(task_id) for task_id in wanted}


async def send_decision(
    handle: WorkflowHandle[Any, Any],
    request: ApprovalRequest,
    value: DecisionValue,
    reviewer: Reviewer,
    comment: str | None,
    rpc_timeout: timedelta | None = None,
) -> ApprovalDecision:
    """Send the ``decide`` update (an update, not a signal, because the
    caller needs to know whether its decision is the one recorded).

    A refusal raises the matching ``ApprovalError`` (or ``InvalidRunInputError``),
    read from the refusal with ``oma.core.schema.errors.error_from_failure``.
    """
    decision = Decision(
        request_id=request.request_id,
        request_hash=request.request_hash,
        decision=value,
        reviewer=reviewer,
        comment=comment,
    )
    try:
        recorded: ApprovalDecision = await handle.execute_update(
            UpdateName.DECIDE, decision, result_type=ApprovalDecision, rpc_timeout=rpc_timeout
        )
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type in ERRORS:
            raise error_from_failure(cause) from err
        raise
    return recorded


def decision_value(decision: DecisionValue | bool) -> DecisionValue:
    """``approve`` or ``reject`` for a decision or a bool; raises ``InvalidRunInputError``."""
    if decision is True or decision == "approve":
        return "approve"
    if decision is False or decision == "reject":
        return "reject"
    raise InvalidRunInputError(
        f"invalid decision: {decision!r}; give 'approve', 'reject', True or False"
    )


def reviewer_of(reviewer: Reviewer | Mapping[str, Any] | str) -> Reviewer:
    """A ``Reviewer`` from itself, its ``{id, display_name}`` or an id;
    raises ``InvalidRunInputError``."""
    if isinstance(reviewer, Reviewer):
        return reviewer
    try:
        return Reviewer.model_validate({"id": reviewer} if isinstance(reviewer, str) else reviewer)
    except ValidationError as err:
        raise InvalidRunInputError(
            f"invalid reviewer: {format_validation_error(err, 'reviewer', Reviewer)}"
        ) from None
