"""The Python client: ``OpenMultiAgent`` starts agent and team runs on
Temporal and awaits their results.

By concern: ``api`` (``OpenMultiAgent``), ``runs`` (starting a run with its
search attributes, reading a ``TeamRun``'s result), ``listing`` (finding runs
and open requests through Temporal's visibility), ``approvals`` (the
``pending_approvals`` query, the ``decide`` update, the review by Python
callbacks), ``embedded`` (the configured connection, and the dev server and
in-process worker when no server listens), ``progress`` (a running task's
latest output) and ``run_file`` (a run input's file): the commands, ``oma
acp`` and the run viewer share what is here. The names below are imported
on first use (PEP 562), so ``from oma.client import serving`` loads only
what serving needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oma.client.api import OpenMultiAgent
    from oma.client.approvals import CALLBACK_REVIEWER_ID, POLL_INTERVAL_S, CallbackReview
    from oma.client.embedded import EMBEDDED_DB, serving
    from oma.client.listing import list_team_runs, open_approvals
    from oma.client.runs import (
        read_outputs,
        start_attributes,
        start_run,
        start_team_run,
        team_run_result,
    )
    from oma.records.outputs import OUTPUT_READS
    from oma.runtime.approval_callbacks import (
        ApprovalAnswer,
        ApprovalCallback,
        answer_decision,
        call_approval_callback,
    )

_MODULES: dict[str, tuple[str, ...]] = {
    "oma.client.api": ("OpenMultiAgent",),
    "oma.client.approvals": ("CALLBACK_REVIEWER_ID", "POLL_INTERVAL_S", "CallbackReview"),
    "oma.client.embedded": ("EMBEDDED_DB", "serving"),
    "oma.client.listing": ("list_team_runs", "open_approvals"),
    "oma.client.runs": (
        "read_outputs",
        "start_attributes",
        "start_run",
        "start_team_run",
        "team_run_result",
    ),
    "oma.records.outputs": ("OUTPUT_READS",),
    "oma.runtime.approval_callbacks": (
        "ApprovalAnswer",
        "ApprovalCallback",
        "answer_decision",
        "call_approval_callback",
    ),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "CALLBACK_REVIEWER_ID",
    "EMBEDDED_DB",
    "OUTPUT_READS",
    "POLL_INTERVAL_S",
    "ApprovalAnswer",
    "ApprovalCallback",
    "CallbackReview",
    "OpenMultiAgent",
    "answer_decision",
    "call_approval_callback",
    "list_team_runs",
    "open_approvals",
    "read_outputs",
    "serving",
    "start_attributes",
    "start_run",
    "start_team_run",
    "team_run_result",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'oma.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
