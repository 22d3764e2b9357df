"""Following one team run for an editor: its queries in, session updates out.

The run is read the way ``oma run`` reads it: the ``events`` query every
``POLL_S`` (with ``after_seq``, so each answer is only what is new); when it
brings something, the ``state`` query (the tasks, their outputs, the usage)
and, on an approval event, ``pending_approvals``. The running tasks' latest
line of output, and the coordinator's while it plans, come from the
heartbeats of their activities (``oma.client.progress.latest_output``) every
``PEEK_S``. What changed goes to the editor (``oma.acp.tool_calls``,
``oma.acp.permission_requests``); the end of the run is its result
(``oma.client.team_run_result``), then the final message.

Nothing here is needed for the run to go on: the follower only reads it and
answers its requests. A follower that stops (the editor closed, ``oma acp``
killed) loses nothing; a new one (``session/load``) draws the run again from
its ``state``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from acp import update_agent_message_text, update_agent_thought_text
from acp.schema import ToolKind
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError

from oma.acp.permission_requests import PermissionRequests, Rules, decided_text
from oma.acp.prompt import ended_words, outcome_text, outputs_text
from oma.acp.tool_calls import RunPlan
from oma.client.progress import latest_output
from oma.client.runs import cause
from oma.core.contracts.names import QueryName
from oma.core.contracts.workflow_ids import coordinator_workflow_id, task_workflow_id
from oma.core.rules.approval_gate import dispatch_request_id
from oma.core.schema.approvals import PendingApproval, Reviewer
from oma.core.schema.limits import cut_text
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_events import RunEvent
from oma.core.schema.task import TaskStatus

logger = logging.getLogger(__name__)

POLL_S = 0.1
"""How often the follower asks the run for new events, in seconds."""

STATE_SHARE = 10
"""A ``state`` query that took over ``CHEAP_STATE_S`` is asked again at the
earliest this many times as long after it as it took: a run of thousands of
tasks answers in tens of milliseconds of the worker's CPU
(``payload_fit.sent_result``), which a query every ``POLL_S`` would turn
into most of a core."""

CHEAP_STATE_S = 0.05
"""A ``state`` query that took less (a small run's, the round trip mostly)
is asked again after the next new events, as soon as they come."""

PEEK_S = 0.5
"""How often it reads the running tasks' latest output, in seconds."""

PEEKED_TASKS = 10
"""The most running tasks whose latest output it reads at once."""

QUERY_TIMEOUT = timedelta(seconds=10)
"""How long one query waits for the server and a worker."""

FINAL_MESSAGE_CHARS = 100_000
"""The most of a run's answer the final message carries, in characters
(the whole is in the run's result: ``oma show``, ``temporal workflow result``)."""

PLAN_THOUGHT_CHARS = 20_000
"""The most of the plan's summary a thought carries, in characters."""

Send = Callable[[Any], Awaitable[None]]


class Follower:
    """Streams the ``TeamRun`` ``workflow_id`` (its execution
    ``temporal_run_id`` and what it continues as) to one editor session
    (module docstring).

    ``send`` sends one session update; ``conn`` is the SDK's
    ``AgentSideConnection`` (for permission prompts); ``kinds`` maps agent
    names to their tool calls' kind; ``token_budget`` sizes the usage meter;
    ``deciding`` says whether the editor's answers may still decide
    (``PermissionRequests``)."""

    def __init__(
        self,
        client: Client,
        conn: Any,
        session_id: str,
        workflow_id: str,
        temporal_run_id: str | None,
        *,
        send: Send,
        reviewer: Reviewer,
        rules: Rules,
        kinds: dict[str, ToolKind],
        token_budget: int | None,
        deciding: Callable[[], bool] = lambda: True,
    ) -> None:
        self.client = client
        self.workflow_id = workflow_id
        self.query_handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(workflow_id)
        self.result_handle: WorkflowHandle[Any, TeamRunResult] = client.get_workflow_handle(
            workflow_id, run_id=temporal_run_id, result_type=TeamRunResult
        )
        self.temporal_run_id = temporal_run_id
        self.send = send
        self.kinds = kinds
        self.token_budget = token_budget
        self.plan = RunPlan()
        self.permissions = PermissionRequests(
            conn,
            session_id,
            self.query_handle,
            reviewer,
            rules,
            kinds,
            send,
            lambda: set(self.plan.tool_calls),
            deciding,
        )
        self.after_seq = -1
        self.announced: set[str] | None = set()
        """The requests whose ``approval_request`` event was read (``None``:
        every one, the run's first events being past the query's window)."""
        self.planned = False
        self.thought = ""
        self.latest: dict[str, str] = {}
        self.peeked: dict[str, str] = {}
        """Task id -> the latest line the last peek read, not shown yet."""
        self.peeked_thought = ""
        self.kept: dict[tuple[str, str | None], str] = {}
        """The outputs the ``state`` query answers by reference (a run past the
        payload limit), read back once each: ``(output_ref, output_run_id)``
        -> output (a session's runs share task ids: the execution tells)."""
        self.first_update: float | None = None
        self.drawn: asyncio.Event | None = None
        """Set once the run as it stands is drawn (``session/load`` answers then)."""
        self.asking = asyncio.Event()
        """Permission prompts are sent only while set (after ``session/load``'s response)."""
        self.asking.set()

    async def follow(self) -> TeamRunResult | None:
        """Stream the run until it ends; its result (``None`` when it cannot be
        read, the final message saying why), every update sent before this
        returns. Cancelled, it withdraws its permission prompts first."""
        ended = asyncio.create_task(self._result())
        state: TeamRunResult | None = None
        next_peek = next_state = 0.0
        peeking: asyncio.Task[None] = asyncio.create_task(asyncio.sleep(0))
        try:
            # what is still to do: the state drawn after new events (a query
            # that failed is asked again), then the approvals, in that order,
            # so a request's prompt never comes before the plan and the tool calls
            stale = True
            approvals_changed = True
            while not ended.done():
                new = await self._new_events()
                stale |= bool(new)
                approvals_changed |= any(e.type.startswith("approval") for e in new)
                if stale and time.monotonic() >= next_state:
                    asked = time.monotonic()
                    fresh = await self._query_state()
                    took = time.monotonic() - asked
                    if fresh is not None:  # (one that failed is asked again at once)
                        next_state = asked + (STATE_SHARE * took if took > CHEAP_STATE_S else 0)
                        state, stale = fresh, False
                        await self._draw(state)
                        if self.drawn is not None:
                            self.drawn.set()
                if approvals_changed and not stale and self.asking.is_set():
                    approvals_changed = not await self._sync_approvals(state)
                if state is not None:
                    await self._show_peeked(state)
                    if peeking.done() and time.monotonic() >= next_peek:
                        next_peek = time.monotonic() + PEEK_S
                        peeking = asyncio.create_task(self._peek(state))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(ended), POLL_S)
            result, why = ended.result()
            if result is not None:
                await self._draw(result)
            await self.permissions.close()
            await self._sync_closed(result)
            await self.send(self._final_message(result, why))
            return result
        finally:
            peeking.cancel()
            await self.permissions.close()
            if not ended.done():
                ended.cancel()
                with contextlib.suppress(BaseException):
                    await ended

    # -- reading the run --------------------------------------------------------

    async def _new_events(self) -> list[RunEvent]:
        try:
            events: list[RunEvent] = await self.query_handle.query(
                QueryName.EVENTS,
                self.after_seq,
                result_type=list[RunEvent],
                rpc_timeout=QUERY_TIMEOUT,
            )
        except Exception as err:  # not started yet, no worker now: ask again
            logger.debug("events of %s: %s", self.workflow_id, err)
            return []
        if self.after_seq < 0 and events and events[0].seq > 0:
            self.announced = None  # the earliest events are past the query's window
        new = [e for e in events if e.seq > self.after_seq]
        if new:
            self.after_seq = new[-1].seq
        if self.announced is not None:
            self.announced |= {e.detail or "" for e in new if e.type == "approval_request"}
        return new

    async def _query_state(self) -> TeamRunResult | None:
        try:
            state: TeamRunResult = await self.query_handle.query(
                QueryName.STATE, result_type=TeamRunResult, rpc_timeout=QUERY_TIMEOUT
            )
        except Exception as err:
            logger.debug("state of %s: %s", self.workflow_id, err)
            return None
        await self._read_kept(state)
        return state

    async def _read_kept(self, state: TeamRunResult) -> None:
        """Put back into ``state`` the outputs it keeps by reference, as an
        ended run's are (``oma.records.outputs.read_task_outputs``), each read once."""
        from oma.records.outputs import read_task_outputs

        kept = [t for t in state.tasks if t.output is None and t.output_ref is not None]
        for task in kept:
            task.output = self.kept.get((task.output_ref or "", task.output_run_id))
        await read_task_outputs(self.client, [t for t in kept if t.output is None])
        self.kept |= {
            (t.output_ref, t.output_run_id): t.output
            for t in kept
            if t.output_ref and t.output is not None
        }

    async def _result(self) -> tuple[TeamRunResult | None, str]:
        """The run's result however it ended: what it returned (its outputs
        kept by reference read back), else (cancelled or terminated through
        Temporal, or failed before it had a result) its last ``state`` as it
        ended (``ended_as``); ``(None, why)`` when neither can be read."""
        from oma.client import team_run_result

        try:
            return await team_run_result(self.result_handle, self.client), ""
        except WorkflowFailureError as err:
            failure, why = err.cause, cause(err)
        except Exception as err:  # e.g. a key this process lacks (CODEC_KEY_MISSING)
            return None, str(err)
        state = await self._query_state()
        if state is not None:
            ended_as(state, failure)
        return state, why

    async def _sync_approvals(self, state: TeamRunResult | None) -> bool:
        """Show the run's open requests; whether it could read them."""
        from oma.client.approvals import pending

        try:
            requests: list[PendingApproval] = await pending(self.query_handle, QUERY_TIMEOUT)
        except Exception as err:
            logger.debug("pending_approvals of %s: %s", self.workflow_id, err)
            return False
        # only requests whose event was read, so the state drawn already shows
        # what they are about (pending_approvals may be newer than it)
        announced = self.announced
        requests = [r for r in requests if announced is None or r.request_id in announced]
        decisions = state.approval_decisions if state is not None else []
        if set(self.permissions.seen) - {r.request_id for r in requests}:  # closed: by whom?
            fresh = await self._query_state()
            decisions = fresh.approval_decisions if fresh is not None else decisions
        await self.permissions.sync(requests, decisions)
        return True

    async def _sync_closed(self, result: TeamRunResult | None) -> None:
        """Close the tool calls of the requests the run closed (all, once it ended)."""
        await self.permissions.sync([], result.approval_decisions if result is not None else [])

    # -- drawing ---------------------------------------------------------------

    async def _draw(self, state: TeamRunResult) -> None:
        updates: list[Any] = []
        if state.plan is not None and not self.planned:
            self.planned = True
            updates.append(
                update_agent_thought_text(cut_text(_plan_thought(state), PLAN_THOUGHT_CHARS))
            )
        updates += self.plan.plan_update(state)
        decisions = {d.request_id: d for d in state.approval_decisions}
        for task in state.tasks:
            dispatch = decisions.get(dispatch_request_id(task.id))
            decided = decided_text(dispatch) if dispatch is not None else ""
            latest = self.latest.get(task.id, "")
            updates += self.plan.tool_call_updates(task, self.kinds, latest, decided)
        updates += self.plan.usage_update(state, self.token_budget)
        for update in updates:
            await self._send(update)

    async def _peek(self, state: TeamRunResult) -> None:
        """Read the latest line of each running task and, while a goal run
        plans, of the coordinator (in a task of its own, so the events are
        read meanwhile: ``_show_peeked`` sends what it found)."""
        if state.status != "running":
            return
        if state.goal is not None and state.plan is None:
            wid = coordinator_workflow_id(self.workflow_id, "plan")
            self.peeked_thought = await _latest(self.client, wid)
            return
        running = [t.id for t in state.tasks if t.status == TaskStatus.IN_PROGRESS][:PEEKED_TASKS]
        lines = await asyncio.gather(
            *(_latest(self.client, task_workflow_id(self.workflow_id, t)) for t in running)
        )
        self.peeked.update({t: line for t, line in zip(running, lines, strict=True) if line})

    async def _show_peeked(self, state: TeamRunResult) -> None:
        """Send what the last peek found that is new: a running task's line
        (its tool call's content), the coordinator's (a thought)."""
        line, self.peeked_thought = self.peeked_thought, ""
        if line and line != self.thought and state.plan is None:
            self.thought = line
            await self._send(update_agent_thought_text(line + "\n"))
        peeked, self.peeked = self.peeked, {}
        for task in state.tasks:
            line = peeked.get(task.id, "")
            if (
                task.status != TaskStatus.IN_PROGRESS
                or not line
                or line == self.latest.get(task.id)
            ):
                continue
            self.latest[task.id] = line
            for update in self.plan.tool_call_updates(task, self.kinds, line):
                await self._send(update)

    async def _send(self, update: Any) -> None:
        if self.first_update is None:
            self.first_update = time.monotonic()
        await self.send(update)

    def _final_message(self, result: TeamRunResult | None, why: str) -> Any:
        if result is None:
            text = (
                f"The run's result could not be read ({why}). See it with "
                f"`oma show {self.workflow_id}`."
            )
        elif result.status in ("completed", "planned"):
            text = outcome_text(result)
        else:
            code = f" ({result.error_code})" if result.error_code else ""
            error = f": {result.error}" if result.error else ""
            text = f"The run {ended_words(result.status)}{code}{error}"
            if (produced := outputs_text(result)) is not None:
                text += f"\n\n{produced}"
        chunk = update_agent_message_text(cut_text(text, FINAL_MESSAGE_CHARS))
        chunk.message_id = f"{self.workflow_id}/{self.temporal_run_id or 'latest'}/final"
        return chunk


