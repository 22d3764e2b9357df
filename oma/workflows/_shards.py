"""A sharded run: a tasks run of more than ``MAX_RUN_TASKS`` tasks runs its
shards (``oma.core.schema.dag.shard_plan``) as ``TeamRun`` children.

Shard ``n`` is ``<run id>/shard/<n>``: the team, the options and its tasks,
``SHARDS_AT_ONCE`` shards at once (one at a time with a token or cost
budget), each with its share of ``max_concurrency``, what is left of
``timeout_s`` and of the budgets. The run holds no task state of its own:
its result lists the shards (``ShardResult``) and sums their usage; each
shard's result holds its tasks. A stop (abort, a budget, a timeout) starts
no more shards and skips their tasks; an abort is passed on to the shards
running.

A new sharded run checks and splits its input in the ``plan_shards``
activity (``planned``; ``oma.core.rules.shards``), not in its first
activation; runs recorded before ``_patches.SHARDS_PLANNED_APART`` did it
there, and replay so.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
)

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from oma.core.contracts.names import ActivityName, SignalName, WorkflowName
    from oma.core.contracts.shards import PlannedShards, PlanShardsInput
    from oma.core.contracts.visibility import shard_summary, team_run_result_details
    from oma.core.contracts.workflow_ids import shard_workflow_id
    from oma.core.rules.shards import ShardInputs
    from oma.core.rules.team_run_state import RunStop, StopKind
    from oma.core.schema import limits
    from oma.core.schema.errors import (
        ActivityFailedError,
        AgentRunFailedError,
        RunCancelledError,
        error_for,
    )
    from oma.core.schema.results import ShardOutcome, ShardResult
    from oma.core.schema.run_input import TeamRunInput
    from oma.core.schema.run_state import TeamRunState
    from oma.core.schema.task import TaskStatus
    from oma.workflows import _options
    from oma.workflows._budget import RunSpending
    from oma.workflows._events import RunEvents
    from oma.workflows._visibility import Visibility
    from oma.workflows._waiting import reraise_cancel


async def planned(raw: dict[str, Any], *, stored: bool) -> PlannedShards:
    """The shards of this run, whose decoded input ``raw`` lists more than
    ``MAX_RUN_TASKS`` tasks (``oma.core.rules.shards.reads_first``), as the
    ``plan_shards`` activity checks and splits it; ``stored``: the
    run's payloads go to a payload store. Raises the ``OMAError`` the check
    raised (``INVALID_RUN_INPUT``, ``INVALID_TASK_GRAPH``, ...), or
    ``ActivityFailedError`` when the activity failed without one."""
    try:
        planned: PlannedShards = await workflow.execute_activity(
            ActivityName.PLAN_SHARDS,
            PlanShardsInput(workflow_id=workflow.info().workflow_id, input=raw, stored=stored),
            result_type=PlannedShards,
            **(_options.PLAN_SHARDS | {"summary": "check the tasks and split them into shards"}),
        )
        return planned
    except ActivityError as err:
        reraise_cancel(err)
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.non_retryable and cause.type:
            raise error_for(cause.type, cause.message) from None
        raise ActivityFailedError(
            f"the run's tasks could not be checked and split into shards: {cause or err}"
        ) from None


class ShardedRun:
    """The shards of a run whose ``inp`` holds ``tasks`` split as
    ``shards`` (indices into ``tasks``), over the run's ``state`` (its
    result's ``shards`` and usage), events, stop, spending and visibility;
    ``stop_if_over_budget`` is ``TeamRun._stop_if_over_budget`` (stops the
    run once a budget is used up), ``stop_with`` ``TeamRun.stop_with`` (a
    shard's rejection stops the run, as a rejection stops any run)."""

    def __init__(
        self,
        inp: TeamRunInput,
        shards: ShardInputs,
        state: TeamRunState,
        events: RunEvents,
        stop: RunStop,
        spending: RunSpending,
        visibility: Visibility,
        stop_if_over_budget: Callable[[], None],
        stop_with: Callable[[StopKind, str], None],
    ) -> None:
        self._inp = inp
        self._shards = shards
        self._state = state
        self._events = events
        self._stop = stop
        self._spending = spending
        self._visibility = visibility
        self._stop_if_over_budget = stop_if_over_budget
        self._stop_with = stop_with
        self._running: dict[int, workflow.ChildWorkflowHandle[Any, Any]] = {}
        self._told: list[asyncio.Task[None]] = []
        run_id = workflow.info().workflow_id
        state.result.shards = [
            ShardResult(run_id=shard_workflow_id(run_id, n), tasks=size, first_task=first)
            for n, (size, first) in enumerate(zip(shards.sizes, shards.first_tasks, strict=True), 1)
        ]
        options = inp.options
        budgeted = options.max_token_budget is not None or options.max_cost_usd is not None
        self._at_once = 1 if budgeted else min(limits.SHARDS_AT_ONCE, len(shards.sizes))

    @property
    def settled(self) -> int:
        """How many tasks the shards that ended settled (every one of theirs)."""
        shards = self._state.result.shards
        return sum(s.tasks for s in shards if s.status not in (None, "running"))

    def any_failed(self) -> bool:
        """Whether a shard that ran did not complete (a task of it failed, it
        stopped early, it ended without its result)."""
        return any(s.status not in (None, "completed") for s in self._state.result.shards)

    async def run(self, deadline: datetime | None) -> None:
        """Run the shards, ``SHARDS_AT_ONCE`` at a time, until all ended or
        the run stopped (``deadline``: ``options.timeout_s``'s, passed on as
        what is left of it); the shards never started are skipped."""
        queued = deque(range(len(self._shards.sizes)))
        in_flight: dict[int, asyncio.Task[None]] = {}
        try:
            while True:
                while queued and len(in_flight) < self._at_once and not self._stop.stopped:
                    n = queued.popleft()
                    in_flight[n] = asyncio.create_task(self._run_shard(n, deadline))
                if not in_flight:
                    break
                await workflow.wait(list(in_flight.values()), return_when=asyncio.FIRST_COMPLETED)
                for n in [n for n, t in in_flight.items() if t.done()]:
                    in_flight.pop(n).result()
        except asyncio.CancelledError:
            for task in in_flight.values():
                task.cancel()  # each cancels its shard's run, which drains its tasks
            await workflow.wait(list(in_flight.values()))
            self._skip(queued, "skipped: " + (self._stop.reason or "the run was cancelled"))
            raise
        finally:
            if self._told:
                await workflow.wait(self._told)
        self._skip(queued, f"skipped: {self._stop.reason or 'the run stopped'}")

    def abort(self, reason: str) -> None:
        """Pass an abort on to the shards running (their ``abort`` signal,
        with the run's stop ``reason``)."""
        for handle in self._running.values():
            self._told.append(asyncio.create_task(_tell(handle, reason)))

    def _input(self, n: int, deadline: datetime | None) -> dict[str, Any]:
        """Shard ``n``'s ``TeamRun`` input (``TeamRunInput.shard_payload``),
        with its share of the concurrency and what is left of the time and
        the budgets."""
        shard = self._shards.payload(n)
        options = shard.setdefault("options", {})
        options["max_concurrency"] = max(1, self._inp.options.max_concurrency // self._at_once)
        if deadline is not None:
            options["timeout_s"] = max((deadline - workflow.now()).total_seconds(), 0.001)
        left = self._spending.grant(0)
        if left.tokens_left is not None:
            options["max_token_budget"] = left.tokens_left
        if left.cost_usd_left is not None:
            options["max_cost_usd"] = left.cost_usd_left
        return shard

    async def _run_shard(self, n: int, deadline: datetime | None) -> None:
        shard = self._state.result.shards[n]
        self._events.emit("shard_start", detail=f"{shard.run_id}: {shard.tasks} task(s)")
        try:
            handle = await workflow.start_child_workflow(
                WorkflowName.TEAM_RUN,
                self._input(n, deadline),
                id=shard.run_id,
                result_type=RawValue,  # decoded here: a bad result fails this shard only
                static_summary=shard_summary(n + 1, len(self._shards.sizes), shard.tasks),
                search_attributes=self._visibility.for_child(team=self._inp.team.name, agent=None),
            )
        except asyncio.CancelledError:
            self._lost(shard, RunCancelledError.code, "the run was cancelled before it started")
            raise
        except Exception as err:  # e.g. a run of that workflow id is running: it fails alone
            if isinstance(err, workflow.NondeterminismError):
                raise
            self._lost(shard, AgentRunFailedError.code, f"its run did not start: {err}")
            self._events.emit("shard_end", detail=f"{shard.run_id}: {shard.status}")
            return
        self._running[n] = handle
        shard.status = "running"
        if self._stop.kind == "aborted":  # the abort came as it started
            self._told.append(asyncio.create_task(_tell(handle, self._stop.reason)))
        try:
            result = _decoded(await handle)
        except ChildWorkflowError as err:
            result = _failed(err)
        except asyncio.CancelledError:
            handle.cancel()
            with contextlib.suppress(ChildWorkflowError, asyncio.CancelledError):
                await handle
            self._lost(shard, RunCancelledError.code, "the run was cancelled")
            raise
        finally:
            self._running.pop(n, None)
        if isinstance(result, ShardOutcome):
            self._ended(shard, result)
        else:
            self._lost(shard, result.type or AgentRunFailedError.code, result.message)
        self._events.emit("shard_end", detail=f"{shard.run_id}: {shard.status}")

    def _ended(self, shard: ShardResult, result: ShardOutcome) -> None:
        """Shard ``shard``'s run returned ``result``: its counts, and its usage in the run's."""
        counts = {status: 0 for status in TaskStatus}
        for task in result.tasks:
            counts[task.status] += 1
        shard.status = result.status
        shard.completed = counts[TaskStatus.COMPLETED]
        shard.failed = counts[TaskStatus.FAILED]
        shard.skipped = shard.tasks - shard.completed - shard.failed
        shard.error, shard.error_code = result.error, result.error_code
        self._state.add_usage(result.total_token_usage)
        self._state.result.recorded_turns += result.recorded_turns
        if result.budget_exceeded:
            self._state.result.budget_exceeded = True
        self._stop_if_over_budget()
        if result.status == "rejected":
            self._stop_with("rejected", f"{shard.run_id}: {result.error or 'rejected'}")

    def _lost(self, shard: ShardResult, code: str, error: str) -> None:
        """Shard ``shard``'s run ended without a result, or never started:
        cancelled (its run, if any, holds what its tasks did), else failed
        (its input refused, terminated, not started), its tasks counted as
        failed."""
        cancelled = code == RunCancelledError.code
        shard.status = "cancelled" if cancelled else "failed"
        shard.failed = 0 if cancelled else shard.tasks
        shard.error, shard.error_code = limits.cut_text(error, limits.MAX_TASK_ERROR_CHARS), code

    def _skip(self, queued: deque[int], reason: str) -> None:
        for n in queued:
            shard = self._state.result.shards[n]
            shard.skipped, shard.error = shard.tasks, reason
        queued.clear()


async def _tell(handle: workflow.ChildWorkflowHandle[Any, Any], reason: str) -> None:
    """Abort the shard ``handle`` for the run's stop ``reason`` (``aborted:
    <why>``: its ``abort`` signal says ``<why>``, as the run was told). The
    shard may have ended as the abort came: then nothing is told."""
    with contextlib.suppress(Exception):
        await handle.signal(SignalName.ABORT, {"reason": reason.removeprefix("aborted: ")})


def _decoded(raw: RawValue) -> ShardOutcome | ApplicationError:
    try:
        outcome: ShardOutcome = workflow.payload_converter().from_payload(raw.payload, ShardOutcome)
        return outcome
    except (ValidationError, ValueError, TypeError) as err:
        return ApplicationError(f"the shard's result could not be read: {err}")


def _failed(err: ChildWorkflowError) -> ShardOutcome | ApplicationError:
    """The result a failed shard's run carries (a run that did not succeed
    ends Failed, its result in the failure: ``team_run_failure``), or its
    failure."""
    cause = err.cause
    if (details := team_run_result_details(cause)) is not None:
        try:
            return ShardOutcome.model_validate(details)
        except ValidationError as bad:
            return ApplicationError(f"the shard's result could not be read: {bad}")
    if isinstance(cause, CancelledError):
        return ApplicationError("the shard's run was cancelled", type=RunCancelledError.code)
    if isinstance(cause, ApplicationError):
        return cause
    return ApplicationError(str(cause or err))
