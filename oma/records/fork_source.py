"""A run as a fork reads it (``oma.core.rules.fork``), and the fork made
of it: what the ``read_fork_source`` activity answers, and what ``oma fork``
and the client's fork preview check before a fork starts.

The source is read through a Temporal client, as it stands: the input its
latest run (or the execution ``fork.temporal_run_id`` names) started with
(the first event of its history; a fork's, the input its own
``read_fork_source`` made), and its result (its last event: a completion,
or the failure a run that did not succeed ends with, which holds it) or,
for a run still running or one that ended without a result (cancelled,
terminated), its ``state`` query. The outputs the tasks to run again read
are read back from the children that hold them; the others stay by
reference.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any, cast

from temporalio.api.common.v1 import Payloads, WorkflowExecution
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowFailureError
from temporalio.converter import DataConverter
from temporalio.service import RPCError, RPCStatusCode

from oma.core.contracts.fork import ForkedRun
from oma.core.contracts.names import ActivityName, QueryName, WorkflowName
from oma.core.rules.fork import fork_run
from oma.core.rules.payload_fit import READ_BATCH_BYTES, SHORT_OUTPUT_BYTES, fit
from oma.core.rules.reuse import reuse_run
from oma.core.rules.task_graph import SPEC_FIELDS
from oma.core.schema.errors import InvalidForkError, RunStateTooLargeError
from oma.core.schema.fork import ForkInput, ForkSource, is_fork_input
from oma.core.schema.limits import (
    MAX_DEPENDENCY_PAYLOAD_BYTES,
    json_size,
    state_budget,
)
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import parse_team_run_input
from oma.records.executions import edge_event, latest_execution
from oma.records.outputs import OUTPUT_READS, kept_output
from oma.records.results import closed_result

logger = logging.getLogger(__name__)

FORK_READ_EVENTS = 1000
"""How far into a fork's history ``read_source`` looks for the input it went
on with (its ``read_fork_source`` answer, before any task runs)."""

FORK_READ_PAGE = 100
"""Events per page of those reads."""


async def fork_of(
    client: Client,
    fork: ForkInput,
    workflow_id: str,
    *,
    read_outputs: bool = True,
    own_temporal_run_id: str | None = None,
    stored: bool = False,
) -> ForkedRun:
    """``fork`` as the run ``workflow_id`` goes on (``oma.core.rules.fork.fork_run``),
    its source read through ``client`` unless given inline (``fork.fork.source``):
    the execution ``fork.fork.temporal_run_id`` names, else the latest but the
    fork's own (``own_temporal_run_id``: a fork under its source's workflow id
    reads its predecessor); with ``read_outputs``, the kept outputs it reads
    read back into its state (up to ``READ_BATCH_BYTES``; the rest the run reads
    back as it resumes); ``stored``: the fork's payloads go to a payload
    store (its budget: ``limits.state_budget``). Raises ``InvalidForkError``
    and the run input's errors; ``RPCError``."""
    inline = fork.fork.source
    source = inline or await read_source(
        client, fork.fork.run_id, fork.fork.temporal_run_id, not_temporal_run_id=own_temporal_run_id
    )
    forked = fork_run(
        fork,
        source.input,
        source.result,
        workflow_id=workflow_id,
        now=datetime.now(UTC),
        by_reference=inline is None,
        source_execution=source.temporal_run_id,
        stored=stored,
    )
    if read_outputs and inline is None and forked.resume is not None:
        await read_back(client, forked)
    return forked


