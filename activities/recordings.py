"""Recorded model turns: the answers a run's model turns got, by request.

Every ``llm_turn`` of a provider that does I/O records what it asked
(``LlmTurnOutput.request``, a ``RequestDigest``) with its answer. A run that
replays recorded turns (``options.models`` ``recorded``: a fork replays its
source's; ``oma.testing.recorded``) gets, for each model turn whose request
equals a recorded one, that turn's answer, usage and stop reason, and calls
no provider. ``Recording`` holds one run's turns, read from its histories
(the ``TeamRun``'s and its children's: the turns are in the ``AgentRun``
children), from the server (``Recordings``, once per worker and run) or from
exported history files (``load``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.service import RPCError, RPCStatusCode

from oma.activities.fork_source import ForkReads
from oma.core.contracts.llm import LlmTurnOutput, RequestDigest, message_chain
from oma.core.contracts.workflow_ids import task_workflow_id, team_run_id_of
from oma.core.schema.errors import InvalidForkError
from oma.core.schema.messages import LLMMessage

logger = logging.getLogger(__name__)


class Place(NamedTuple):
    """Where a recorded turn was taken: the agent, the task (or
    ``coordinator/<step>``), the turn (0-based), and its ``AgentRun``."""

    agent: str
    task: str
    turn: int
    workflow_id: str


class Recording:
    """The model turns the run ``run_id`` recorded, by request."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.answers: dict[tuple[str, str, str, int, str], tuple[LlmTurnOutput, Place]] = {}
        self.requests: list[tuple[RequestDigest, Place]] = []
        self.unmatchable = 0
        """Turns recorded without their request (a run from before requests were recorded)."""

    def add(self, out: LlmTurnOutput, place: Place) -> None:
        if out.request is None:
            self.unmatchable += 1
            return
        self.answers.setdefault(out.request.key, (out, place))
        self.requests.append((out.request, place))

    def answer(self, request: RequestDigest) -> tuple[LlmTurnOutput, Place] | None:
        """The recorded answer to ``request`` and where it was given, if any."""
        return self.answers.get(request.key)

    def difference(self, request: RequestDigest, messages: Sequence[LLMMessage], task: str) -> str:
        """The first part of ``request`` (of a turn of ``task`` on
        ``messages``) no recorded turn shares, in the order a request reads:
        the model, the system prompt, the tools, then the messages (the first
        that differs from every recorded conversation of the task)."""
        if not self.requests:
            extra = (
                f" ({self.unmatchable} turn(s) recorded by a version that did not record requests)"
                if self.unmatchable
                else ""
            )
            return f"run {self.run_id} recorded no model turn{extra}"
        mine = [r for r, p in self.requests if p.task == task] or [r for r, _ in self.requests]
        for part, label in (("model", "the model"), ("system", "the system prompt")):
            values = {getattr(r, part) for r in mine}
            if getattr(request, part) not in values:
                shown = f" ({request.model}; recorded: {', '.join(sorted(values))})"
                return label + (shown if part == "model" else "") + " differs"
        if request.tools not in {r.tools for r in mine}:
            return "the tools differ"
        chain = message_chain(list(messages))
        # the longest conversation a recorded turn of the task shares with this one
        agreed = max(
            (r.messages for r in mine if r.messages < len(chain) and chain[r.messages] == r.chain),
            default=0,
        )
        if agreed >= len(messages):
            return "the request differs from every recorded one"
        role = messages[agreed].role
        return f"message {agreed + 1} ({role}) differs from the recording's"


async def recording_of(
    histories: Iterable[WorkflowHistory], converter: DataConverter, run_id: str
) -> Recording:
    """The model turns among ``histories`` (a ``TeamRun``'s and its
    children's): each completed ``llm_turn`` activity's answer, with its
    request, placed by its ``AgentRun``."""
    recording = Recording(run_id)
    for history in histories:
        first = history.events[0].workflow_execution_started_event_attributes
        if first.workflow_type.name != "AgentRun":
            continue
        task = task_of(history.workflow_id)
        scheduled: dict[int, dict[str, Any]] = {}
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                attrs = event.activity_task_scheduled_event_attributes
                if attrs.activity_type.name == "llm_turn":
                    scheduled[event.event_id] = await _decoded(converter, attrs.input.payloads)
            elif event.HasField("activity_task_completed_event_attributes"):
                done = event.activity_task_completed_event_attributes
                inp = scheduled.get(done.scheduled_event_id)
                if inp is None:
                    continue
                raw = await _decoded(converter, done.result.payloads)
                out = LlmTurnOutput.model_validate(raw)
                agent = str((inp.get("agent") or {}).get("name", "?"))
                place = Place(agent, task, int(inp.get("turn") or 0), history.workflow_id)
                recording.add(out, place)
    return recording


