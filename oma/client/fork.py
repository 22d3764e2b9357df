"""Forks from the client side: checking one before it starts, starting it with
its search attributes, and reading a source run out of an exported history.

A fork is a ``TeamRun`` whose input is a ``ForkInput`` (docs/fork.md): the
run reads its source itself (the ``read_fork_source`` activity). The client
makes the same fork first (``preview``), without reading any output back,
so that a mistake (an unknown task, a missing agent) is reported before
anything starts and the warnings are shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle
from temporalio.converter import DataConverter

from oma.client.runs import start_attributes, start_run
from oma.core.contracts.fork import ForkedRun
from oma.core.contracts.names import WorkflowName
from oma.core.schema.errors import HistoryReadError, InvalidForkError
from oma.core.schema.fork import ForkInput, ForkSource, is_fork_input
from oma.core.schema.limits import check_child_ids, json_size, state_budget
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import TeamRunInput, parse_team_run_input
from oma.core.schema.validation import UndecodableInput
from oma.records.executions import latest_execution
from oma.records.fork_source import ForkReads, fitted, fork_of, forked_input_of, reuse_of
from oma.records.history_files import read_history_file, started
from oma.records.results import closed_result
from oma.runtime.client_plugin import stores_payloads


async def preview(client: Client, fork: ForkInput, workflow_id: str) -> ForkedRun:
    """What the fork ``workflow_id`` keeps and runs again, as its run will
    make it (``oma.records.fork_source.fork_of``, no output read back).
    Raises ``InvalidForkError``, the run input's errors, and
    ``RunStateTooLargeError`` for a fork whose state its run could not carry
    (``fitted``): before anything starts."""
    stored = stores_payloads(client)
    forked = await fork_of(client, fork, workflow_id, read_outputs=False, stored=stored)
    fitted(forked, workflow_id, stored=stored)
    return forked


def forked_input(forked: ForkedRun) -> TeamRunInput:
    """The ``TeamRunInput`` the fork goes on with (``resume`` included, when it has one)."""
    return parse_team_run_input(forked.input).model_copy(update={"resume": forked.resume})


async def reuse_preview(client: Client, payload: dict[str, Any], workflow_id: str) -> ForkedRun:
    """What the run ``workflow_id`` of ``payload`` (with ``options.reuse``)
    keeps of its reference run and runs, and why, as its run will make it (no
    output read back). Raises ``InvalidForkError``, the run input's errors and
    ``RunStateTooLargeError`` (as ``preview``)."""
    stored = stores_payloads(client)
    forked = await reuse_of(client, payload, workflow_id, read_outputs=False, stored=stored)
    fitted(forked, workflow_id, stored=stored)
    return forked


async def start_fork(
    client: Client,
    fork: ForkInput,
    *,
    id: str,
    task_queue: str,
    team: str | None = None,
    memo: Mapping[str, Any] | None = None,
) -> WorkflowHandle[Any, TeamRunResult]:
    """Start the fork ``id`` of ``fork`` (its input as given: ``ForkInput.payload``)
    on ``task_queue``, with ``OmaStatus=running``, ``OmaTeam`` ``team`` and
    ``OmaForkedFrom`` (``oma.client.runs.start_run``: without them on a
    namespace that lacks one) and ``memo`` (Temporal's memo). A fork that
    takes its source's workflow id (a new execution of it) reads the
    execution that is the latest now (``oma.records.executions.latest_execution``):
    its ``temporal_run_id`` is set to it, unless given, so that the fork does
    not read itself. Raises ``InvalidRunInputError`` for a workflow id too
    long for the fork's tasks, ``InvalidForkError`` for a source given
    inline that makes the input too large, or under its source's workflow
    id when there is no such run; the SDK's errors."""
    check_child_ids(id, ())
    budget = state_budget(stores_payloads(client))
    if fork.fork.source is not None and (size := json_size(fork.payload())) > budget:
        raise InvalidForkError(
            f"the fork's input with its source inline (--history) is {size} bytes of JSON, "
            f"over the {budget} bytes a run's input may take: fork it by its "
            "workflow id on a server that has it (oma fork RUN_ID), where its outputs are read "
            "by reference"
        )
    spec = fork.fork
    if id == spec.run_id and spec.source is None and spec.temporal_run_id is None:
        latest = await latest_execution(client, id, hint=_HINT)
        fork = fork.model_copy(update={"fork": spec.model_copy(update={"temporal_run_id": latest})})
    attributes = start_attributes(team=team, forked_from=fork.fork.run_id)
    return await start_run(
        client,
        WorkflowName.TEAM_RUN,
        fork.payload(),
        id=id,
        task_queue=task_queue,
        result_type=TeamRunResult,
        search_attributes=attributes,
        memo=memo,
    )


_HINT = "oma fork --history FILE forks an exported history"
"""What an unknown source's error says to give instead."""


async def history_source(path: Path, converter: DataConverter) -> tuple[str, ForkSource]:
    """The ``TeamRun`` an exported history (``temporal workflow show --output
    json``) records, as a fork's inline source, and its workflow id (the one
    it records, ``oma.records.history_files.recorded_workflow_id``; else the
    file's stem). Its input is the one its start
    recorded; its result the one it ended with, the failure's details of a
    run that ended Failed, or the state it continued as new with (one run of
    a chain: export the last). Raises ``HistoryReadError``."""
    history = read_history_file(path)
    run_id = history.workflow_id
    begun = started(history)
    if begun.workflow_type.name != WorkflowName.TEAM_RUN:
        raise HistoryReadError(f"{path} is the history of a {begun.workflow_type.name}")
    inp = await _decoded(converter, begun.input.payloads, path, "input")
    if is_fork_input(inp):  # a fork's first run: the input it went on with
        reads, read = ForkReads(), None
        for event in history.events:
            if (read := reads.see(event)) is not None:
                break
        try:
            inp = await forked_input_of(converter, read, run_id)
        except InvalidForkError as err:
            raise HistoryReadError(f"{path}: {err.message}") from None
    result = await _result(converter, history.events[-1], inp, path)
    for state in result.tasks:  # what the input's tasks (or plan) say: not carried twice
        state.title, state.description, state.depends_on = "", "", []
    return run_id, ForkSource(input=inp, result=result)


async def _result(
    converter: DataConverter, last: HistoryEvent, inp: dict[str, Any], path: Path
) -> TeamRunResult:
    try:
        found = await closed_result(converter, last)
    except Exception as err:  # a codec that cannot decrypt, a broken payload
        raise HistoryReadError(f"cannot read the run's result in {path}: {err}") from None
    if found is not None:
        return found
    if last.HasField("workflow_execution_continued_as_new_event_attributes"):
        payloads = last.workflow_execution_continued_as_new_event_attributes.input.payloads
        inp = await _decoded(converter, payloads, path, "next run's input")
    resume = inp.get("resume")
    if isinstance(resume, dict) and isinstance(resume.get("result"), dict):
        return TeamRunResult.model_validate(resume["result"])
    raise HistoryReadError(
        f"{path} ends without the run's result or state (it failed before any task ran, or "
        "is still running): export the history of a run that ran its tasks"
    )


async def _decoded(converter: DataConverter, payloads: Any, path: Path, what: str) -> Any:
    try:
        values = await converter.decode(payloads)
    except Exception as err:  # a codec that cannot decrypt, a broken payload
        raise HistoryReadError(f"cannot read the run's {what} in {path}: {err}") from None
    if len(values) != 1 or isinstance(values[0], UndecodableInput):
        raise HistoryReadError(f"cannot read the run's {what} in {path}")
    return values[0]
