"""How a team run ends: its result's status, success and error, from its stop
and its tasks. Pure: no I/O, no Temporal."""

from __future__ import annotations

from oma.core.rules.team_run_state import RunStop
from oma.core.schema.results import TeamRunResult, TeamRunStatus


def settle_outcome(
    result: TeamRunResult,
    stop: RunStop,
    any_failed: bool,
    status: TeamRunStatus | None = None,
) -> TeamRunStatus:
    """Set ``result``'s ``status`` and ``success`` (and, for a run that
    stopped early, its ``error`` and ``error_code``); returns the status.

    A stop (abort, rejection, budget, timeout, a state too large) decides
    (``RunStop.outcome``); else ``status`` when given (``planned``); else
    ``failed`` when a task failed (``any_failed``) or the synthesis left an
    ``error_code`` on the result, ``completed`` otherwise. ``success``: the
    run ``completed`` or ``planned``.
    """
    if (outcome := stop.outcome()) is not None:
        status, result.error_code = outcome
        result.error = stop.reason
    elif status is None:
        status = "failed" if any_failed or result.error_code else "completed"
    result.status = status
    result.success = status in ("completed", "planned")
    return status
