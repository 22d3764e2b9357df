"""``oma replay --ide``: the replay the Temporal Workflow Replay Debugger
(the VS Code extension ``phuongdnguyen.temporal-workflow-replay-debugger``)
drives, in place of its Python adapter.

The extension holds the history and the event breakpoints a person set in its
panel, and serves them over HTTP at ``TEMPORAL_DEBUGGER_PLUGIN_URL`` (default
``http://localhost:54578``): ``GET /history`` (a ``temporal.api.history.v1.History``
protobuf; JSON is read too), ``GET /breakpoints`` (``{"breakpoints": [event
ids]}``), ``POST /current-event`` (``{"eventId": n}``: the event it highlights).
It launches the entry point it is configured with (``temporal.replayerEntryPoint``)
under debugpy. That entry point calls ``main`` here (docs/debugging.md).

Its own adapter (``temporal-replayer-adapter-python`` 1.0.3) replays with SDK
1.35's ``Replayer`` but cannot replay an OMA run: it registers one workflow
class, uses the SDK's default data converter (no pydantic models, no
decryption) and replays every history as workflow ``replayed-worker``, while
a ``TeamRun`` replays only under its own workflow id (its children's ids are
made from it). This is the same protocol over ``oma.worker.replay_probe``:
the product's converter and both workflows, the workflow id read back from
the history, the SDK's debug mode (one thread, no deadlock timeout), and a
stop before the workflow task of every event breakpoint (debugpy's
``breakpoint`` when the IDE launched it, else ``pdb`` in the workflow code).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from typing import Any

from google.protobuf.json_format import MessageToDict
from temporalio.api.history.v1 import History
from temporalio.client import WorkflowHistory

from oma.cli.debug.history import Debugged, workflow_task_of
from oma.cli.debug.session import replay
from oma.core.schema.errors import ReplayDebuggerError, ReplayMismatchError
from oma.records.history_files import recorded_workflow_id, started
from oma.worker.replay_probe import Activation, ReplayProbe, pdb_stop

PLUGIN_URL = "TEMPORAL_DEBUGGER_PLUGIN_URL"
DEFAULT_URL = "http://localhost:54578"
TIMEOUT_S = 5.0
"""How long one request to the extension may take."""


class Extension:
    """The extension's HTTP side, at ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _get(self, path: str) -> tuple[bytes, str]:
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=TIMEOUT_S) as answer:
                return answer.read(), answer.headers.get("Content-Type", "")
        except OSError as err:
            raise ReplayDebuggerError(
                f"the replay debugger at {self.url} does not answer GET {path}: {err} (load a "
                "history in its panel first; or set TEMPORAL_DEBUGGER_PLUGIN_URL)"
            ) from None

    def history(self, workflow_id: str | None) -> Debugged:
        """The history loaded in the extension's panel."""
        body, kind = self._get("/history")
        try:
            if "json" in kind or body.lstrip().startswith(b"{"):
                raw = json.loads(body)
            else:
                message = History()
                message.ParseFromString(body)
                raw = MessageToDict(message)
            history = WorkflowHistory.from_json("replayed", raw)
            started(history)  # a history that starts as one
        except Exception as err:
            raise ReplayDebuggerError(
                f"the replay debugger at {self.url} served no workflow history: {err}"
            ) from None
        wid = workflow_id or recorded_workflow_id(history) or "replayed"
        return Debugged(WorkflowHistory(wid, history.events), f"the history at {self.url}")

    def breakpoints(self) -> list[int]:
        """The event ids a person set breakpoints on (none when it does not say)."""
        try:
            body, _ = self._get("/breakpoints")
            ids = json.loads(body).get("breakpoints", [])
        except (ReplayDebuggerError, ValueError, AttributeError):
            return []
        return [int(i) for i in ids if isinstance(i, int)]

    def highlight(self, event_id: int) -> None:
        """Tell the extension which event the replay stopped at."""
        request = urllib.request.Request(
            f"{self.url}/current-event",
            data=json.dumps({"eventId": event_id}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S):
                pass
        except OSError as err:
            print(
                f"oma replay: the replay debugger did not take event {event_id}: {err}",
                file=sys.stderr,
            )


def _stop_in_ide(activation: Activation, workflow_modules: tuple[str, ...]) -> None:
    debugpy = sys.modules.get("debugpy")
    if debugpy is not None and debugpy.is_client_connected():
        # the IDE stops here, just before the workflow code handles the task:
        # step in, or continue to a breakpoint in oma/workflows/
        debugpy.breakpoint()
        return
    pdb_stop(activation, workflow_modules)


async def serve_ide(workflow_id: str | None = None) -> int:
    """Replay the extension's history, stopping at its event breakpoints.
    Returns the number of workflow tasks replayed. Raises
    ``ReplayDebuggerError`` when the extension does not answer,
    ``ReplayMismatchError`` when the code no longer replays the history."""
    extension = Extension(os.environ.get(PLUGIN_URL) or DEFAULT_URL)
    debugged = extension.history(workflow_id)
    history = debugged.history

    def should_stop(history_length: int) -> bool:
        hit = [
            b
            for b in sorted(extension.breakpoints())
            if 1 <= b <= len(history.events) and workflow_task_of(history, b) == history_length
        ]
        if hit:
            extension.highlight(hit[0])
        return bool(hit)

    probe = ReplayProbe(on_stop=_stop_in_ide, should_stop=should_stop)
    result = await replay(debugged, probe, debug_mode=True)
    if result.replay_failure is not None:
        raise ReplayMismatchError(
            f"{debugged.source} no longer replays against the current workflow code: "
            f"{result.replay_failure} (export it and run `oma replay FILE` to see why)"
        )
    print(f"oma replay: replayed {len(history.events)} events of {debugged.workflow_id}")
    return len(probe.activations)


def main(argv: list[str] | None = None) -> Any:
    """The entry point the extension launches (``temporal.replayerEntryPoint``:
    a file that calls this): ``oma replay --ide``."""
    from oma.cli.app import app

    return app(["replay", "--ide", *(argv or [])])
