"""Worker-pinned resources: what outlives an activity, on the worker that opened it.

An ACP session (an agent subprocess) and an MCP server (a stdio subprocess,
or an HTTP server's session) hold state across the activities of one run,
while activities are stateless (docs/external-agents.md, "Sessions on
Temporal"). So:

- the worker that opens one keeps it in a ``PinnedPool``, keyed by the run
  (``"<workflow id>/<Temporal run id>"``) and what names it in that run;
- the activities that use it return this worker's own task queue, and the
  workflow routes the run's later activities there, or to any worker when
  nothing picks them up there in time (that worker is gone; the workflow
  side is ``oma.workflows._pinned``);
- the run closes them when it ends (``acp_close_run``, ``mcp_close_run``:
  ``PinnedPool.close_run``), the reaper (``reap_forever``) closes those of
  runs that ended without running more code, and a stopping worker closes
  all of them (``PinnedPool.close_all``).
"""

from oma.activities.pinned.pool import PinKey, Pinned, PinnedPool
from oma.activities.pinned.reaper import (
    REAP_INTERVAL_S,
    reap_closed_runs,
    reap_forever,
    run_is_open,
)

__all__ = [
    "REAP_INTERVAL_S",
    "PinKey",
    "Pinned",
    "PinnedPool",
    "reap_closed_runs",
    "reap_forever",
    "run_is_open",
]
