"""Exported histories (``temporal workflow show --output json``) read from
files: the one loader ``oma replay``, ``oma show --history``, ``oma fork
--history`` and the run viewer use."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from temporalio.client import WorkflowHistory

from oma.core.contracts.workflow_ids import team_run_id_of
from oma.core.schema.errors import HistoryReadError


def read_history_file(path: Path, workflow_id: str | None = None) -> WorkflowHistory:
    """The exported history at ``path``. Its workflow id: ``workflow_id``,
    else the one its start event records, else read back from a
    ``TeamRun``'s children (``<id>/<task id>``: ``children_parent``), else
    the file's stem. Raises ``HistoryReadError`` for a file that cannot be
    read or is not a history whose first event is ``WorkflowExecutionStarted``."""
    try:
        raw = json.loads(path.read_text())
        if not isinstance(raw, dict) or not raw.get("events"):
            raise ValueError("expected an object with a non-empty 'events' list")
        history = WorkflowHistory.from_json(path.stem, raw)
        if not history.events[0].HasField("workflow_execution_started_event_attributes"):
            raise ValueError("its first event is not WorkflowExecutionStarted")
    except OSError as e:
        raise HistoryReadError(f"cannot read {path}: {e.strerror}") from None
    except (ValueError, KeyError, TypeError, RecursionError, json_format.ParseError) as e:
        raise HistoryReadError(f"{path} is not a workflow history in JSON: {e}") from None
    wid = workflow_id or recorded_workflow_id(history) or path.stem
    return WorkflowHistory(wid, history.events)


def read_history_files(paths: Iterable[Path]) -> list[WorkflowHistory]:
    """The exported histories at ``paths``, in order: each path a file, or a
    directory whose ``*.json`` files are read (sorted by name); each as
    ``read_history_file`` reads it. Raises ``HistoryReadError``, also when
    there is no file at all."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    if not files:
        raise HistoryReadError("no history files given (a directory with no *.json file?)")
    return [read_history_file(file) for file in files]


def started(history: WorkflowHistory) -> Any:
    """The ``WorkflowExecutionStarted`` attributes of ``history``'s first
    event; raises ``HistoryReadError`` when it is another event."""
    first = history.events[0]
    if not first.HasField("workflow_execution_started_event_attributes"):
        raise HistoryReadError("its first event is not WorkflowExecutionStarted")
    return first.workflow_execution_started_event_attributes


def recorded_workflow_id(history: WorkflowHistory) -> str | None:
    """The workflow id ``history`` records: its start event's (a server that
    records it there), else the ``TeamRun``'s its children's ids are made
    from (``children_parent``); ``None`` when it says neither. (An exported
    history does not carry it otherwise.)"""
    return started(history).workflow_id or children_parent(history)


def children_parent(history: WorkflowHistory) -> str | None:
    """The ``TeamRun`` workflow id ``history``'s children's ids are made from
    (``<id>/<task id>``, ``<id>/coordinator/<step>``), or ``None``."""
    for event in history.events:
        if event.HasField("start_child_workflow_execution_initiated_event_attributes"):
            wid = event.start_child_workflow_execution_initiated_event_attributes.workflow_id
            if parent := team_run_id_of(wid):
                return parent
    return None