def ended_as(state: TeamRunResult, failure: BaseException | None) -> None:
    """Make ``state``, the last ``state`` of a run that ended without a
    result (still ``running`` there), say how it ended with ``failure``
    (the ``WorkflowFailureError``'s cause): ``cancelled`` when Temporal
    cancelled or terminated it; else ``failed``, with the failure's code (an
    ``ApplicationError``'s type: ``INVALID_PLAN`` for a plan still invalid
    after its correction turn) and message."""
    if state.status != "running":
        return
    state.success = False
    if isinstance(failure, CancelledError | TerminatedError):
        state.status = "cancelled"
        state.error = state.error or cause(failure)
        return
    state.status = "failed"
    if isinstance(failure, ApplicationError):
        state.error_code = state.error_code or failure.type
        state.error = state.error or failure.message
    elif failure is not None:
        state.error = state.error or cause(failure)


async def _latest(client: Client, workflow_id: str) -> str:
    try:
        return await latest_output(client, workflow_id)
    except Exception:  # not started yet, or done: nothing to show
        return ""


def _plan_thought(state: TeamRunResult) -> str:
    """The thought that says what the coordinator planned."""
    lines = [f"The coordinator planned {len(state.tasks)} tasks:"]
    for n, task in enumerate(state.tasks, 1):
        who = f" → {task.assignee}" if task.assignee else ""
        after = f" (after {', '.join(task.depends_on)})" if task.depends_on else ""
        lines.append(f"{n}. {task.title or task.id}{who}{after}")
    return "\n".join(lines) + "\n"
