"""Recorded model turns: the answers a run's model turns got, by request.

Every ``llm_turn`` of a provider that does I/O records what it asked
(``LlmTurnOutput.request``, a ``RequestDigest``) with its answer. A run that
replays recorded turns (``options.models`` ``recorded``: a fork replays its
source's; ``oma.testing.recorded``) gets, for each model turn whose request
equals a recorded one, that turn's answer, usage and stop reason, and calls
no provider. ``Recording`` holds the turns of one execution of a run (a
Temporal run id: a workflow id has several executions), read from its
histories (the ``TeamRun``'s and the ``AgentRun`` children that execution
started, where the turns are), from the server (``Recordings``, once per
worker and execution) or from exported history files
(``oma.records.history_files.read_history_files``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.service import RPCError, RPCStatusCode

from oma.core.contracts.llm import (
    NO_TOOLS,
    LlmTurnOutput,
    RequestDigest,
    chain_after,
    message_chain,
)
from oma.core.contracts.names import ActivityName, WorkflowName
from oma.core.contracts.workflow_ids import task_workflow_id, team_run_id_of
from oma.core.schema.errors import InvalidForkError
from oma.core.schema.limits import cut_text
from oma.core.schema.messages import LLMMessage, ToolResultBlock, ToolUseBlock
from oma.records.executions import latest_execution, started_children
from oma.records.fork_source import ForkReads
from oma.records.histories import execution_chain

logger = logging.getLogger(__name__)


class Place(NamedTuple):
    """Where a recorded turn was taken: the agent, the task (or
    ``coordinator/<step>``), the turn (0-based), and its ``AgentRun`` (the
    workflow id and the execution's Temporal run id)."""

    agent: str
    task: str
    turn: int
    workflow_id: str
    temporal_run_id: str | None = None


class Recorded(NamedTuple):
    """A recorded turn's request, where it was taken, and the chain of its
    conversation with its answer appended (what the next turn's starts with)."""

    request: RequestDigest
    place: Place
    answered: str


class Recording:
    """The model turns the execution ``temporal_run_id`` of the run
    ``run_id`` recorded, by request (``temporal_run_id`` none: exported
    histories)."""

    def __init__(self, run_id: str, temporal_run_id: str | None = None) -> None:
        self.run_id = run_id
        self.temporal_run_id = temporal_run_id
        self.answers: dict[tuple[int, str, str, str, int, str], tuple[LlmTurnOutput, Place]] = {}
        self.requests: list[Recorded] = []
        self.unmatchable = 0
        """Turns recorded without their request (a run from before requests were recorded)."""

    @property
    def name(self) -> str:
        """The run as a miss names it: its workflow id and its execution."""
        execution = f" (Temporal run id {self.temporal_run_id})" if self.temporal_run_id else ""
        return f"run {self.run_id}{execution}"

    def add(self, out: LlmTurnOutput, place: Place) -> None:
        if out.request is None:
            self.unmatchable += 1
            return
        self.answers.setdefault(out.request.key, (out, place))
        answer = LLMMessage(role="assistant", content=out.content)
        self.requests.append(Recorded(out.request, place, chain_after(out.request.chain, answer)))

    def answer(
        self, request: RequestDigest, legacy: RequestDigest | None = None
    ) -> tuple[LlmTurnOutput, Place] | None:
        """The recorded answer to ``request`` and where it was given, if any;
        else to ``legacy``, the same request in the digest's older form
        (``oma.core.contracts.llm.legacy_digest``) which a turn recorded by
        an older version holds."""
        found = self.answers.get(request.key)
        if found is None and legacy is not None:
            found = self.answers.get(legacy.key)
        return found

    def difference(
        self,
        request: RequestDigest,
        messages: Sequence[LLMMessage],
        task: str,
        legacy: RequestDigest | None = None,
    ) -> str:
        """The first part of ``request`` (of a turn of ``task`` on
        ``messages``; ``legacy`` its older form, as ``answer``) no recorded
        turn shares, in the order a request reads: the model, the system
        prompt, the tools, then the messages (the first that differs from
        every recorded conversation of the task, its recorded answers
        included)."""
        if not self.requests:
            extra = (
                f" ({self.unmatchable} turn(s) recorded by a version that did not record requests)"
                if self.unmatchable
                else ""
            )
            return f"it recorded no model turn{extra}"
        recorded = [r for r in self.requests if r.place.task == task] or self.requests
        ask = request
        if all(r.request.version != request.version for r in recorded):
            if legacy is None or all(r.request.version != legacy.version for r in recorded):
                return (
                    "the recording's turns digest their tools in an older form (a custom tool "
                    "by its import path, not the description and input schema the model was "
                    "sent), which cannot tell whether they changed: record the run again"
                )
            ask = legacy
        mine = [r for r in recorded if r.request.version == ask.version]
        for part, label in (("model", "the model"), ("system", "the system prompt")):
            values = {getattr(r.request, part) for r in mine}
            if getattr(ask, part) not in values:
                shown = f" ({ask.model}; recorded: {', '.join(sorted(values))})"
                return label + (shown if part == "model" else "") + " differs"
        if ask.tools not in {r.request.tools for r in mine}:
            return "the tools differ" + _tools_named(ask, [r.request for r in mine])
        chain = message_chain(list(messages))
        # the longest conversation a recorded turn of the task shares with this
        # one: its request's, or that with the recorded answer after it
        agreed = max(
            (
                length
                for r in mine
                for length, digest in (
                    (r.request.messages, r.request.chain),
                    (r.request.messages + 1, r.answered),
                )
                if length < len(chain) and chain[length] == digest
            ),
            default=0,
        )
        if agreed >= len(messages):
            return "the request differs from every recorded one"
        return f"message {agreed + 1} ({_described(messages, agreed)}) differs from the recording's"


NAMED_TOOLS = 5
"""The most tools a miss names."""


def _tools_named(request: RequestDigest, recorded: list[RequestDigest]) -> str:
    """Which tools differ, as a miss says it: those whose definition changed,
    those new and those gone, against the recorded turn that shares most of
    them (``""`` when the digests do not say: over ``TOOL_DIGESTS_MAX`` tools)."""
    mine = _each_tool(request)
    theirs = [d for d in map(_each_tool, recorded) if d is not None]
    if mine is None or not theirs:
        return ""
    nearest = max(theirs, key=lambda d: sum(d.get(n) == v for n, v in mine.items()))
    said = [
        *(
            f"{_name(n)} changed (its description or input schema)"
            for n in mine
            if n in nearest and nearest[n] != mine[n]
        ),
        *(f"{_name(n)} is new" for n in mine if n not in nearest),
        *(f"{_name(n)} is no longer offered" for n in nearest if n not in mine),
    ]
    if not said:
        return " (their order)"
    more = f"; and {len(said) - NAMED_TOOLS} more" if len(said) > NAMED_TOOLS else ""
    return ": " + "; ".join(said[:NAMED_TOOLS]) + more


def _each_tool(request: RequestDigest) -> dict[str, str] | None:
    """Each tool's digest by name, if the request's digest says them."""
    if request.tool_digests or request.tools == NO_TOOLS:
        return request.tool_digests
    return None


def _described(messages: Sequence[LLMMessage], index: int) -> str:
    """Message ``index`` as a miss names it: its role, and for tool results
    the tools whose results they are (``user: tool result of 'lookup'``)."""
    message = messages[index]
    results = [b.tool_use_id for b in message.content if isinstance(b, ToolResultBlock)]
    if not results:
        return message.role
    calls = {
        b.id: b.name for m in messages[:index] for b in m.content if isinstance(b, ToolUseBlock)
    }
    names = list(dict.fromkeys(calls.get(r, "?") for r in results))
    shown = ", ".join(_name(n) for n in names[:NAMED_TOOLS])
    more = f" and {len(names) - NAMED_TOOLS} more" if len(names) > NAMED_TOOLS else ""
    plural = "s" if len(results) > 1 else ""
    return f"{message.role}: tool result{plural} of {shown}{more}"


NAME_CHARS = 80
"""The most characters of a tool's name a miss shows (a model names the tools it calls)."""


def _name(name: str) -> str:
    return repr(cut_text(name, NAME_CHARS))


async def recording_of(
    histories: Iterable[WorkflowHistory],
    converter: DataConverter,
    run_id: str,
    temporal_run_id: str | None = None,
) -> Recording:
    """The model turns among ``histories`` (a ``TeamRun``'s execution
    ``temporal_run_id`` and its children's): each completed ``llm_turn``
    activity's answer, with its request, placed by its ``AgentRun``."""
    recording = Recording(run_id, temporal_run_id)
    for history in histories:
        first = history.events[0].workflow_execution_started_event_attributes
        if first.workflow_type.name != WorkflowName.AGENT_RUN:
            continue
        task = task_of(history.workflow_id)
        scheduled: dict[int, dict[str, Any]] = {}
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                attrs = event.activity_task_scheduled_event_attributes
                if attrs.activity_type.name == ActivityName.LLM_TURN:
                    scheduled[event.event_id] = await _decoded(converter, attrs.input.payloads)
            elif event.HasField("activity_task_completed_event_attributes"):
                done = event.activity_task_completed_event_attributes
                inp = scheduled.get(done.scheduled_event_id)
                if inp is None:
                    continue
                raw = await _decoded(converter, done.result.payloads)
                out = LlmTurnOutput.model_validate(raw)
                agent = str((inp.get("agent") or {}).get("name", "?"))
                turn = int(inp.get("turn") or 0)
                place = Place(agent, task, turn, history.workflow_id, history.run_id or None)
                recording.add(out, place)
    return recording


async def read(client: Client, run_id: str, temporal_run_id: str | None = None) -> Recording:
    """The recording of the ``TeamRun`` ``run_id``'s execution
    ``temporal_run_id`` (none: its latest), read from the server
    (``fetch``). Raises ``InvalidForkError`` for an unknown run or execution."""
    execution = temporal_run_id or await latest_execution(client, run_id, hint=HINT)
    histories = await fetch(client, run_id, execution)
    return await recording_of(histories, client.data_converter, run_id, execution)


HINT = "options.models.from names the run whose recorded model turns are replayed"


async def fetch(
    client: Client, run_id: str, temporal_run_id: str | None = None
) -> list[WorkflowHistory]:
    """The histories of the ``TeamRun`` ``run_id``'s execution
    ``temporal_run_id`` (none: its latest) and of those it continued as new
    from, and of every ``AgentRun`` execution those started (by the Temporal
    run ids their start events give: a later run under the same workflow id
    starts children under the same ids); for a fork (or a run that reused
    another's work), those of the ``AgentRun``s its kept tasks ran in, where
    their turns are (a fork of a fork runs them again): the executions that
    returned their outputs, where the state names them. Raises
    ``InvalidForkError`` for an unknown run or execution."""
    limit = asyncio.Semaphore(FETCHES)
    try:
        chain = await execution_chain(client, run_id, temporal_run_id, limit=limit)
    except RPCError as err:
        if err.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            raise
        which = f" with Temporal run id {temporal_run_id!r}" if temporal_run_id else ""
        raise InvalidForkError(
            f"no run {run_id!r}{which} to replay recorded model turns from ({HINT})"
        ) from None
    children = started_children(chain)
    own = {c.workflow_id for c in children}
    kept = [k for k in await _kept_from(chain[0], client.data_converter) if k[0] not in own]

    async def runs_of(workflow_id: str, temporal_run_id: str | None) -> list[WorkflowHistory]:
        try:
            return await execution_chain(
                client, workflow_id, temporal_run_id, later=True, limit=limit
            )
        except RPCError as err:  # past its retention: its turns are not there to match
            logger.warning("the recorded turns of %s not read: %s", workflow_id, err)
            return []

    fetched = await asyncio.gather(
        *(runs_of(c.workflow_id, c.run_id) for c in children),
        *(runs_of(workflow_id, execution) for workflow_id, execution in kept),
    )
    return [*chain, *(h for runs in fetched for h in runs)]


async def _kept_from(
    first: WorkflowHistory, converter: DataConverter
) -> list[tuple[str, str | None]]:
    """The ``AgentRun``s of the tasks a fork (or a run with ``options.reuse``)
    kept from other runs, whose histories hold those tasks' turns: the
    ``reused_from`` of the state its ``read_fork_source`` answered with, in
    the first run of its chain, each with the execution that returned the
    output (``output_run_id``; none in a state from before it: the latest)."""
    reads, read = ForkReads(), None
    for event in first.events:
        if (read := reads.see(event)) is not None or reads.done:
            break
    if read is None:
        return []
    forked = await _decoded(converter, read.payloads)
    tasks = ((forked.get("resume") or {}).get("result") or {}).get("tasks") or []
    kept = [t for t in tasks if isinstance(t.get("reused_from"), dict)]
    return list(
        dict.fromkeys(
            (
                task_workflow_id(t["reused_from"]["run_id"], t["reused_from"]["task_id"]),
                t.get("output_run_id") or None,
            )
            for t in kept
        )
    )


FETCHES = 16
"""How many histories ``fetch`` reads at once."""


class Recordings:
    """A worker's recordings, read once per execution (``CACHE_SIZE`` kept),
    keyed by its workflow id and Temporal run id: a workflow id has several
    executions, each its own turns."""

    CACHE_SIZE = 8

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, str], Recording] = OrderedDict()
        self._lock = asyncio.Lock()

    async def of(
        self, client: Client, run_id: str, temporal_run_id: str | None = None
    ) -> Recording:
        """The recording of the ``TeamRun`` ``run_id``'s execution
        ``temporal_run_id`` (none, a run from before executions were named:
        the latest now, kept under its run id). Raises ``InvalidForkError``
        (``read``)."""
        async with self._lock:  # one read per execution, however many turns ask at once
            execution = temporal_run_id or await latest_execution(client, run_id, hint=HINT)
            key = (run_id, execution)
            recording = self._kept.get(key)
            if recording is None:
                recording = await read(client, run_id, execution)
                self._kept[key] = recording
            self._kept.move_to_end(key)
            while len(self._kept) > self.CACHE_SIZE:
                self._kept.popitem(last=False)
            return recording


def task_of(workflow_id: str) -> str:
    """The task (or ``coordinator/<step>``) an ``AgentRun`` id names."""
    parent = team_run_id_of(workflow_id)
    return workflow_id[len(parent) + 1 :] if parent else workflow_id


async def _decoded(converter: DataConverter, payloads: Any) -> dict[str, Any]:
    values = await converter.decode(payloads)
    return values[0] if values and isinstance(values[0], dict) else {}
