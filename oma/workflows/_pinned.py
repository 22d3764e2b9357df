"""Activities pinned to the worker that holds a run's resource: an ACP
session or an MCP server (the worker side is ``oma.activities.pinned``).

The activities that open or use such a resource return the task queue of
the worker holding it (``worker_task_queue``); the run sends its later
activities there (``on_owner``), and to any worker when nothing picks them
up there in time, since that worker is gone and took its resources with it.
When the run ends it closes them on every worker that held one
(``close_on_workers``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType
from temporalio.workflow import ActivityConfig

T = TypeVar("T")


async def on_owner(
    queue: str | None,
    routed: Callable[[str], Awaitable[T]],
    elsewhere: Callable[[], Awaitable[T]],
    gone: str,
) -> T:
    """``routed(queue)``, the activity on the owning worker's task queue; when
    that worker is gone (the activity timed out waiting to be picked up,
    ``schedule_to_start_timeout``) or there is none (``queue`` is ``None``),
    ``elsewhere()``. ``gone`` is the warning logged then, ``%s`` the queue.
    Any other failure propagates (``ActivityError``)."""
    if queue is not None:
        try:
            return await routed(queue)
        except ActivityError as err:
            if not never_started(err):
                raise
            workflow.logger.warning(gone, queue)
    return await elsewhere()


def never_started(err: ActivityError) -> bool:
    """Whether the activity timed out waiting for a worker to pick it up."""
    cause = err.cause
    return isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START


async def close_on_workers(
    queues: Iterable[str],
    activity: str,
    close_input: Any,
    result_type: type[Any],
    options: ActivityConfig,
    what: str,
) -> None:
    """Run ``activity`` (``acp_close_run``, ``mcp_close_run``) with
    ``close_input`` and ``options`` on each of ``queues``, in the order of
    their names. A worker that is gone took its resources with it, so its
    failure (a timeout) is not an error: a warning names ``what`` was not
    closed there."""
    for queue in sorted(queues):
        try:
            await workflow.execute_activity(
                activity, close_input, result_type=result_type, **(options | {"task_queue": queue})
            )
        except ActivityError as err:
            workflow.logger.warning("could not close %s on %s: %s", what, queue, err)
