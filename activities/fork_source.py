"""The ``read_fork_source`` activity: a fork's first run reads its source run
and makes the input the fork goes on with (``oma.core.rules.fork``).

The source is read through the worker's Temporal client, as it stands: the
input its latest run (or the execution ``fork.temporal_run_id`` names)
started with (the first event of its history; a fork's, the input its own
``read_fork_source`` made), and its result (its last event: a completion,
or the failure a run that did not succeed ends with, which holds it) or,
for a run still running or one that ended without a result (cancelled,
terminated), its ``state`` query. The outputs the tasks to run again read
are read back from the children that hold them; the others stay by
reference. ``oma fork`` calls ``fork_of`` too, to check a fork and say
what it keeps before it starts one.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any, cast

from temporalio import activity
from temporalio.api.common.v1 import Payloads, WorkflowExecution
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import (
    GetWorkflowExecutionHistoryRequest,
    GetWorkflowExecutionHistoryReverseRequest,
)
from temporalio.client import Client, WorkflowFailureError
from temporalio.converter import DataConverter
from temporalio.service import RPCError, RPCStatusCode

from oma.activities.tools.custom import load_custom_tool
from oma.core.contracts.fork import ForkedRun, ReadForkSourceInput
from oma.core.contracts.names import ActivityName, QueryName, WorkflowName
from oma.core.contracts.visibility import team_run_result_of
from oma.core.contracts.workflow_ids import task_workflow_id
from oma.core.rules.fork import fork_run
from oma.core.rules.payload_fit import READ_BATCH_BYTES, SHORT_OUTPUT_BYTES, fit
from oma.core.rules.reuse import reuse_run
from oma.core.rules.task_graph import SPEC_FIELDS
from oma.core.schema.errors import (
    InvalidForkError,
    OMAError,
    RunStateTooLargeError,
    application_error,
)
from oma.core.schema.fork import ForkInput, ForkSource, is_fork_input, parse_fork_input
from oma.core.schema.limits import (
    MAX_DEPENDENCY_PAYLOAD_BYTES,
    RUN_STATE_BUDGET_BYTES,
    json_size,
)
from oma.core.schema.results import AgentRunResult, TeamRunResult
from oma.core.schema.run_input import parse_team_run_input
from oma.core.schema.task import ReusedFrom
from oma.core.schema.team import TeamConfig
from oma.core.schema.tools import CUSTOM_TOOL_PATH

logger = logging.getLogger(__name__)

OUTPUT_READS = 8
"""How many kept outputs ``fork_of`` reads back at once."""

FORK_READ_EVENTS = 1000
"""How far into a fork's history ``read_source`` looks for the input it went
on with (its ``read_fork_source`` answer, before any task runs)."""

FORK_READ_PAGE = 100
"""Events per page of those reads."""


@activity.defn(name=ActivityName.READ_FORK_SOURCE)
async def read_fork_source(inp: ReadForkSourceInput) -> ForkedRun:
    """The fork ``inp.workflow_id`` of its source run (``fork_of``).

    Raises a non-retryable ``ApplicationError`` of the error's code when the
    fork cannot be made (``INVALID_FORK``, ``INVALID_RUN_INPUT``, ...); the
    server's errors are retried.
    """
    try:
        own = activity.info().workflow_run_id
        if is_fork_input(inp.fork):
            fork = parse_fork_input(inp.fork)
            forked = await fork_of(activity.client(), fork, inp.workflow_id, own_run_id=own)
        else:
            forked = await reuse_of(activity.client(), inp.fork, inp.workflow_id, own_run_id=own)
        await _consequential(activity.client(), forked)
        return fitted(forked, inp.workflow_id)
    except OMAError as err:
        # more than the worker's conversion (oma.runtime.activity_errors): a
        # fork that cannot be made ends, on the data converter's errors too
        # (a source run this worker cannot read), and its failure has no cause
        raise application_error(err) from None


def fitted(forked: ForkedRun, workflow_id: str) -> ForkedRun:
    """``forked`` as the activity answers it, one payload within
    ``RUN_STATE_BUDGET_BYTES``, as a run that continues as new carries its
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
    if not fit(data, state["result"], workflow_id, RUN_STATE_BUDGET_BYTES, first=forked.read):
        what = "fork" if forked.resume.result.forked_from else "run reusing another's tasks"
        raise RunStateTooLargeError(
            f"the {what}'s input and the state it starts from are {json_size(data)} bytes of "
            f"JSON ({len(forked.reused)} kept task(s), every kept output over "
            f"{SHORT_OUTPUT_BYTES} bytes by reference), over the run's budget of "
            f"{RUN_STATE_BUDGET_BYTES} bytes: a kept task carries some 400 bytes "
            "(docs/fork.md, 'How many tasks a fork keeps'); fork or reuse a run of fewer tasks"
        )
    return ForkedRun.model_validate(data)


