"""``oma replay``: histories replayed against the workflow code of this
process, with no side effect: an exported history (``oma replay FILE``), or
every open run on the server (``oma replay --open``), the check to run with
new code before it serves runs in flight (docs/operations.md).

Imported by ``oma.cli.app`` only when ``oma replay`` runs (it loads the
workflow code and the SDK's replayer).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table
from temporalio.client import Client, WorkflowExecution, WorkflowHistory
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError

from oma.cli.common import connection, console, err_console, fail, print_table, run_async, run_text
from oma.client.listing import OPEN_RUN_TYPES, open_runs
from oma.core.schema.errors import (
    CodecKeyMissingError,
    HistoryReadError,
    ReplayMismatchError,
)
from oma.records.histories import history_of
from oma.records.history_files import read_history_file
from oma.runtime.connection import Connection
from oma.worker import plugin

FETCHES_AT_ONCE = 8
"""How many histories ``oma replay --open`` fetches at once; it holds no more
than these (and the one being replayed) in memory."""

_VERSION = SearchAttributeKey.for_keyword("TemporalWorkerDeploymentVersion")
_BEHAVIOR = SearchAttributeKey.for_keyword("TemporalWorkflowVersioningBehavior")


# -- one exported history --------------------------------------------------


def replay_file(history: Path, workflow_id: str | None) -> None:
    """``oma replay HISTORY``: replay the history of ``temporal workflow show
    --output json``; exit 1 (``REPLAY_MISMATCH``, saying where and why:
    ``oma.cli.debug.command.explain_mismatch``) when the current code makes
    other commands than it recorded, 2 when it is not a history; 1 for a key
    ``OMA_CODEC_KEYS`` lacks or a bad configuration (its ``SetupError``)."""
    try:
        parsed = read_history_file(history, workflow_id)
    except HistoryReadError as e:
        raise fail(e.message, 2) from None
    check_codec_keys(parsed)
    # (a worker's codec reads plaintext too: a run recorded before
    # encryption was turned on replays with the keys set)
    replayer = plugin.replayer(payload_store=Connection.from_env().store)

    async def go() -> Any:
        return await replayer.replay_workflow(parsed, raise_on_replay_failure=False)

    result = run_async(go())
    if result.replay_failure is not None:
        from oma.cli.debug.command import explain_mismatch

        mismatch = ReplayMismatchError(explain_mismatch(history, parsed, result.replay_failure))
        raise fail(str(mismatch))
    console.print(f"{history}: replayed {len(parsed.events)} events, no mismatch")


def check_codec_keys(history: WorkflowHistory) -> None:
    """Raise ``CodecKeyMissingError`` when the history's input is encrypted with
    a key ``OMA_CODEC_KEYS`` does not hold: the replay would otherwise report a
    mismatch (the run failing on an unreadable input) instead of the cause."""
    from oma.runtime.codec import AesGcmCodec, keys_from_env, undecryptable_reason

    started = history.events[0].workflow_execution_started_event_attributes
    for payload in started.input.payloads:
        keys = keys_from_env()
        shown = AesGcmCodec(keys).decrypt(payload) if keys else payload
        reason = undecryptable_reason(shown)
        if reason is not None:
            raise CodecKeyMissingError(
                f"cannot replay: {reason}; set OMA_CODEC_KEYS (or OMA_CODEC_KEYS_FILE) "
                "to a list holding that key"
            )


# -- every open run --------------------------------------------------------


@dataclass
class OpenRun:
    """An open run ``oma replay --open`` checked, and what came of it:
    ``breaks`` (the replay failed: ``difference``, the first event that
    differs when the SDK names it, and ``error``), or ``unchecked`` (it could
    not be replayed here: ``error`` says why)."""

    execution: WorkflowExecution
    breaks: bool = False
    unchecked: bool = False
    difference: str = ""
    error: str = ""

    @property
    def versioning(self) -> str:
        """How the run moves between builds: ``pinned oma:v1`` (it stays on
        that build of deployment ``oma``), ``auto-upgrade oma:v1``, or
        ``unversioned`` (it goes on with whichever worker takes its next task)."""
        attributes = self.execution.typed_search_attributes
        version = attributes.get(_VERSION)
        if not version:
            return "unversioned"
        behavior = attributes.get(_BEHAVIOR) or ""
        shown = {"Pinned": "pinned", "AutoUpgrade": "auto-upgrade"}.get(behavior, behavior)
        return f"{shown} {version}".strip()


def replay_open(query: str | None, limit: int) -> None:
    """``oma replay --open``: fetch the history of every open ``TeamRun`` and
    ``AgentRun`` (and ``query``, ANDed; at most ``limit``), replay them with
    one replayer against this process's workflow code, and print the runs it
    would break, each with the first event that differs. Exits 0 when none
    breaks, 1 when one does or could not be replayed (a key
    ``OMA_CODEC_KEYS`` lacks, a run gone meanwhile), 2 for a refused query
    or limit (``open_runs``'s ``InputError``)."""
    replayer = plugin.replayer(payload_store=Connection.from_env().store)

    async def go() -> tuple[list[OpenRun], bool]:
        client = await connection().connect()
        executions, more = await open_runs(client, query=query, limit=limit)
        runs = [OpenRun(e) for e in executions]
        fetched: dict[int, OpenRun] = {}  # by the identity of the history fetched
        replaying = replayer.workflow_replay_iterator(_replayable(client, runs, fetched))
        async with replaying as results:
            async for result in results:
                if result.replay_failure is not None:
                    _judge(fetched[id(result.history)], result.replay_failure)
        return runs, more

    try:
        runs, more = run_async(go())
    except RPCError as e:
        raise fail(f"the server refused to list the open runs: {e.message}") from None
    _report(runs, more, query, limit)


async def _replayable(
    client: Client, runs: Sequence[OpenRun], fetched: dict[int, OpenRun]
) -> AsyncIterator[WorkflowHistory]:
    """The histories of ``runs``, ``FETCHES_AT_ONCE`` fetched at a time, each
    noted in ``fetched`` under its ``id``; a run whose history cannot be read
    (gone, or its input encrypted with a key this process lacks) is marked
    ``unchecked`` and left out."""
    for start in range(0, len(runs), FETCHES_AT_ONCE):
        batch = runs[start : start + FETCHES_AT_ONCE]
        histories = await asyncio.gather(
            *(history_of(client, r.execution.id, r.execution.run_id) for r in batch),
            return_exceptions=True,
        )
        for run, history in zip(batch, histories, strict=True):
            if isinstance(history, BaseException):
                if not isinstance(history, Exception):
                    raise history  # a cancel (Ctrl-C) ends the command
                run.unchecked = True
                run.error = f"its history could not be read: {_message(history)}"
                continue
            try:
                check_codec_keys(history)
            except CodecKeyMissingError as err:
                run.unchecked, run.error = True, err.message
                continue
            fetched[id(history)] = run
            yield history


_INNER_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')
_EVENT = re.compile(r"HistoryEvent\(id: (\d+), (\w+)")


def _judge(run: OpenRun, failure: Exception) -> None:
    """Mark ``run`` by its replay ``failure``: a key this process lacks leaves
    it unchecked (another worker may hold the key); anything else (a
    nondeterminism error, the code raising) breaks it."""
    text = _message(failure)
    if CodecKeyMissingError.code in text:
        run.unchecked, run.error = True, text
        return
    run.breaks, run.error = True, text
    event = _EVENT.search(text)
    run.difference = f"event {event[1]} {event[2]}" if event else "-"


def _message(err: BaseException) -> str:
    """The failure's own message: the SDK wraps a nondeterminism error's in a
    dump of the workflow task's completion."""
    text = str(err)
    inner = _INNER_MESSAGE.search(text)
    return inner[1].replace('\\"', '"') if inner else text


def _report(runs: list[OpenRun], more: bool, query: str | None, limit: int) -> None:
    broken = [r for r in runs if r.breaks]
    unchecked = [r for r in runs if r.unchecked]
    kinds = " and ".join(OPEN_RUN_TYPES)
    matching = f" matching {query!r}" if query else ""
    if broken:
        table = Table(title=run_text("open runs this code would break"), box=box.SIMPLE)
        table.add_column("workflow id", overflow="fold")
        table.add_column("run id", no_wrap=True)
        table.add_column("type", no_wrap=True)
        table.add_column("versioning", overflow="fold")
        table.add_column("first difference", overflow="fold")
        table.add_column("error", overflow="fold")
        for r in broken:
            table.add_row(
                run_text(r.execution.id),
                run_text(r.execution.run_id or ""),
                run_text(r.execution.workflow_type),
                run_text(r.versioning),
                run_text(r.difference),
                run_text(r.error),
            )
        print_table(table)
        console.print(
            run_text(
                "why each breaks, and the patch to add: oma replay WORKFLOW_ID --run-id RUN_ID "
                "(docs/debugging.md)"
            )
        )
    for r in unchecked:
        which = f"{r.execution.id} (run {r.execution.run_id})"
        err_console.print(run_text(f"warning: {which} not replayed: {r.error}"))
    checked = len(runs) - len(unchecked)
    console.print(
        run_text(
            f"replayed {checked} open {kinds} run(s){matching} against this code: "
            f"{len(broken)} would break"
        )
    )
    if more:
        console.print(
            run_text(
                f"stopped at --limit {limit}: more open runs match; narrow --query or raise --limit"
            )
        )
    if broken:
        raise fail(
            str(
                ReplayMismatchError(
                    f"{len(broken)} of {checked} open run(s) no longer replay against this code: "
                    "a worker of this code would fail their next workflow task (docs/operations.md)"
                )
            )
        )
    if unchecked:
        raise fail(f"{len(unchecked)} open run(s) could not be replayed: see the warnings above")
