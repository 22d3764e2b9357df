"""``oma replay``'s debugging modes: ``--at``, ``--trace``, ``--debug`` and
``--break-at``, ``--ide``; and why a replay broke (docs/debugging.md).

Imported by ``oma.cli.app`` only when ``oma replay`` runs one of them, or
finds a mismatch.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode

from oma.cli.common import connection, console, fail, run_async, run_text
from oma.cli.debug.history import Debugged, read_file, resolve
from oma.core.schema.errors import OMAError
from oma.records.histories import history_of
from oma.runtime.dev_server import is_listening


@dataclass(frozen=True)
class ReplayAsked:
    """What ``oma replay`` was asked: the run (a history file, or a workflow
    id on the server, ``temporal_run_id`` its execution: ``--run-id``) and the
    mode."""

    run: str | None
    workflow_id: str | None = None
    temporal_run_id: str | None = None
    at: str | None = None
    as_json: bool = False
    trace: bool = False
    debug: bool = False
    break_at: str | None = None
    ide: bool = False

    @property
    def debugging(self) -> bool:
        """Whether a debugging mode was asked (else: the determinism check)."""
        return bool(self.at or self.trace or self.debug or self.break_at or self.ide)


def replay_debug(asked: ReplayAsked) -> None:
    """Run the mode ``asked`` names. Exits 1 with one line on an ``OMAError``
    (an unknown ``--at``, a history that cannot be read, a mismatch before
    the point asked), 2 on options that do not go together."""
    if sum(bool(x) for x in (asked.at, asked.trace, asked.debug or asked.break_at, asked.ide)) > 1:
        raise fail("give one of --at, --trace, --debug/--break-at, --ide", 2)
    if asked.as_json and not (asked.at or asked.trace):
        raise fail("--json goes with --at or --trace", 2)
    if asked.break_at and not asked.debug:
        raise fail("--break-at goes with --debug", 2)
    if asked.run is None and not asked.ide:
        raise fail("give a history file or a workflow id (RUN_OR_FILE)", 2)
    try:
        if asked.ide:
            from oma.cli.debug.ide import serve_ide

            run_async(serve_ide(asked.workflow_id))
            return
        debugged = run_async(load(asked))
        if asked.at is not None:
            _state(debugged, asked.at, asked.as_json)
        elif not asked.debugging:
            _check(debugged)
        elif asked.trace:
            from oma.cli.debug.trace import print_trace

            print_trace(debugged, asked.as_json)
        else:
            from oma.cli.debug.breaks import debug_replay

            debug_replay(debugged, asked.break_at)
    except OMAError as e:
        # exit 1 for all, the InputErrors of an unknown --at
        # (REPLAY_TARGET_UNKNOWN) or an unreadable history too
        raise fail(str(e)) from None


def _check(debugged: Debugged) -> None:
    """The determinism check, of a history read from the server."""
    from oma.cli.debug.session import replay
    from oma.core.schema.errors import ReplayMismatchError
    from oma.worker.replay_probe import ReplayProbe

    result = run_async(replay(debugged, ReplayProbe(keep=False)))
    if result.replay_failure is not None:
        message = explain_mismatch(debugged.source, debugged.history, result.replay_failure)
        raise ReplayMismatchError(message)
    echo(f"{debugged.source}: replayed {len(debugged.history.events)} events, no mismatch")


def _state(debugged: Debugged, at: str, as_json: bool) -> None:
    from oma.cli.debug.state import print_state, state_at

    found = run_async(state_at(debugged, resolve(debugged, at)))
    if as_json:
        print(json.dumps(found.as_json(), indent=2, default=str))
    else:
        print_state(found)


async def load(asked: ReplayAsked) -> Debugged:
    """The history ``asked.run`` names: a file when one exists at that path,
    else a workflow id on the server (``--run-id``: that execution, else its
    latest). Raises ``HistoryReadError``; exits 1 when the server cannot be
    reached or has no such workflow."""
    assert asked.run is not None
    path = Path(asked.run)
    if path.is_file():
        return read_file(path, asked.workflow_id)
    conn = connection()
    if not is_listening(conn.address):
        raise fail(
            f"{asked.run} is no file, and nothing listens on {conn.address} to ask for a "
            "workflow of that id: start `oma dev` (or point TEMPORAL_ADDRESS at the server "
            "that holds the run), or give an exported history"
        )
    client = await conn.connect()
    try:
        history = await history_of(client, asked.run, asked.temporal_run_id)
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise fail(f"no workflow {asked.run!r} in namespace {conn.namespace!r}") from None
        raise fail(f"cannot read the history of {asked.run!r}: {e}") from None
    return Debugged(history, f"workflow {asked.run}")


def explain_mismatch(source: Path | str, history: WorkflowHistory, failure: Exception) -> str:
    """``oma replay``'s message when ``history`` no longer replays: which
    event, what the history recorded against what the code did there, where
    in the workflow code, and the fix (``oma.cli.debug.why``)."""
    from oma.cli.debug.why import explain

    try:
        said: str = run_async(explain(Debugged(history, str(source)), failure))
        return said
    except Exception as err:  # the explanation is best effort: the mismatch stands
        print(f"(could not say more about the mismatch: {err})", file=sys.stderr)
        return f"{source} no longer replays against the current workflow code: {failure}"


def echo(text: str) -> None:
    """One line of run data on the terminal."""
    console.print(run_text(text))