async def reuse_of(
    client: Client,
    payload: dict[str, Any],
    workflow_id: str,
    *,
    read_outputs: bool = True,
    own_run_id: str | None = None,
) -> ForkedRun:
    """The run ``workflow_id`` of ``payload`` (a ``TeamRun`` input with
    ``options.reuse``) as it goes on, keeping what its reference run did that
    would come out the same (``oma.core.rules.reuse.reuse_run``); with
    ``read_outputs`` and ``own_run_id`` as ``fork_of``. Raises
    ``InvalidForkError`` (an unknown reference run) and the run input's
    errors; ``RPCError``."""
    inp = parse_team_run_input(payload)
    reuse = inp.options.reuse
    assert reuse is not None
    hint = "options.reuse.from names the run whose completed tasks to reuse"
    source = await read_source(
        client, reuse.from_, reuse.temporal_run_id, hint=hint, not_run_id=own_run_id
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
    )
    if read_outputs and forked.resume is not None:
        await _read_back(client, forked)
    return forked


async def _consequential(client: Client, forked: ForkedRun) -> None:
    """Mark each kept task whose agent has consequential tools
    (``@oma.consequential``) and that called one where it ran
    (``reused_consequential``), with a warning: reuse never skips such a call
    silently. Reads the result of each such task's ``AgentRun``."""
    if forked.resume is None:
        return
    team = TeamConfig.model_validate(forked.input["team"])
    children: dict[tuple[str, str], dict[str, str]] = {}
    for state in forked.resume.result.tasks:
        agent = team.agent(state.assignee or "")
        if state.reused_from is None or agent is None:
            continue
        gated = {
            match.group(1)
            for path in agent.tools or []
            if (match := CUSTOM_TOOL_PATH.match(path)) and _is_consequential(path)
        }
        if not gated:
            continue
        ref = task_workflow_id(state.reused_from.run_id, state.reused_from.task_id)
        try:
            execution = state.output_run_id or await _child_execution(
                client, state.reused_from, ref, children
            )
            handle = client.get_workflow_handle(ref, run_id=execution, result_type=AgentRunResult)
            result = await handle.result()
        except (RPCError, WorkflowFailureError) as err:
            logger.warning("the tool calls of %s not read: %s", ref, err)
            continue
        called = sorted({c.name for c in result.tool_calls} & gated)
        if called:
            state.reused_consequential = called
            forked.warnings.append(
                f"task {state.id} is reused: it called the consequential tool(s) "
                f"{', '.join(called)} in {ref}, which are not called again"
            )


async def _child_execution(
    client: Client,
    origin: ReusedFrom,
    child_id: str,
    seen: dict[tuple[str, str], dict[str, str]],
) -> str | None:
    """The run id of the ``AgentRun`` ``child_id`` that the ``TeamRun``
    execution ``origin`` names started (its last, for a task retried), read
    from that execution's history and, back along a chain that continued as
    new, its predecessors'; ``seen`` caches each history's children. ``None``
    when ``origin`` names no execution (a run from before it: the latest is
    read) or none started it."""
    run_id = origin.temporal_run_id
    while run_id:
        key = (origin.run_id, run_id)
        if key not in seen:
            seen[key] = await _children_of(client, origin.run_id, run_id)
        found = seen[key].get(child_id)
        if found is not None:
            return found
        run_id = seen[key].get(_CONTINUED_FROM)
    return None


_CONTINUED_FROM = ""
"""The key ``_children_of`` answers an execution's predecessor under (no child id is empty)."""


async def _children_of(client: Client, workflow_id: str, run_id: str) -> dict[str, str]:
    """Child workflow id -> the run id of its last execution the ``TeamRun``
    execution started, and ``_CONTINUED_FROM`` -> the execution it continued
    from, if any."""
    found: dict[str, str] = {}
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_execution_started_event_attributes"):
            previous = event.workflow_execution_started_event_attributes.continued_execution_run_id
            if previous:
                found[_CONTINUED_FROM] = previous
        elif event.HasField("child_workflow_execution_started_event_attributes"):
            started = event.child_workflow_execution_started_event_attributes.workflow_execution
            found[started.workflow_id] = started.run_id
    return found


def _is_consequential(path: str) -> bool:
    try:
        return load_custom_tool(path).traits.consequential
    except OMAError:
        return False