async def read_source(
    client: Client,
    run_id: str,
    temporal_run_id: str | None = None,
    *,
    hint: str = "oma fork --history FILE forks an exported history",
    not_temporal_run_id: str | None = None,
) -> ForkSource:
    """The ``TeamRun`` ``run_id`` as a fork reads it: its execution
    ``temporal_run_id`` (none: its latest other than ``not_temporal_run_id``,
    the reader's own execution), the first and the last event of its history,
    read at once, and its ``state`` query when the last is not its end. A
    source that is itself a fork started with a ``fork`` input: its input is
    the one its ``read_fork_source`` made (``ForkReads``). The answer names
    the execution read (``temporal_run_id``). Raises ``InvalidForkError`` for
    an unknown run or execution, another workflow type, or a fork that has
    not read its own source, or a sharded run (its shards hold its tasks)."""
    if temporal_run_id is None:
        temporal_run_id = await latest_execution(
            client, run_id, hint=hint, not_temporal_run_id=not_temporal_run_id
        )
    execution = WorkflowExecution(workflow_id=run_id, run_id=temporal_run_id)
    try:
        first, last = await asyncio.gather(
            edge_event(client, execution, first=True),
            edge_event(client, execution, first=False),
        )
    except RPCError as err:
        unknown = (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT)
        if err.status not in (unknown if temporal_run_id else unknown[:1]):
            raise
        which = f" with Temporal run id {temporal_run_id!r}" if temporal_run_id else ""
        raise InvalidForkError(
            f"no run {run_id!r}{which} in namespace {client.namespace!r}: give the workflow id "
            f"of a TeamRun ({hint})"
        ) from None
    started = first.workflow_execution_started_event_attributes
    if started.workflow_type.name != WorkflowName.TEAM_RUN:
        raise InvalidForkError(
            f"run {run_id!r} is a {started.workflow_type.name}, not a TeamRun: fork the team run"
        )
    values = await client.data_converter.decode(started.input.payloads)
    if len(values) != 1 or not isinstance(values[0], dict):
        raise InvalidForkError(f"the input of run {run_id!r} is not a TeamRun input")
    inp = values[0]
    if is_fork_input(inp):  # a fork's first run: the input it went on with
        reads, read = ForkReads(), None
        handle = client.get_workflow_handle(run_id, run_id=temporal_run_id)
        async for event in handle.fetch_history_events(page_size=FORK_READ_PAGE):
            read = reads.see(event)
            if read is not None or reads.done:
                break
        inp = await forked_input_of(client.data_converter, read, run_id)
    result = await closed_result(client.data_converter, last)
    if result is None:  # running, or ended without a result: its state so far
        result = await client.get_workflow_handle(run_id, run_id=temporal_run_id).query(
            QueryName.STATE, result_type=TeamRunResult
        )
    if result.shards:  # its tasks are its shards' (docs/orchestration.md)
        raise InvalidForkError(
            f"run {run_id!r} ran its tasks in {len(result.shards)} shards, each a TeamRun of "
            f"its own: fork or reuse a shard's run ({result.shards[0].run_id}, ...)"
        )
    return ForkSource(input=inp, result=result, temporal_run_id=temporal_run_id)


async def reuse_of(
    client: Client,
    payload: dict[str, Any],
    workflow_id: str,
    *,
    read_outputs: bool = True,
    own_temporal_run_id: str | None = None,
    stored: bool = False,
) -> ForkedRun:
    """The run ``workflow_id`` of ``payload`` (a ``TeamRun`` input with
    ``options.reuse``) as it goes on, keeping what its reference run did that
    would come out the same (``oma.core.rules.reuse.reuse_run``); with
    ``read_outputs``, ``own_temporal_run_id`` and ``stored`` as ``fork_of``.
    Raises ``InvalidForkError`` (an unknown reference run) and the run
    input's errors; ``RPCError``."""
    inp = parse_team_run_input(payload)
    reuse = inp.options.reuse
    assert reuse is not None
    hint = "options.reuse.from names the run whose completed tasks to reuse"
    source = await read_source(
        client,
        reuse.from_,
        reuse.temporal_run_id,
        hint=hint,
        not_temporal_run_id=own_temporal_run_id,
    )
    now = datetime.now(UTC)
    if reuse.temporal_run_id is None and source.temporal_run_id is not None:
        # the run goes on naming the execution it read (its recorded turns too)
        pinned = {**payload["options"]["reuse"], "temporal_run_id": source.temporal_run_id}
        payload = {**payload, "options": {**payload["options"], "reuse": pinned}}
    forked = reuse_run(
        payload,
        source.input,
        source.result,
        workflow_id=workflow_id,
        now=now,
        reference_execution=source.temporal_run_id,
        stored=stored,
    )
    if read_outputs and forked.resume is not None:
        await read_back(client, forked)
    return forked