def load(path: Path) -> list[WorkflowHistory]:
    """Exported histories (``temporal workflow show --output json``): a file,
    or every ``*.json`` file of a directory. A history's workflow id is the
    one its start records, else the file's stem."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    histories = []
    for file in files:
        raw = json.loads(file.read_text())
        history = WorkflowHistory.from_json(file.stem, raw)
        started = history.events[0].workflow_execution_started_event_attributes
        histories.append(WorkflowHistory(started.workflow_id or file.stem, history.events))
    return histories


async def fetch(client: Client, run_id: str) -> list[WorkflowHistory]:
    """The histories of the ``TeamRun`` ``run_id`` (every run of its chain)
    and of every child those runs started; for a fork (or a run that reused
    another's work), those of the ``AgentRun``s its kept tasks ran in, where
    their turns are (a fork of a fork runs them again). Raises ``InvalidForkError`` for an
    unknown run."""
    try:
        latest = await client.get_workflow_handle(run_id).fetch_history()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        raise InvalidForkError(f"no run {run_id!r} to replay recorded model turns from") from None
    chain = [latest]
    while previous := _started(chain[0]).continued_execution_run_id:
        chain.insert(0, await client.get_workflow_handle(run_id, run_id=previous).fetch_history())
    children = [
        event.child_workflow_execution_started_event_attributes.workflow_execution
        for history in chain
        for event in history.events
        if event.HasField("child_workflow_execution_started_event_attributes")
    ]
    own = {c.workflow_id for c in children}
    kept = [k for k in await _kept_from(chain[0], client.data_converter) if k not in own]
    limit = asyncio.Semaphore(FETCHES)

    async def runs_of(workflow_id: str, run: str | None) -> list[WorkflowHistory]:
        """A child's history and those of the runs it continued as new in
        (``run`` none: a kept task's ``AgentRun``, from its first run)."""
        found: list[WorkflowHistory] = []
        next_run: str | None = run
        if run is None:
            try:
                async with limit:
                    latest = await client.get_workflow_handle(workflow_id).fetch_history()
                    next_run = latest.run_id
                    while previous := _started(latest).continued_execution_run_id:
                        next_run = previous
                        handle = client.get_workflow_handle(workflow_id, run_id=previous)
                        latest = await handle.fetch_history()
            except RPCError as err:  # past its retention: its turns are not there to match
                logger.warning("the recorded turns of %s not read: %s", workflow_id, err)
                return found
        while next_run:
            async with limit:
                handle = client.get_workflow_handle(workflow_id, run_id=next_run)
                found.append(await handle.fetch_history())
            last = found[-1].events[-1]
            attrs = last.workflow_execution_continued_as_new_event_attributes
            next_run = (
                attrs.new_execution_run_id
                if last.HasField("workflow_execution_continued_as_new_event_attributes")
                else None
            )
        return found

    fetched = await asyncio.gather(
        *(runs_of(c.workflow_id, c.run_id) for c in children),
        *(runs_of(workflow_id, None) for workflow_id in kept),
    )
    return [*chain, *(h for runs in fetched for h in runs)]


async def _kept_from(first: WorkflowHistory, converter: DataConverter) -> list[str]:
    """The ``AgentRun``s of the tasks a fork (or a run with ``options.reuse``)
    kept from other runs, whose histories hold those tasks' turns: the
    ``reused_from`` of the state its ``read_fork_source`` answered with, in
    the first run of its chain."""
    reads, read = ForkReads(), None
    for event in first.events:
        if (read := reads.see(event)) is not None or reads.done:
            break
    if read is None:
        return []
    forked = await _decoded(converter, read.payloads)
    tasks = ((forked.get("resume") or {}).get("result") or {}).get("tasks") or []
    origins = [t["reused_from"] for t in tasks if isinstance(t.get("reused_from"), dict)]
    return list(dict.fromkeys(task_workflow_id(o["run_id"], o["task_id"]) for o in origins))


FETCHES = 16
"""How many histories ``fetch`` reads at once."""


def _started(history: WorkflowHistory) -> Any:
    return history.events[0].workflow_execution_started_event_attributes


class Recordings:
    """A worker's recordings, read once per source run (``CACHE_SIZE`` kept)."""

    CACHE_SIZE = 8

    def __init__(self) -> None:
        self._kept: OrderedDict[str, Recording] = OrderedDict()
        self._lock = asyncio.Lock()

    async def of(self, client: Client, run_id: str) -> Recording:
        async with self._lock:  # one read per run, however many turns ask at once
            recording = self._kept.get(run_id)
            if recording is None:
                histories = await fetch(client, run_id)
                recording = await recording_of(histories, client.data_converter, run_id)
                self._kept[run_id] = recording
            self._kept.move_to_end(run_id)
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
