"""A deliberately changed ``TeamRun`` for ``oma replay``'s mismatch tests:
imported, it makes every task's attempt first ask an activity that no
recorded history holds, as an unpatched change of workflow code would."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

from oma.core.contracts.names import ActivityName
from oma.workflows.team_run import TeamRun

_original = TeamRun._attempt
_S = timedelta(seconds=5)
_UNRECORDED = ActivityName.REGISTERED_SEARCH_ATTRIBUTES


async def _attempt(self: TeamRun, *args: Any) -> Any:
    await workflow.execute_activity(_UNRECORDED, start_to_close_timeout=_S)
    return await _original(self, *args)


CHANGED_LINE = 21
"""The line of the changed command above."""

TeamRun._attempt = _attempt  # type: ignore[method-assign]