async def fork_of(
    client: Client,
    fork: ForkInput,
    workflow_id: str,
    *,
    read_outputs: bool = True,
    own_run_id: str | None = None,
) -> ForkedRun:
    """``fork`` as the run ``workflow_id`` goes on (``oma.core.rules.fork.fork_run``),
    its source read through ``client`` unless given inline (``fork.fork.source``):
    the execution ``fork.fork.temporal_run_id`` names, else the latest but the
    fork's own (``own_run_id``: a fork under its source's workflow id reads
    its predecessor); with ``read_outputs``, the kept outputs it reads read
    back into its state (up to ``READ_BATCH_BYTES``; the rest the run reads
    back as it resumes). Raises ``InvalidForkError`` and the run input's
    errors; ``RPCError``."""
    inline = fork.fork.source
    source = inline or await read_source(
        client, fork.fork.run_id, fork.fork.temporal_run_id, not_run_id=own_run_id
    )
    forked = fork_run(
        fork,
        source.input,
        source.result,
        workflow_id=workflow_id,
        now=datetime.now(UTC),
        by_reference=inline is None,
        source_execution=source.temporal_run_id,
    )
    if read_outputs and inline is None and forked.resume is not None:
        await _read_back(client, forked)
    return forked


async def read_source(
    client: Client,
    run_id: str,
    temporal_run_id: str | None = None,
    *,
    hint: str = "oma fork --history FILE forks an exported history",
    not_run_id: str | None = None,
) -> ForkSource:
    """The ``TeamRun`` ``run_id`` as a fork reads it: its execution
    ``temporal_run_id`` (none: its latest other than ``not_run_id``, the
    reader's own execution), the first and the last event of its history,
    read at once, and its ``state`` query when the last is not its end. A
    source that is itself a fork started with a ``fork`` input: its input is
    the one its ``read_fork_source`` made (``ForkReads``). The answer names
    the execution read (``temporal_run_id``). Raises ``InvalidForkError`` for
    an unknown run or execution, another workflow type, or a fork that has
    not read its own source."""
    if temporal_run_id is None:
        temporal_run_id = await latest_execution(client, run_id, hint=hint, not_run_id=not_run_id)
    execution = WorkflowExecution(workflow_id=run_id, run_id=temporal_run_id)
    try:
        first, last = await asyncio.gather(
            _edge_event(client, execution, first=True),
            _edge_event(client, execution, first=False),
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
    return ForkSource(input=inp, result=result, temporal_run_id=temporal_run_id)


async def latest_execution(
    client: Client, run_id: str, *, hint: str, not_run_id: str | None = None
) -> str:
    """The Temporal run id of the latest execution of the workflow
    ``run_id``, other than ``not_run_id`` (a run under the same workflow id
    that reads its predecessor: then the newest other one Temporal's
    visibility lists). Raises ``InvalidForkError`` when there is none."""
    try:
        latest = (await client.get_workflow_handle(run_id).describe()).run_id
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        latest = None
    if latest is not None and latest != not_run_id:
        return latest
    others = [
        wf
        async for wf in client.list_workflows(f"WorkflowId = {_quoted(run_id)}")
        if wf.run_id != not_run_id and wf.id == run_id
    ]
    if latest is None or not others:
        before = " before this one" if latest is not None else ""
        raise InvalidForkError(
            f"no run {run_id!r}{before} in namespace {client.namespace!r}: give the workflow "
            f"id of a TeamRun ({hint})"
        )
    return max(others, key=lambda wf: wf.start_time).run_id


def _quoted(value: str) -> str:
    """``value`` as a string literal of a Temporal visibility query."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


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


async def closed_result(converter: DataConverter, last: HistoryEvent) -> TeamRunResult | None:
    """The result a ``TeamRun``'s last event holds: its completion's, or the
    one a run that did not succeed ends Failed with; ``None`` for any other
    event (the run goes on, or ended without one)."""
    if last.HasField("workflow_execution_completed_event_attributes"):
        payloads = last.workflow_execution_completed_event_attributes.result.payloads
        values = await converter.decode(payloads)
        return TeamRunResult.model_validate(values[0]) if values else None
    if last.HasField("workflow_execution_failed_event_attributes"):
        failure = last.workflow_execution_failed_event_attributes.failure
        return team_run_result_of(await converter.decode_failure(failure))
    return None


async def _edge_event(client: Client, execution: WorkflowExecution, *, first: bool) -> HistoryEvent:
    """The first (or last) event of ``execution`` (no run id: the workflow id's latest)."""
    service = client.workflow_service
    if first:
        request = GetWorkflowExecutionHistoryRequest(
            namespace=client.namespace, execution=execution, maximum_page_size=1
        )
        return (await service.get_workflow_execution_history(request)).history.events[0]
    reverse = GetWorkflowExecutionHistoryReverseRequest(
        namespace=client.namespace, execution=execution, maximum_page_size=1
    )
    return (await service.get_workflow_execution_history_reverse(reverse)).history.events[0]


async def _read_back(client: Client, forked: ForkedRun) -> None:
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
            child = client.get_workflow_handle(
                state.output_ref, run_id=state.output_run_id, result_type=AgentRunResult
            )
            try:
                result: AgentRunResult = await child.result()
            except (RPCError, WorkflowFailureError) as err:
                logger.warning("kept output %s not read: %s", state.output_ref, err)
                return
            state.output, state.output_ref, state.output_bytes = result.output, None, None

    await asyncio.gather(*(one(s) for s in wanted))