def fitted(forked: ForkedRun, workflow_id: str, *, stored: bool = False) -> ForkedRun:
    """``forked`` as the activity answers it, one payload within the run's
    budget (``limits.state_budget(stored)``), as a run that continues as new carries its
    input and state: the task states without what their specs say (the run
    sets it again from its input's tasks or plan), and the outputs that do
    not fit kept by reference, those the tasks to run again read in first
    (the run reads the rest back as it resumes). Raises
    ``RunStateTooLargeError`` when it does not fit even so."""
    if forked.resume is None:
        return forked
    data = forked.model_dump(mode="json")
    state = data["resume"]
    for task in state["result"]["tasks"]:
        for field in SPEC_FIELDS:
            task.pop(field, None)
    budget = state_budget(stored)
    if not fit(data, state["result"], workflow_id, budget, first=forked.read):
        what = "fork" if forked.resume.result.forked_from else "run reusing another's tasks"
        raise RunStateTooLargeError(
            f"the {what}'s input and the state it starts from are {json_size(data)} bytes of "
            f"JSON ({len(forked.reused)} kept task(s), every kept output over "
            f"{SHORT_OUTPUT_BYTES} bytes by reference), over the run's budget of "
            f"{budget} bytes: a kept task carries some 400 bytes "
            "(docs/fork.md, 'How many tasks a fork keeps'); fork or reuse a run of fewer tasks"
        )
    return ForkedRun.model_validate(data)


class ForkReads:
    """Finds, in a fork's history read from its start, the answer of its
    ``read_fork_source`` activity: the input it went on with. Gives up after
    ``FORK_READ_EVENTS`` events (the read comes before any task runs)."""

    def __init__(self) -> None:
        self.scheduled: set[int] = set()
        self.seen = 0
        self.done = False

    def see(self, event: HistoryEvent) -> Payloads | None:
        """The activity's result when ``event`` is its completion, else ``None``."""
        self.seen += 1
        self.done = self.seen >= FORK_READ_EVENTS
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled = event.activity_task_scheduled_event_attributes
            if scheduled.activity_type.name == ActivityName.READ_FORK_SOURCE:
                self.scheduled.add(event.event_id)
        elif event.HasField("activity_task_completed_event_attributes"):
            completed = event.activity_task_completed_event_attributes
            if completed.scheduled_event_id in self.scheduled:
                return completed.result
        return None


async def forked_input_of(
    converter: DataConverter, read: Payloads | None, run_id: str
) -> dict[str, Any]:
    """The input the fork ``run_id`` went on with, out of ``read`` (its
    ``read_fork_source`` activity's result, ``ForkReads``). Raises
    ``InvalidForkError`` when it has none (the fork failed before it read
    its source, or has not read it yet)."""
    if read is None:
        raise InvalidForkError(
            f"run {run_id!r} is a fork that did not read its own source (it failed first, "
            "or has not read it yet): fork its source"
        )
    values = await converter.decode(read.payloads)
    forked = values[0] if len(values) == 1 else None
    if not isinstance(forked, dict) or not isinstance(forked.get("input"), dict):
        raise InvalidForkError(f"the read of its source in fork {run_id!r} does not read")
    return cast(dict[str, Any], forked["input"])


async def read_back(client: Client, forked: ForkedRun) -> None:
    """Read the outputs kept by reference that ``forked.read`` names back
    into its state, from the children that hold them: up to
    ``READ_BATCH_BYTES`` in all, none over ``MAX_DEPENDENCY_PAYLOAD_BYTES``
    (its readers fail on its size). One that cannot be read stays by
    reference."""
    assert forked.resume is not None
    read = set(forked.read)
    wanted = []
    room = READ_BATCH_BYTES
    for state in forked.resume.result.tasks:
        size = state.output_bytes or 0
        fits = size <= min(room, MAX_DEPENDENCY_PAYLOAD_BYTES)
        if state.id in read and state.output is None and state.output_ref and fits:
            wanted.append(state)
            room -= size
    limit = asyncio.Semaphore(OUTPUT_READS)

    async def one(state: Any) -> None:
        async with limit:
            try:
                output = await kept_output(client, state.output_ref, state.output_run_id)
            except (RPCError, WorkflowFailureError) as err:
                logger.warning("kept output %s not read: %s", state.output_ref, err)
                return
            state.output, state.output_ref, state.output_bytes = output, None, None

    await asyncio.gather(*(one(s) for s in wanted))
