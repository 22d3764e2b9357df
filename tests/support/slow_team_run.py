"""A ``TeamRun`` whose every attempt holds its workflow task's thread 2.5 s
(past the SDK's 2 s deadlock timeout), for ``oma replay --debug``'s test:
imported, it changes what the code does in time only, not its commands."""

from __future__ import annotations

import time
from typing import Any

from oma.workflows.team_run import TeamRun

_original = TeamRun._attempt
HELD_S = 2.5


async def _attempt(self: TeamRun, *args: Any) -> Any:
    time.sleep(HELD_S)
    return await _original(self, *args)


TeamRun._attempt = _attempt  # type: ignore[method-assign]
