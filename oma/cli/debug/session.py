"""One probed replay of a debugged history (``oma.worker.replay_probe``), up
to a point or whole."""

from __future__ import annotations

from temporalio.client import WorkflowHistory
from temporalio.worker import WorkflowReplayResult

from oma.cli.debug.history import Debugged, cut
from oma.core.contracts.encoding import ENCRYPTED_ENCODING
from oma.runtime.connection import Connection
from oma.runtime.payload_store import REFERENCE_TYPE
from oma.worker.replay_probe import ReplayProbe, probe_replayer


def payload_marks(history: WorkflowHistory) -> tuple[bool, bool]:
    """``(encrypted, stored)``: whether any payload of ``history`` is
    encrypted (``oma.runtime.codec``) or may be (a reference to a stored
    payload), and whether any is such a reference
    (``oma.runtime.payload_store``). Only then does the replay decrypt, or
    read the store: a run recorded before encryption was turned on holds
    plaintext, which a codec would refuse, and a history with no reference
    replays without the SDK's External Storage, whose visit of every
    payload costs a third of a large replay."""
    encrypted = False
    for event in history.events:
        data = event.SerializeToString()
        if REFERENCE_TYPE in data:
            return True, True
        encrypted = encrypted or ENCRYPTED_ENCODING in data
    return encrypted, False


async def replay(
    debugged: Debugged,
    probe: ReplayProbe,
    upto: int | None = None,
    *,
    debug_mode: bool = False,
) -> WorkflowReplayResult:
    """Replay ``debugged``'s history (cut after event ``upto``, a
    ``WorkflowTaskStarted``, when given) with ``probe`` looking in. A mismatch
    is in the result (``replay_failure``), not raised."""
    history = debugged.history if upto is None else cut(debugged.history, upto)
    encrypted, stored = payload_marks(history)
    store = Connection.from_env().store if stored else None
    replayer = probe_replayer(probe, debug_mode=debug_mode, codec=encrypted, payload_store=store)
    return await replayer.replay_workflow(history, raise_on_replay_failure=False)
