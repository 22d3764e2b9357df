"""The run viewer's model: what a ``TeamRun`` did, read from Temporal histories.

``oma show`` builds a ``RunView`` from the durable record only, never from
queries, so it works on a closed run (and on a run no worker serves any more)
and on exported histories (``temporal workflow show --output json``):

- the ``TeamRun``'s history (every run of its continue-as-new chain): the
  run's input (team, tasks or plan), its result (the completion's result, or
  the first element of a failure's details), and the start and close of each
  child workflow;
- each child's history (``<run id>/<task id>`` ``AgentRun`` attempts,
  ``<run id>/coordinator/<step>`` coordinator steps): its activities
  (``llm_turn``, ``tool_call``, ``process_run``, ``acp_prompt``,
  ``mcp_list_tools``, ...), each scheduled, started and closed at an event's
  timestamp, with what its input and result say (agent, tokens, cost, error).

A sharded run (more than ``MAX_RUN_TASKS`` tasks: ``TeamRun`` children
``<run id>/shard/<n>``, each holding some of its tasks) has no task of its
own: its view lists its shards (``ShardView``: its result's ``shards``, or
while it runs what its shard children's events say), and reads neither its
whole input (its team is its first shard's) nor any shard's history; a
shard's own view (``<run id>/shard/<n>``) has its tasks.

Payloads and failures are decoded with the product's data converter
(``oma.worker.plugin.data_converter``: with ``OMA_CODEC_KEYS`` set, it decrypts).
Times are UTC ``datetime``s; durations are seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import EventType, StartChildWorkflowExecutionFailedCause
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError, FailureError

from oma.core.contracts.encoding import ENCRYPTED_ENCODING
from oma.core.contracts.names import ActivityName, WorkflowName
from oma.core.contracts.visibility import shard_of_summary, team_run_result_of
from oma.core.contracts.workflow_ids import shard_workflow_id, team_run_id_of
from oma.core.rules.task_graph import skip_reason
from oma.core.rules.team_run_state import CANCELLED_REASON, CANCELLED_WITH_RUN
from oma.core.schema.errors import HistoryReadError, RunCancelledError
from oma.core.schema.results import ShardResult, TeamRunResult
from oma.core.schema.task import ReusedFrom, TaskState, TaskStatus
from oma.core.schema.usage import TokenUsage
from oma.core.schema.validation import UndecodableInput
from oma.records.aborts import abort_input, abort_reason
from oma.records.fork_source import ForkReads
from oma.records.histories import FETCHES_AT_ONCE, ChildHistory, chain_of, in_order
from oma.records.history_files import started
from oma.records.results import closed_result
from oma.runtime.payload_store import external_storage, reference_of, retrieve

T = TypeVar("T")


class Span(BaseModel):
    """One bar of the waterfall: a child workflow run or an activity."""

    kind: str = Field(
        description="'task' or 'coordinator' (a child run), or the activity type "
        "('llm_turn', 'tool_call', 'process_run', 'acp_prompt', 'mcp_call', ...)."
    )
    label: str
    workflow_id: str = Field(description="The workflow that ran it (an activity's: its child).")
    task_id: str | None = None
    agent: str | None = None
    status: str = Field(
        description="completed | failed | cancelled | timed_out | terminated | running "
        "| continued_as_new"
    )
    scheduled_at: datetime | None = Field(
        default=None, description="Child initiated / activity scheduled."
    )
    started_at: datetime
    closed_at: datetime | None = Field(default=None, description="None while it runs.")
    attempt: int = Field(default=1, description="An activity: the attempt that closed it.")
    error: str | None = Field(default=None, description="The failure's full message.")
    error_code: str | None = None
    token_usage: TokenUsage | None = None
    detail: str | None = Field(default=None, description="A command line, a tool's input, ...")
    recorded_from: str | None = Field(
        default=None,
        description="A model turn answered from a recording: the AgentRun that recorded it.",
    )

    @property
    def duration_s(self) -> float | None:
        """Seconds from start to close; ``None`` while it runs."""
        if self.closed_at is None:
            return None
        return (self.closed_at - self.started_at).total_seconds()

    @property
    def cost_usd(self) -> float | None:
        """The known cost in US dollars; ``None`` when unknown or not reported."""
        usage = self.token_usage
        if usage is None or usage.unpriced:
            return None
        return usage.cost_usd


class ChildRunView(BaseModel):
    """One child workflow run of the team run and the activities it ran.
    ``temporal_run_id`` keeps its JSON key, ``run_id`` (``oma show --json``)."""

    model_config = ConfigDict(
        serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    span: Span
    temporal_run_id: str | None = Field(
        default=None, alias="run_id", description="The Temporal run id of its execution."
    )
    activities: list[Span] = Field(default_factory=list)
    output: str | None = Field(
        default=None, description="What its result says it returned (AgentRunResult.output)."
    )
    backend_attempts: int = Field(
        default=0, description="Its result's backend_attempts: runs of a process or ACP turn."
    )


class TaskView(BaseModel):
    """A task of the run: as its result reports it, with its child runs."""

    id: str
    title: str = ""
    assignee: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    status: str = Field(description="A TaskStatus value.")
    error: str | None = Field(default=None, description="The full error, stderr tail included.")
    error_code: str | None = None
    output: str | None = Field(
        default=None,
        description="What it returned, whole (one the run kept by reference: read from the "
        "result of its AgentRun, in the run's history).",
    )
    attempts: int = 0
    backend_attempts: int = Field(
        default=0,
        description="Process and ACP agents: how many times Temporal ran the command or turn "
        "over all attempts (more than attempts when it ran one again: at least once).",
    )
    token_usage: TokenUsage | None = Field(
        default_factory=TokenUsage,
        description="What it used; null when unknown (no result read: its run's result or a "
        "child's cannot be decrypted, or it is still going).",
    )
    cost_usd: float | None = None
    layer: int = Field(default=0, description="0: no dependencies; else 1 + its deepest's.")
    runs: list[ChildRunView] = Field(default_factory=list, description="One per attempt.")
    reused_from: ReusedFrom | None = Field(
        default=None,
        description="A fork's kept task: the run (and task) that ran it; it has no run here.",
    )
    output_run_id: str | None = Field(
        default=None,
        description="The run id of the AgentRun execution that returned its output "
        "(TaskState.output_run_id): a kept task's output is read from that execution.",
    )
    recorded_turns: int = Field(
        default=0,
        description="Its model turns answered from a recording, not by a provider "
        "(TaskState.recorded_turns; while it runs, its turns' recorded_from).",
    )

    @property
    def shown_status(self) -> str:
        """Its status as the views show it: ``reused`` for a task a fork kept."""
        return "reused" if self.reused_from is not None else self.status

    @property
    def recorded_mark(self) -> str:
        """``recorded`` beside its status when a recording answered its model
        turns (a task of this run, not one a fork kept); else ``""``."""
        return "recorded" if self.recorded_turns and self.reused_from is None else ""

    @property
    def tries(self) -> str:
        """Its attempts as a person reads them: ``1``, or ``1 (2 runs)`` when
        Temporal ran its process or ACP turn more often than it was started."""
        if self.backend_attempts > self.attempts:
            return f"{self.attempts} ({self.backend_attempts} runs)"
        return str(self.attempts)

    @property
    def started_at(self) -> datetime | None:
        """When its first attempt started."""
        return self.runs[0].span.started_at if self.runs else None

    @property
    def closed_at(self) -> datetime | None:
        """When its last attempt closed (``None`` while one runs)."""
        return self.runs[-1].span.closed_at if self.runs else None

    @property
    def duration_s(self) -> float | None:
        start, end = self.started_at, self.closed_at
        return None if start is None or end is None else (end - start).total_seconds()


class ShardView(BaseModel):
    """A shard of a sharded run: a ``TeamRun`` child ``<run id>/shard/<n>``
    holding some of the run's tasks (``oma show <run id>/shard/<n>`` shows
    them). Once the run ended, its result's ``ShardResult``; while it runs,
    what its events say (``None``: not known)."""

    run_id: str = Field(description="The shard's TeamRun workflow id, <run id>/shard/<n>.")
    status: str | None = Field(
        default=None,
        description="Its result's status (ShardResult.status); while the run runs, 'running' "
        "or how its child ended (completed, failed, cancelled, timed_out, terminated); "
        "none: not started.",
    )
    tasks: int | None = Field(default=None, description="How many tasks it holds.")
    first_task: str | None = Field(default=None, description="Its first task's id.")
    completed: int | None = None
    failed: int | None = None
    skipped: int | None = None
    error: str | None = None
    error_code: str | None = None
    started_at: datetime | None = Field(default=None, description="Its child run started.")
    closed_at: datetime | None = Field(default=None, description="Its child run closed.")

    @property
    def duration_s(self) -> float | None:
        """Seconds from start to close; ``None`` while it runs or before it started."""
        if self.started_at is None or self.closed_at is None:
            return None
        return (self.closed_at - self.started_at).total_seconds()


class RunView(BaseModel):
    """A ``TeamRun`` as its histories tell it. ``temporal_run_ids`` keeps its
    JSON key, ``run_ids`` (``oma show --json``)."""

    model_config = ConfigDict(
        serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    workflow_id: str
    temporal_run_ids: list[str] = Field(
        default_factory=list,
        alias="run_ids",
        description="Its continue-as-new chain: the Temporal run ids of its executions, in order.",
    )
    execution_status: str = Field(
        description="Temporal's: RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED, TIMED_OUT."
    )
    status: str = Field(description="The result's status; 'running' while it runs.")
    team: str | None = None
    goal: str | None = None
    started_at: datetime
    closed_at: datetime | None = None
    error: str | None = None
    error_code: str | None = None
    total_token_usage: TokenUsage | None = Field(
        default=None,
        description="The run's totals, from its result; null when unknown (it has no result "
        "yet, none at all, or one that cannot be read: an encrypted run without the key).",
    )
    total_cost_usd: float | None = Field(default=None, description="Null when unknown.")
    totals_unknown: str | None = Field(
        default=None,
        description="Why the totals are unknown: 'its result cannot be read', 'it has no "
        "result yet', 'it ended without a result'.",
    )
    cost_unknown: list[str] = Field(default_factory=list)
    recorded_turns: int = Field(
        default=0, description="Model turns answered from a recording (TeamRunResult's)."
    )
    final_output: str | None = None
    forked_from: str | None = Field(default=None, description="A fork: the run it forked.")
    abort_at: datetime | None = Field(
        default=None,
        description="When the first abort signal reached the run (`oma abort`): while it "
        "still runs, it is draining (no new task starts, the tasks in flight settle).",
    )
    abort_reason: str | None = Field(default=None, description="That signal's reason.")
    tasks: list[TaskView] = Field(default_factory=list, description="In layer order.")
    coordinator: list[ChildRunView] = Field(default_factory=list)
    shards: list[ShardView] = Field(
        default_factory=list,
        description="A sharded run: its shards, in order (it has no tasks of its own).",
    )
    notes: list[str] = Field(
        default_factory=list, description="What could not be read (an encrypted payload, ...)."
    )

    @property
    def duration_s(self) -> float | None:
        if self.closed_at is None:
            return None
        return (self.closed_at - self.started_at).total_seconds()

    @property
    def aborting(self) -> str | None:
        """``aborting: no longer needed (abort signal at +12.3 s): ...`` for a
        run an abort signal reached that still runs (draining); else ``None``."""
        if self.abort_at is None or self.execution_status != "RUNNING":
            return None
        why = f": {self.abort_reason}" if self.abort_reason else ""
        at = seconds_text((self.abort_at - self.started_at).total_seconds())
        return (
            f"aborting{why} (abort signal at +{at}): no new task starts, the tasks in flight "
            "settle, the rest are skipped"
        )

    @property
    def shard_tasks(self) -> int | None:
        """A sharded run: how many tasks its shards hold; ``None`` when not
        known of every shard (or it has none)."""
        counts = [s.tasks for s in self.shards]
        if not counts or None in counts:
            return None
        return sum(c for c in counts if c is not None)

    def task(self, task_id: str) -> TaskView:
        """The task ``task_id``; raises ``KeyError``."""
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(task_id)


# -- getting the histories ------------------------------------------------------


# -- building the view ----------------------------------------------------------


async def build_run_view(
    histories: Sequence[WorkflowHistory],
    converter: DataConverter,
    workflow_id: str | None = None,
    children: ChildHistory | None = None,
    *,
    activities: bool = True,
) -> RunView:
    """The ``RunView`` of the ``TeamRun`` among ``histories`` (``workflow_id``'s,
    when given; else the one no workflow started, or the first when each was
    started by another: a shard's histories without its run's), its children found by
    run id in its child events: among ``histories``, or through ``children``
    (``server_histories``), ``FETCHES_AT_ONCE`` at a time. Without
    ``activities`` no child history is read: the view has the tasks, their
    runs, outputs and errors (all in the team run's own histories), and no
    run's activities (``add_activities`` reads those of some runs). Raises
    ``HistoryReadError`` when there is no such ``TeamRun``."""
    return await _Builder(converter, children, activities=activities).build(histories, workflow_id)


async def add_activities(
    view: RunView, runs: Iterable[ChildRunView], converter: DataConverter, children: ChildHistory
) -> None:
    """Read the activities of ``runs`` (child runs of ``view``, built without
    ``activities``) from their histories, through ``children``; what cannot be
    read joins ``view.notes``."""
    builder = _Builder(converter, children)
    await builder.fill(list(runs), children)
    view.notes += builder.notes


_CLOSE_STATUS = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "COMPLETED",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "FAILED",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "CANCELED",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "TERMINATED",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "TIMED_OUT",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "CONTINUED_AS_NEW",
}

_SPAN_STATUS = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "CANCELED": "cancelled",
    "TERMINATED": "terminated",
    "TIMED_OUT": "timed_out",
    "CONTINUED_AS_NEW": "continued_as_new",
    "RUNNING": "running",
}


_CHILD_CLOSED = {
    "child_workflow_execution_completed_event_attributes": "completed",
    "child_workflow_execution_failed_event_attributes": "failed",
    "child_workflow_execution_canceled_event_attributes": "cancelled",
    "child_workflow_execution_timed_out_event_attributes": "timed_out",
    "child_workflow_execution_terminated_event_attributes": "terminated",
}

_ACTIVITY_CLOSED = {
    "activity_task_failed_event_attributes": "failed",
    "activity_task_timed_out_event_attributes": "timed_out",
    "activity_task_canceled_event_attributes": "cancelled",
}


LOCAL_ACTIVITY_MARKER = "core_local_activity"
"""The marker the SDK's core records a local activity's result under."""

LOCAL_TURN = "model turn"


def _among(by_execution: dict[str, WorkflowHistory]) -> ChildHistory:
    """A ``ChildHistory`` that finds a history among those given, by Temporal run id."""

    async def find(workflow_id: str, temporal_run_id: str) -> WorkflowHistory | None:
        return by_execution.get(temporal_run_id)

    return find


def _proto_time(raw: Any) -> datetime | None:
    """A ``google.protobuf.Timestamp`` as the local activity marker's JSON has it."""
    if not isinstance(raw, dict) or "seconds" not in raw:
        return None
    seconds = int(raw["seconds"]) + int(raw.get("nanos") or 0) / 1e9
    return datetime.fromtimestamp(seconds, tz=UTC)


def _temporal_run_id(history: WorkflowHistory) -> str:
    attrs = started(history)
    return str(attrs.original_execution_run_id or attrs.first_execution_run_id)


def _close_status(history: WorkflowHistory) -> str:
    return _CLOSE_STATUS.get(history.events[-1].event_type, "RUNNING")


def _time(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime(tzinfo=UTC)


def _said(failure: Failure, err: BaseException | None) -> tuple[str, str | None, Any]:
    """What ``failure`` says, decoded as ``err`` (``None``: it could not be):
    its message, its code (an application error's type), and its first
    detail (``None`` when it has none, or it cannot be read)."""
    if err is None:
        return failure.message, failure.application_failure_info.type or None, None
    message = err.message if isinstance(err, FailureError) else str(err)
    if isinstance(err, ApplicationError):
        detail = err.details[0] if err.details else None
        return message, err.type, None if isinstance(detail, UndecodableInput) else detail
    return message, type(err).__name__, None


class _ResultReading:
    """How a builder reads a run's last event for ``closed_result``: what
    cannot be read is noted and reads as nothing (``unread``: a result is
    there but cannot be read), as does a completion that is not an object;
    the failure the run ends with is its error."""

    def __init__(self, builder: _Builder) -> None:
        self.builder = builder
        self.unread = False

    async def decode(self, payloads: Sequence[Payload]) -> list[Any]:
        raw = await self.builder.decode(Payloads(payloads=payloads), "the run's result")
        self.unread = raw is None
        return [raw] if isinstance(raw, dict) else []

    async def decode_failure(self, failure: Failure) -> BaseException | None:
        err = await self.builder.decode_failure(failure)
        message, code, detail = _said(failure, err)
        self.builder._run_error = f"{code}: {message}" if code else message
        carried = bool(failure.application_failure_info.details.payloads)
        self.unread = carried and detail is None
        return err


class _Builder:
    def __init__(
        self,
        converter: DataConverter,
        children: ChildHistory | None = None,
        *,
        activities: bool = True,
    ) -> None:
        self.converter = converter
        self._children_from = children
        self._read_activities = activities
        self.notes: list[str] = []
        self._run_error: str | None = None
        self._result_unread = False

    async def decode(self, payloads: Payloads, what: str) -> Any:
        """The first payload as plain JSON data (dicts, lists), or ``None``.

        A payload that is not encrypted skips the codec: with ``OMA_CODEC_KEYS``
        set the codec marks plaintext for the payload converter to refuse, as a
        worker must refuse a client's plaintext input; a reader runs nothing, and
        plaintext is what it meets in every encrypted run (the SDK core writes a
        local activity marker's own ``data`` unencoded) and in a run recorded
        before encryption was turned on. A reference to a stored payload is
        read from the payload store first (``oma.runtime.payload_store``)."""
        if not payloads.payloads:
            return None
        first = payloads.payloads[0]
        try:
            if reference_of(first) is not None:
                storage = self.converter.external_storage or external_storage(None)
                [first] = await retrieve(storage, [first])
            if first.metadata.get("encoding") == ENCRYPTED_ENCODING:
                value = (await self.converter.decode([first]))[0]
            else:
                value = self.converter.payload_converter.from_payloads([first])[0]
        except Exception as err:  # a codec that cannot decrypt, a broken payload
            self.notes.append(f"cannot read {what}: {err}")
            return None
        if isinstance(value, UndecodableInput):
            self.notes.append(f"cannot read {what}: {value.error or value.reason}")
            return None
        return value

    async def failure(self, failure: Failure) -> tuple[str, str | None, Any]:
        """A failure's message, its code (an application error's type), and
        its first detail (``None`` when it has none)."""
        return _said(failure, await self.decode_failure(failure))

    async def decode_failure(self, failure: Failure) -> BaseException | None:
        """``failure`` as an exception; ``None``, noted, when it cannot be read."""
        try:
            return await self.converter.decode_failure(failure)
        except Exception as e:
            self.notes.append(f"cannot read a failure: {e}")
            return None

    # -- the team run ---------------------------------------------------------

    async def build(self, histories: Sequence[WorkflowHistory], wanted: str | None) -> RunView:
        by_execution: dict[str, WorkflowHistory] = {}
        for h in histories:
            by_execution[_temporal_run_id(h)] = h
        chain = self._team_run_chain(histories, wanted)
        first, last = chain[0], chain[-1]
        first_shard = _first_shard(chain)
        if first_shard is not None:  # a sharded run: its team from a shard's input, not its whole
            attrs = first_shard.start_child_workflow_execution_initiated_event_attributes
            inp = await self.decode(attrs.input, f"the input of {attrs.workflow_id}") or {}
        else:
            inp = await self.decode(started(first).input, "the run's input") or {}
        if isinstance(inp, dict) and "fork" in inp:
            inp = await self._forked_input(first) or inp
        team = inp.get("team") if isinstance(inp, dict) else None
        result = await self._result(last)
        execution_status = _close_status(last)
        view = RunView(
            workflow_id=first.workflow_id,
            temporal_run_ids=[_temporal_run_id(h) for h in chain],
            execution_status=execution_status,
            status=result.status if result else _SPAN_STATUS[execution_status],
            team=team.get("name") if isinstance(team, dict) else None,
            goal=inp.get("goal") if isinstance(inp, dict) else None,
            started_at=_time(first.events[0]),
            closed_at=None if execution_status == "RUNNING" else _time(last.events[-1]),
        )
        if result is not None:
            view.goal = result.goal or view.goal
            view.error, view.error_code = result.error, result.error_code
            view.total_token_usage = result.total_token_usage
            view.total_cost_usd, view.cost_unknown = result.total_cost_usd, result.cost_unknown
            view.final_output = result.final_output
            view.forked_from = result.forked_from
        elif execution_status not in ("RUNNING", "COMPLETED"):
            view.error = self._run_error
        if result is None:
            view.totals_unknown = (
                "its result cannot be read"
                if self._result_unread
                else "it has no result yet"
                if execution_status == "RUNNING"
                else "it ended without a result"
            )
        await self._abort(chain, view)
        if first_shard is not None or (result is not None and result.shards):
            view.shards = await self._shards(chain, result, view.workflow_id)
            view.recorded_turns = result.recorded_turns if result is not None else 0
            view.notes = _grouped(self.notes)
            return view
        children = [c for h in chain for c in await self._children(h, by_execution)]
        tasks = self._tasks(inp, result, children, ended=execution_status != "RUNNING")
        if result is None and execution_status == "CANCELED":
            _as_cancelled(tasks)
        view.tasks = _in_layers(tasks)
        view.coordinator = [c for c in children if c.span.kind == "coordinator"]
        if result is not None:
            view.recorded_turns = result.recorded_turns
        else:  # what its turns so far say
            steps = sum(_recorded(c) for c in view.coordinator)
            view.recorded_turns = steps + sum(t.recorded_turns for t in view.tasks)
        view.notes = _grouped(self.notes)
        return view

    def _team_run_chain(
        self, histories: Sequence[WorkflowHistory], wanted: str | None
    ) -> list[WorkflowHistory]:
        team_runs = []
        for h in histories:
            if started(h).workflow_type.name != WorkflowName.TEAM_RUN:
                continue
            if wanted is not None and h.workflow_id != wanted:
                continue
            team_runs.append(h)
        if wanted is None:  # the one no other started (a shard's, given alone: its own)
            top = [h for h in team_runs if not started(h).parent_workflow_execution.workflow_id]
            team_runs = top or team_runs
        if not team_runs:
            which = f"{WorkflowName.TEAM_RUN} {wanted!r}" if wanted else WorkflowName.TEAM_RUN
            types = sorted({started(h).workflow_type.name for h in histories})
            raise HistoryReadError(
                f"no {which} among the histories given (workflow types: {', '.join(types)})"
            )
        # the chain of the first run found: by first_execution_run_id, in order
        first_run = started(team_runs[0]).first_execution_run_id or _temporal_run_id(team_runs[0])
        chain = [
            h
            for h in team_runs
            if (started(h).first_execution_run_id or _temporal_run_id(h)) == first_run
        ]
        ordered: list[WorkflowHistory] = []
        by_previous = {started(h).continued_execution_run_id: h for h in chain}
        previous = ""
        while (nxt := by_previous.get(previous)) is not None and len(ordered) < len(chain):
            ordered.append(nxt)
            previous = _temporal_run_id(nxt)
        return ordered or chain

    async def _abort(self, chain: Sequence[WorkflowHistory], view: RunView) -> None:
        """The first ``abort`` signal of the run's chain, into ``view``."""
        for history in chain:
            for event in history.events:
                if (payloads := abort_input(event)) is not None:
                    view.abort_at = _time(event)
                    view.abort_reason = await abort_reason(self.converter, payloads)
                    return

    async def _forked_input(self, history: WorkflowHistory) -> dict[str, Any] | None:
        """A fork's input as it goes on (its team, tasks, the state it
        resumed): what its ``read_fork_source`` activity answered
        (``oma.records.fork_source.ForkReads``)."""
        reads = ForkReads()
        for event in history.events:
            if (read := reads.see(event)) is not None:
                forked = await self.decode(read, "the fork's source")
                if isinstance(forked, dict) and isinstance(forked.get("input"), dict):
                    return {**forked["input"], "resume": forked.get("resume")}
        return None

    async def _result(self, last: WorkflowHistory) -> TeamRunResult | None:
        """The result of a closed run (``oma.records.results.closed_result``):
        the completion's, or the first detail of its failure (a TeamRun that
        did not succeed may end FAILED); how it ended without one is its
        error."""
        event = last.events[-1]
        if event.HasField("workflow_execution_timed_out_event_attributes"):
            self._run_error = "the workflow timed out"
        elif event.HasField("workflow_execution_terminated_event_attributes"):
            reason = event.workflow_execution_terminated_event_attributes.reason
            self._run_error = f"terminated: {reason}" if reason else "terminated"
        reading = _ResultReading(self)
        try:
            result = await closed_result(reading, event)
        except ValidationError as err:
            self.notes.append(f"the run's result does not read as a TeamRunResult: {err}")
            result = None
        self._result_unread = reading.unread
        return result

    # -- shards ---------------------------------------------------------------

    async def _shards(
        self, chain: Sequence[WorkflowHistory], result: TeamRunResult | None, run_id: str
    ) -> list[ShardView]:
        """A sharded run's shards: its result's, with the times of their child
        runs; without one (it runs, or ended without a result), the shard
        children its events started, what their summaries say (how many tasks,
        of how many shards: those not started yet are listed too) and how
        they closed (or that they could not start). No shard's input, history
        or completed result is read."""
        ended = result is not None and bool(result.shards)
        by_initiated: dict[int, ShardView] = {}
        planned = 0
        for history in chain:
            for event in history.events:
                if event.HasField("start_child_workflow_execution_initiated_event_attributes"):
                    init = event.start_child_workflow_execution_initiated_event_attributes
                    if init.workflow_type.name != WorkflowName.TEAM_RUN:
                        continue
                    shard = ShardView(run_id=init.workflow_id)
                    if not ended and (said := shard_of_summary(await self._summary(event))):
                        planned, shard.tasks = max(planned, said[1]), said[2]
                    by_initiated[event.event_id] = shard
                elif event.HasField("child_workflow_execution_started_event_attributes"):
                    started = event.child_workflow_execution_started_event_attributes
                    if (began := by_initiated.get(started.initiated_event_id)) is not None:
                        began.started_at = _time(event)
                        began.status = None if ended else "running"
                elif event.HasField("start_child_workflow_execution_failed_event_attributes"):
                    refused = event.start_child_workflow_execution_failed_event_attributes
                    if not ended and (lost := by_initiated.get(refused.initiated_event_id)):
                        cause = StartChildWorkflowExecutionFailedCause.Name(refused.cause)
                        cause = cause.removeprefix(_START_FAILED).replace("_", " ").lower()
                        lost.status, lost.error = "failed", f"its run did not start: {cause}"
                        lost.failed, lost.completed, lost.skipped = lost.tasks, 0, 0
                else:
                    await self._shard_closed(event, by_initiated, read=not ended)
        seen = {s.run_id: s for s in by_initiated.values()}
        if result is not None and ended:
            return [_ended_shard(s, seen.get(s.run_id)) for s in result.shards]
        for shard_id in (shard_workflow_id(run_id, n) for n in range(1, planned + 1)):
            seen.setdefault(shard_id, ShardView(run_id=shard_id))  # one not started yet
        return sorted(seen.values(), key=_shard_number)

    async def _shard_closed(
        self, event: HistoryEvent, by_initiated: dict[int, ShardView], *, read: bool
    ) -> None:
        """A shard child's close: when, and (``read``) how it ended: a shard
        that completed completed every task (a ``TeamRun`` that does not
        succeed ends failed); one that failed carries its result, whose
        tasks are counted, else its failure is its error."""
        which = event.WhichOneof("attributes") or ""
        status = _CHILD_CLOSED.get(which)
        if status is None:
            return
        attrs = getattr(event, which)
        if (shard := by_initiated.get(attrs.initiated_event_id)) is None:
            return
        shard.closed_at = _time(event)
        if not read:
            return
        shard.status = status
        if status == "completed" and shard.tasks is not None:
            shard.completed, shard.failed, shard.skipped = shard.tasks, 0, 0
        elif status == "failed":
            err = await self.decode_failure(attrs.failure)
            if (carried := _carried_result(err)) is not None:
                _count(shard, carried)
            else:
                message, code, _ = _said(attrs.failure, err)
                shard.error, shard.error_code = message, code
        elif status in ("timed_out", "terminated"):
            shard.error = f"its run {status.replace('_', ' ')}"

    # -- children -------------------------------------------------------------

    async def _children(
        self, parent: WorkflowHistory, by_execution: dict[str, WorkflowHistory]
    ) -> list[ChildRunView]:
        views = await self._child_runs(parent)
        if self._read_activities:
            await self.fill(views, self._children_from or _among(by_execution))
        return views

    async def fill(self, views: list[ChildRunView], fetch: ChildHistory) -> None:
        """Add their activities to ``views``, from their histories: read
        ``FETCHES_AT_ONCE`` at a time, in order, and let go."""
        async for view, runs in in_order(
            (self._histories_of(fetch, view) for view in views), FETCHES_AT_ONCE
        ):
            for history in runs:
                view.activities.extend(await self._activities(history, view.span))

    async def _histories_of(
        self, fetch: ChildHistory, view: ChildRunView
    ) -> tuple[ChildRunView, list[WorkflowHistory]]:
        runs = await chain_of(fetch, view.span.workflow_id, view.temporal_run_id or "")
        if not runs:
            self.notes.append(
                f"no history of {view.span.workflow_id} (run {view.temporal_run_id}): "
                "no activities shown"
            )
        return view, runs

    async def _child_runs(self, parent: WorkflowHistory) -> list[ChildRunView]:
        """The children ``parent`` started, without their activities."""
        initiated: dict[int, tuple[HistoryEvent, Any]] = {}
        views: dict[int, ChildRunView] = {}
        for event in parent.events:
            if event.HasField("start_child_workflow_execution_initiated_event_attributes"):
                init = event.start_child_workflow_execution_initiated_event_attributes
                child_input = await self.decode(init.input, f"the input of {init.workflow_id}")
                initiated[event.event_id] = (event, child_input)
            elif event.HasField("child_workflow_execution_started_event_attributes"):
                started = event.child_workflow_execution_started_event_attributes
                init_event, child_input = initiated[started.initiated_event_id]
                views[started.initiated_event_id] = self._child(init_event, event, child_input)
            else:
                await self._child_closed(event, views)
        return list(views.values())

    def _child(
        self, initiated: HistoryEvent, started: HistoryEvent, child_input: Any
    ) -> ChildRunView:
        attrs = initiated.start_child_workflow_execution_initiated_event_attributes
        execution = started.child_workflow_execution_started_event_attributes.workflow_execution
        wid = str(attrs.workflow_id)
        inp = child_input if isinstance(child_input, dict) else {}
        agent = inp.get("agent", {}).get("name") if isinstance(inp.get("agent"), dict) else None
        task_id = inp.get("task_id")
        parent_id = team_run_id_of(wid) or ""
        step = wid[len(parent_id) :].removeprefix("/")
        coordinator = step.startswith("coordinator/")
        span = Span(
            kind="coordinator" if coordinator else "task",
            label=step.replace("/", " ") if coordinator else f"task {task_id or step}",
            workflow_id=wid,
            task_id=None if coordinator else (task_id or step),
            agent=agent,
            status="running",
            scheduled_at=_time(initiated),
            started_at=_time(started),
        )
        return ChildRunView(span=span, temporal_run_id=execution.run_id)

    async def _child_closed(self, event: HistoryEvent, views: dict[int, ChildRunView]) -> None:
        which = event.WhichOneof("attributes") or ""
        status = _CHILD_CLOSED.get(which)
        if status is None:
            return
        attrs = getattr(event, which)
        view = views.get(attrs.initiated_event_id)
        if view is None:
            return
        span = view.span
        span.status, span.closed_at = status, _time(event)
        raw: Any = None
        if status == "completed":
            raw = await self.decode(attrs.result, f"the result of {span.workflow_id}")
        elif status == "failed":
            span.error, span.error_code, raw = await self.failure(attrs.failure)
        if isinstance(raw, dict) and isinstance(raw.get("token_usage"), dict):
            span.token_usage = _usage(raw["token_usage"])
            span.error = raw.get("error") or span.error
            output, ran = raw.get("output"), raw.get("backend_attempts")
            view.output = output if isinstance(output, str) and status == "completed" else None
            view.backend_attempts = ran if isinstance(ran, int) else 0

    # -- activities -----------------------------------------------------------

    async def _activities(self, history: WorkflowHistory, child: Span) -> list[Span]:
        spans: dict[int, Span] = {}
        task_started: dict[int, datetime] = {}
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                attrs = event.activity_task_scheduled_event_attributes
                inp = await self.decode(attrs.input, f"the input of {attrs.activity_type.name}")
                spans[event.event_id] = _activity_span(
                    attrs.activity_type.name,
                    inp if isinstance(inp, dict) else {},
                    child,
                    _time(event),
                    await self._summary(event),
                )
            elif event.HasField("activity_task_started_event_attributes"):
                began = event.activity_task_started_event_attributes
                if (span := spans.get(began.scheduled_event_id)) is not None:
                    span.started_at, span.attempt = _time(event), began.attempt or 1
            elif event.HasField("workflow_task_started_event_attributes"):
                task_started[event.event_id] = _time(event)
            elif event.HasField("marker_recorded_event_attributes"):
                local = await self._local_activity(event, child, task_started)
                if local is not None:
                    spans[event.event_id] = local
            else:
                await self._activity_closed(event, spans)
        ordered = sorted(spans.values(), key=lambda s: s.started_at)
        local_turns = [
            s for s in ordered if s.kind == ActivityName.LLM_TURN and s.label == LOCAL_TURN
        ]
        for turn, span in enumerate(local_turns, start=1):  # their input is not recorded
            span.label = f"model turn {turn}"
        return ordered

    async def _local_activity(
        self, event: HistoryEvent, child: Span, task_started: dict[int, datetime]
    ) -> Span | None:
        """A local activity (an ``llm_turn`` of a provider without I/O, e.g.
        ``scripted``), from its marker: it ran within the workflow task that
        recorded it, from that task's start to its ``complete_time``."""
        attrs = event.marker_recorded_event_attributes
        if attrs.marker_name != LOCAL_ACTIVITY_MARKER or "data" not in attrs.details:
            return None
        data = await self.decode(attrs.details["data"], "a local activity marker")
        if not isinstance(data, dict):
            return None
        end = _proto_time(data.get("complete_time")) or _time(event)
        start = task_started.get(attrs.workflow_task_completed_event_id - 1, end)
        kind = str(data.get("activity_type") or "local activity")
        span = _activity_span(kind, {}, child, start, None)
        if kind == ActivityName.LLM_TURN:
            span.label = LOCAL_TURN
        span.started_at, span.closed_at = start, max(end, start)
        span.attempt = int(data.get("attempt") or 1)
        if attrs.HasField("failure"):
            span.status = "failed"
            span.error, span.error_code, _ = await self.failure(attrs.failure)
        else:
            span.status = "completed"
            out = None
            if "result" in attrs.details:
                out = await self.decode(attrs.details["result"], f"the result of {kind}")
            if isinstance(out, dict):
                _add_output(span, out)
        span.detail = f"local activity; {span.detail}" if span.detail else "local activity"
        return span

    async def _summary(self, event: HistoryEvent) -> str | None:
        if not event.HasField("user_metadata") or not event.user_metadata.HasField("summary"):
            return None
        value = await self.decode(Payloads(payloads=[event.user_metadata.summary]), "a summary")
        return value if isinstance(value, str) and value else None

    async def _activity_closed(self, event: HistoryEvent, spans: dict[int, Span]) -> None:
        if event.HasField("activity_task_completed_event_attributes"):
            attrs = event.activity_task_completed_event_attributes
            if (span := spans.get(attrs.scheduled_event_id)) is None:
                return
            span.status, span.closed_at = "completed", _time(event)
            out = await self.decode(attrs.result, f"the result of {span.kind}")
            if isinstance(out, dict):
                _add_output(span, out)
            return
        which = event.WhichOneof("attributes") or ""
        status = _ACTIVITY_CLOSED.get(which)
        if status is None:
            return
        closed = getattr(event, which)
        if (span := spans.get(closed.scheduled_event_id)) is None:
            return
        span.status, span.closed_at = status, _time(event)
        if status != "cancelled":
            span.error, span.error_code, _ = await self.failure(closed.failure)

    # -- tasks ----------------------------------------------------------------

    def _tasks(
        self,
        inp: Any,
        result: TeamRunResult | None,
        children: list[ChildRunView],
        *,
        ended: bool,
    ) -> list[TaskView]:
        runs: dict[str, list[ChildRunView]] = {}
        for child in children:
            if child.span.task_id is not None:
                runs.setdefault(child.span.task_id, []).append(child)
        tasks: list[TaskView] = []
        if result is not None:
            for t in result.tasks:
                tasks.append(
                    TaskView(
                        id=t.id,
                        title=t.title,
                        assignee=t.assignee,
                        depends_on=t.depends_on,
                        status=t.status.value,
                        error=t.error,
                        error_code=t.error_code,
                        output=t.output,
                        attempts=t.attempts,
                        backend_attempts=t.backend_attempts,
                        token_usage=t.token_usage,
                        cost_usd=t.cost_usd,
                        runs=runs.pop(t.id, []),
                        reused_from=t.reused_from,
                        output_run_id=t.output_run_id,
                        recorded_turns=t.recorded_turns,
                    )
                )
                if t.output is None and t.output_ref is not None and t.reused_from is None:
                    tasks[-1].output = self._kept_output(tasks[-1], t.output_ref)
        else:  # no result (still going, or cancelled, terminated): the tasks it
            # was given, and the children seen so far
            for spec in _given_tasks(inp):
                task_runs = runs.pop(str(spec.get("id")), [])
                tasks.append(_task_so_far(spec, task_runs, ended))
        for task_id, task_runs in runs.items():  # a goal run's tasks before its result
            tasks.append(_task_so_far({"id": task_id}, task_runs, ended))
        return tasks

    def _kept_output(self, task: TaskView, ref: str) -> str | None:
        """The output the run kept by reference at ``ref``: its ``AgentRun``'s
        result, as the run's history recorded the child's completion (of the
        execution ``output_run_id`` when the result names it)."""
        done = [
            r.output
            for r in task.runs
            if r.output is not None and task.output_run_id in (None, r.temporal_run_id)
        ]
        if not done:
            self.notes.append(
                f"the output of task {task.id} was kept by reference (the result of {ref}), "
                "whose completion is not among the histories read: not shown"
            )
        return done[-1] if done else None


_START_FAILED = "START_CHILD_WORKFLOW_EXECUTION_FAILED_CAUSE_"


def _first_shard(chain: Sequence[WorkflowHistory]) -> HistoryEvent | None:
    """The event that started the first shard of a sharded run (a ``TeamRun``
    child: a run starts no other), or ``None``."""
    for history in chain:
        for event in history.events:
            if event.HasField("start_child_workflow_execution_initiated_event_attributes"):
                init = event.start_child_workflow_execution_initiated_event_attributes
                if init.workflow_type.name == WorkflowName.TEAM_RUN:
                    return event
    return None


def _shard_number(shard: ShardView) -> int:
    """``n`` of ``<run id>/shard/<n>``."""
    tail = shard.run_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _ended_shard(shard: ShardResult, seen: ShardView | None) -> ShardView:
    """The view of ``shard`` as the run's result has it, with its child run's times."""
    view = ShardView.model_validate(shard.model_dump())
    if seen is not None:
        view.started_at, view.closed_at = seen.started_at, seen.closed_at
    return view


def _carried_result(err: BaseException | None) -> TeamRunResult | None:
    """The ``TeamRunResult`` a failed ``TeamRun``'s failure ``err`` carries
    (``team_run_result_of``), or ``None`` (also for one that does not read)."""
    try:
        return team_run_result_of(err)
    except ValidationError:
        return None


def _count(shard: ShardView, result: TeamRunResult) -> None:
    """What a shard's ``result`` says of it (as the run counts it: ``ShardedRun``)."""
    statuses = [t.status for t in result.tasks]
    shard.status, shard.error, shard.error_code = result.status, result.error, result.error_code
    shard.tasks = shard.tasks if shard.tasks is not None else len(statuses)
    shard.first_task = result.tasks[0].id if result.tasks else shard.first_task
    shard.completed = statuses.count(TaskStatus.COMPLETED)
    shard.failed = statuses.count(TaskStatus.FAILED)
    shard.skipped = shard.tasks - shard.completed - shard.failed


GROUPED_NAMED = 3
"""How many of the parts a grouped note names (the others are counted)."""


def _grouped(notes: list[str]) -> list[str]:
    """``notes`` with the ``cannot read X: why`` ones of the same ``why`` as
    one: ``cannot read 11 parts of the run (the run's input, the run's
    result, the input of run/a and 8 more): why``; the others as they are,
    in order."""
    prefix = "cannot read "
    parts: dict[str, list[str]] = {}
    for note in notes:
        what, sep, why = note.removeprefix(prefix).partition(": ")
        if note.startswith(prefix) and sep:
            parts.setdefault(why, []).append(what)
    out: list[str] = []
    for note in notes:
        what, sep, why = note.removeprefix(prefix).partition(": ")
        if not note.startswith(prefix) or not sep:
            out.append(note)
        elif (whats := parts.pop(why, None)) is not None:
            if len(whats) == 1:
                out.append(note)
                continue
            named = ", ".join(dict.fromkeys(whats[:GROUPED_NAMED]))
            more = len(whats) - GROUPED_NAMED
            named += f" and {more} more" if more > 0 else ""
            out.append(f"{prefix}{len(whats)} parts of the run ({named}): {why}")
    return out


def _given_tasks(inp: Any) -> list[dict[str, Any]]:
    if not isinstance(inp, dict):
        return []
    resume = inp.get("resume")
    if isinstance(resume, dict) and isinstance(resume.get("result"), dict):
        return [t for t in resume["result"].get("tasks") or [] if isinstance(t, dict)]
    plan = inp.get("plan")
    tasks = plan.get("tasks") if isinstance(plan, dict) else inp.get("tasks")
    return [t for t in tasks or [] if isinstance(t, dict)]


def _task_so_far(spec: dict[str, Any], runs: list[ChildRunView], ended: bool) -> TaskView:
    last = runs[-1].span if runs else None
    # a task that never started in a run that ended never ran (``skipped``)
    status = "skipped" if ended else "pending"
    if last is not None:
        status = {"running": "in_progress", "cancelled": "failed"}.get(last.status, last.status)
    usages = [r.span.token_usage for r in runs]
    known = [u for u in usages if u is not None]
    usage = sum(known, TokenUsage()) if len(known) == len(usages) else None
    return TaskView(
        id=str(spec["id"]),
        title=str(spec.get("title") or ""),
        assignee=spec.get("assignee") or (last.agent if last else None),
        depends_on=[str(d) for d in spec.get("depends_on") or []],
        status=status,
        error=last.error if last else None,
        error_code=last.error_code if last else None,
        token_usage=usage,
        cost_usd=usage.cost_usd if usage is not None and usage.cost_known else None,
        output=runs[-1].output if runs else None,
        attempts=len(runs),
        backend_attempts=sum(r.backend_attempts for r in runs),
        runs=runs,
        recorded_turns=sum(_recorded(r) for r in runs),
    )


def _recorded(run: ChildRunView) -> int:
    """How many of ``run``'s model turns were answered from a recording."""
    return sum(1 for s in run.activities if s.kind == ActivityName.LLM_TURN and s.recorded_from)


def _as_cancelled(tasks: list[TaskView]) -> None:
    """The tasks of a run cancelled through Temporal (no result) with the
    reasons its ``state`` query gives: a task whose ``AgentRun`` was cancelled
    with it failed ``CANCELLED``, ``cancelled with the run``
    (``CANCELLED_WITH_RUN``); a task it never started skipped, because a
    dependency failed of its own (as the run skipped it then: ``skip_reason``),
    else ``skipped: the run was cancelled`` (``CANCELLED_REASON``)."""
    by_id = {t.id: t for t in tasks}
    for t in tasks:
        if t.status == "failed" and t.runs and t.runs[-1].span.status == "cancelled":
            t.error, t.error_code = CANCELLED_WITH_RUN, RunCancelledError.code

    def reason(task: TaskView, seen: frozenset[str]) -> str:
        for dep in (by_id.get(d) for d in task.depends_on if d not in seen):
            if dep is None:
                continue
            if dep.status == "failed":
                failed = TaskState(
                    id=dep.id, title=dep.title, status=TaskStatus.FAILED, error_code=dep.error_code
                )
                said = skip_reason(failed, CANCELLED_REASON)
            elif dep.status == "skipped":
                said = dep.error or reason(dep, seen | {task.id})
            else:
                continue
            if said != f"skipped: {CANCELLED_REASON}":
                return said
        return f"skipped: {CANCELLED_REASON}"

    for t in tasks:
        if t.status == "skipped" and not t.runs and t.error is None:
            t.error = reason(t, frozenset({t.id}))


def _in_layers(tasks: list[TaskView]) -> list[TaskView]:
    """``tasks`` with their ``layer`` set, stably sorted by it."""
    by_id = {t.id: t for t in tasks}
    layers: dict[str, int] = {}

    def layer(task_id: str, seen: frozenset[str]) -> int:
        if task_id in layers:
            return layers[task_id]
        deps = [d for d in by_id[task_id].depends_on if d in by_id and d not in seen]
        value = 1 + max((layer(d, seen | {task_id}) for d in deps), default=-1)
        layers[task_id] = value
        return value

    for t in tasks:
        t.layer = layer(t.id, frozenset())
    return sorted(tasks, key=lambda t: t.layer)


def _usage(raw: Any) -> TokenUsage | None:
    try:
        return TokenUsage.model_validate(raw)
    except ValidationError:
        return None


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _activity_span(
    activity_type: str, inp: dict[str, Any], child: Span, at: datetime, summary: str | None
) -> Span:
    agent: Any = inp.get("agent")
    agent_name = agent.get("name") if isinstance(agent, dict) else agent
    kind, label, detail = activity_type, activity_type, None
    if activity_type == ActivityName.LLM_TURN:
        label = f"model turn {int(inp.get('turn') or 0) + 1}"
    elif activity_type == ActivityName.TOOL_CALL:
        tool: dict[str, Any] = inp["tool"] if isinstance(inp.get("tool"), dict) else {}
        mcp = inp.get("mcp")
        if isinstance(mcp, dict):
            server: dict[str, Any] = mcp["server"] if isinstance(mcp.get("server"), dict) else {}
            kind, label = "mcp_call", f"MCP {server.get('name', '?')}/{mcp.get('tool', '?')}"
        else:
            label = f"tool {tool.get('name', '?')}"
        detail = _short(inp.get("input") or {})
    elif activity_type == ActivityName.PROCESS_RUN:
        backend: dict[str, Any] = inp["backend"] if isinstance(inp.get("backend"), dict) else {}
        command = [str(backend.get("command", "")), *map(str, backend.get("args") or [])]
        label, detail = "process run", _short(" ".join(command))
    elif activity_type == ActivityName.ACP_PROMPT:
        label = "ACP prompt turn"
    elif activity_type == ActivityName.MCP_LIST_TOOLS:
        servers = [s.get("name", "?") for s in inp.get("servers") or [] if isinstance(s, dict)]
        label = f"MCP list tools ({', '.join(servers)})"
    return Span(
        kind=kind,
        label=summary or label,
        workflow_id=child.workflow_id,
        task_id=child.task_id,
        agent=str(agent_name) if agent_name else child.agent,
        status="running",
        scheduled_at=at,
        started_at=at,
        detail=detail,
    )


def _add_output(span: Span, out: dict[str, Any]) -> None:
    """What an activity's result says: tokens and cost, an exit status, a stop reason."""
    raw_usage = out.get("usage") if "usage" in out else out.get("token_usage")
    if isinstance(raw_usage, dict):
        span.token_usage = _usage(raw_usage)
    if span.kind == ActivityName.LLM_TURN:
        parts = [f"model {out.get('model')}" if out.get("model") else None]
        parts.append(f"stop_reason {out.get('stop_reason')}")
        tools = [
            b.get("name")
            for b in out.get("content") or []
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        if tools:
            parts.append(f"asks for {', '.join(map(str, tools))}")
        recorded = out.get("recorded_from")
        if isinstance(recorded, str) and recorded:
            span.recorded_from = recorded
            span.label = f"{span.label} (recorded)"
            parts.append(f"recorded: answered from {recorded}, no provider called")
        span.detail = "; ".join(p for p in parts if p)
    elif span.kind in (ActivityName.TOOL_CALL, "mcp_call"):
        content = _short(out.get("content") or "", 2000)
        if out.get("is_error"):
            span.error = content
        else:
            span.detail = f"{span.detail or ''} → {content}".strip()
    elif span.kind == ActivityName.PROCESS_RUN:
        span.detail = f"{span.detail or ''} (exit {out.get('exit_code', 0)})".strip()
    elif span.kind == ActivityName.ACP_PROMPT:
        span.detail = f"stop_reason {out.get('stop_reason')}"


def seconds_text(seconds: float | None) -> str:
    """A duration as a person reads it: ``0.25 s``, ``12.3 s``, ``4 m 05 s``, ``2 h 03 m``."""
    if seconds is None:
        return ""
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} m {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} m"
