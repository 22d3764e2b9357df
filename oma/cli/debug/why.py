"""Why a replay broke, in the team's words: which event, what the history
recorded there against what the code did instead, the line of workflow code
that issued it, and the fix docs/architecture.md prescribes (the change under
``_patches.patched``, with a new id declared in ``oma/workflows/_patches.py``).

The SDK's nondeterminism error names the history event it could not match
(``HistoryEvent(id: 5, StartChildWorkflowExecutionInitiated)``); a replay
with a probe (``oma.worker.replay_probe``) gives the commands the code
issued at that workflow task, and where (the SDK's interceptors see
activities, child workflows and signals; a timer, a patch marker or a search
attribute upsert is named without a line). Without an event in the error,
the first workflow task whose commands differ from the history's is the one.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from temporalio.api.history.v1 import HistoryEvent

from oma.cli.debug import words
from oma.cli.debug.history import Debugged, workflow_task_of
from oma.cli.debug.session import replay
from oma.worker.replay_probe import Activation, Origin, ReplayProbe

_EVENT_IN_ERROR = re.compile(r"HistoryEvent\(id: (\d+)")
PATCHES_FILE = "oma/workflows/_patches.py"


async def explain(debugged: Debugged, failure: BaseException) -> str:
    """The message for ``failure``, a mismatch of ``debugged``'s replay."""
    probe = ReplayProbe(origins=True)
    result = await replay(debugged, probe)
    failure = result.replay_failure or failure
    found = _EVENT_IN_ERROR.search(str(failure))
    history = debugged.history
    event_id = int(found.group(1)) if found else _first_difference(debugged, probe)
    lines = [f"{debugged.source} no longer replays against the current workflow code."]
    origin: Origin | None = None
    if event_id and 1 <= event_id <= len(history.events):
        task = workflow_task_of(history, event_id)
        activation = _activation(probe, task)
        event = history.events[event_id - 1]
        lines.append(
            f"At event {event_id} (the workflow task of event {task}) the history recorded: "
            f"{words.recorded(event, debugged.workflow_id)}."
        )
        command, origin = _code_did(history, event, activation, debugged.workflow_id)
        lines.append(f"The code instead: {command}.")
        if origin is not None:
            lines.append(f"Issued at {_shown(origin)}: {origin.code}")
        elif activation is not None and activation.commands:
            lines.append(
                "(the SDK's interceptors see where activities, child workflows and signals are "
                "issued, not timers, patch markers or search attributes: look for workflow.sleep, "
                "wait_condition, patched or upsert_search_attributes there)"
            )
    lines.append(_fix(origin))
    lines.append(f"(Temporal said: {failure})")
    return "\n".join(lines)


def _shown(origin: Origin) -> str:
    """``file:line in function``, the file relative to the working directory
    when it is under it."""
    path = Path(origin.file)
    with contextlib.suppress(ValueError):
        path = path.relative_to(Path.cwd())
    return f"{path}:{origin.line} in {origin.function}"


def _activation(probe: ReplayProbe, history_length: int) -> Activation | None:
    found = [a for a in probe.activations if a.history_length == history_length]
    return found[-1] if found else None


def _recorded_commands(history: Any, event: HistoryEvent) -> list[HistoryEvent]:
    """The command events recorded with the same workflow task completion as
    ``event``, in order."""
    completed = _completed_id(event)
    return [e for e in history.events if completed and _completed_id(e) == completed]


def _completed_id(event: HistoryEvent) -> int:
    which = event.WhichOneof("attributes")
    attrs = getattr(event, which) if which else None
    return int(getattr(attrs, "workflow_task_completed_event_id", 0) or 0)


def _decisions(activation: Activation) -> list[Any]:
    return [
        c
        for c in activation.commands
        if c.WhichOneof("variant") not in ("respond_to_query", "update_response")
    ]


def _code_did(
    history: Any, event: HistoryEvent, activation: Activation | None, wid: str
) -> tuple[str, Origin | None]:
    """What the code issued in the place of ``event`` (the command at the
    same index of the workflow task's commands), and where."""
    if activation is None:
        return "never reached that workflow task (it failed or ended before it)", None
    recorded = _recorded_commands(history, event)
    index = next((i for i, e in enumerate(recorded) if e.event_id == event.event_id), None)
    issued = _decisions(activation)
    if index is None:
        # an event the code must answer (a child's start, a result): the
        # code had no command waiting for it
        said = [words.issued(c, wid) for c in issued]
        return "issued " + ("; ".join(s for s in said if s) or "nothing") + " at that task", None
    if index >= len(issued):
        said = [words.issued(c, wid) for c in issued]
        listed = "; ".join(s for s in said if s) or "nothing"
        return f"issued nothing in its place (the task issued: {listed})", None
    command = issued[index]
    return str(words.issued(command, wid)), _origin_of(activation, issued, index)


def _origin_of(activation: Activation, issued: list[Any], index: int) -> Origin | None:
    kind, key = _key(issued[index])
    same = sum(1 for c in issued[:index] if _key(c) == (kind, key))
    matches = [o for k, kk, o in activation.origins if (k, kk) == (kind, key)]
    return matches[same] if same < len(matches) else None


def _key(command: Any) -> tuple[str, str]:
    kind = command.WhichOneof("variant") or ""
    attrs = getattr(command, kind)
    if kind == "schedule_activity" or kind == "schedule_local_activity":
        return kind, attrs.activity_type
    if kind == "start_child_workflow_execution":
        return kind, attrs.workflow_id
    if kind == "signal_external_workflow_execution":
        return kind, attrs.signal_name
    return kind, ""


def _first_difference(debugged: Debugged, probe: ReplayProbe) -> int:
    """The first recorded command event that the code's commands at its
    workflow task do not match by kind, else 0."""
    history = debugged.history
    for activation in probe.activations:
        started = activation.history_length
        nxt = history.events[started] if started < len(history.events) else None
        if nxt is None or not nxt.HasField("workflow_task_completed_event_attributes"):
            continue
        recorded = [e for e in history.events if _completed_id(e) == nxt.event_id]
        issued = _decisions(activation)
        for i, event in enumerate(recorded):
            said = words.recorded(event, debugged.workflow_id)
            if i >= len(issued) or words.issued(issued[i], debugged.workflow_id) != said:
                return int(event.event_id)
    return 0


def _fix(origin: Origin | None) -> str:
    last, suggested = _patch_ids(origin)
    return (
        "Fix (docs/architecture.md): keep what old runs did for the runs already recorded: "
        f"put the change under `if _patches.patched(_patches.{suggested[0]}):` (the new code) "
        "with the old code in its `else`, and declare the next patch id, "
        f'`{suggested[0]} = "{suggested[1]}"`, in {PATCHES_FILE} below {last} '
        "(the last one), outside _ON_WITH_ONE_MARKER_2; then "
        "tests/workflows/test_histories.py replays the corpus again."
    )


def _patch_ids(origin: Origin | None) -> tuple[str, tuple[str, str]]:
    """The last patch id declared in ``oma/workflows/_patches.py`` and a name for
    the next one, after the function that issued the changed command."""
    from oma.workflows import _patches

    declared = [
        name
        for name, value in vars(_patches).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, str)
    ]
    last = declared[-1]
    stem = origin.function.strip("_").upper() if origin is not None else "CHANGED"
    name = f"{stem}_CHANGED" if not stem.endswith("CHANGED") else stem
    return last, (name, "oma-" + name.lower().replace("_", "-"))
