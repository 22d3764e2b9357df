"""``oma replay RUN --debug [--break-at POINT]``: the replay as a debugging
session.

The SDK's debug mode (``Replayer(debug_mode=True)``, temporalio 1.35:
``temporalio/worker/_workflow.py``) runs each workflow task on the main
thread with no deadlock timeout (a worker would fail a task that does not
yield within 2 s), lets ``breakpoint()`` through the sandbox and gives it a
``pdb`` that works there; an IDE's breakpoints in ``oma/workflows/`` hold the
replay as long as they like (the sandbox passes ``oma`` through, so the
files are the ones on disk). ``--break-at`` (an event id or a name, as
``--at``) stops in ``pdb`` at the first line of workflow code the workflow
task of that point runs (``oma.worker.replay_probe.WorkflowPdb``).
"""

from __future__ import annotations

from oma.cli.common import console, run_async, run_text
from oma.cli.debug.history import Debugged, resolve
from oma.cli.debug.session import replay
from oma.core.schema.errors import ReplayMismatchError
from oma.worker.replay_probe import ReplayProbe, pdb_stop


def debug_replay(debugged: Debugged, break_at: str | None) -> None:
    """Replay ``debugged`` in debug mode, stopping at ``break_at`` if given.
    Raises ``ReplayTargetError`` for an unknown point, ``ReplayMismatchError``
    when the code no longer replays the history."""
    stops = [resolve(debugged, break_at).workflow_task] if break_at else []
    probe = ReplayProbe(stop_at=stops, on_stop=pdb_stop if stops else None)
    result = run_async(replay(debugged, probe, debug_mode=True))
    if result.replay_failure is not None:
        raise ReplayMismatchError(
            f"{debugged.source} no longer replays against the current workflow code: "
            f"{result.replay_failure} (`oma replay` without --debug says why)"
        )
    console.print(
        run_text(
            f"{debugged.source}: replayed {len(debugged.history.events)} events in debug mode "
            f"({len(probe.activations)} workflow tasks), no mismatch"
        )
    )
