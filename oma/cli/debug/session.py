"""One probed replay of a debugged history (``oma.runtime.replay_probe``), up
to a point or whole."""

from __future__ import annotations

from temporalio.client import WorkflowHistory
from temporalio.worker import WorkflowReplayResult

from oma.cli.debug.history import Debugged, cut
from oma.runtime.codec import ENCRYPTED_ENCODING
from oma.runtime.connection import Connection
from oma.runtime.payload_store import REFERENCE_TYPE
from oma.runtime.replay_probe import ReplayProbe, probe_replayer


def encrypted(history: WorkflowHistory) -> bool:
    """Whether any payload of ``history`` is encrypted (``oma.runtime.codec``)
    or may be (a reference to a stored payload, ``oma.runtime.payload_store``):
    only then does the replay decrypt. A run recorded before encryption was
    turned on holds plaintext, which a codec would refuse."""
    marks = (ENCRYPTED_ENCODING, REFERENCE_TYPE)
    return any(m in event.SerializeToString() for event in history.events for m in marks)


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
    store = Connection.from_env().store
    replayer = probe_replayer(
        probe, debug_mode=debug_mode, codec=encrypted(history), payload_store=store
    )
    return await replayer.replay_workflow(history, raise_on_replay_failure=False)
