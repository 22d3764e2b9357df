"""An activity run as a worker runs it, without a server: in an
``ActivityEnvironment`` (of the activity's own type), behind the interceptor
that turns its ``OMAError`` into the failure Temporal records
(``oma.worker.activity_errors``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.testing import ActivityEnvironment
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from oma.worker.activity_errors import ActivityErrors


async def run_activity(
    fn: Callable[..., Any], *args: Any, env: ActivityEnvironment | None = None
) -> Any:
    """``fn(*args)`` as a worker would run it: its result, or the
    ``ApplicationError`` a worker would record for its ``OMAError``."""
    env = env or ActivityEnvironment()
    name = activity._Definition.must_from_callable(fn).name
    env.info = dataclasses.replace(env.info, activity_type=name)
    inbound = ActivityErrors().intercept_activity(_Call())
    call = ExecuteActivityInput(fn=fn, args=args, executor=None, headers={})
    return await env.run(inbound.execute_activity, call)


class _Call(ActivityInboundInterceptor):
    """The end of the chain: the activity itself (the SDK's own, on a worker)."""

    def __init__(self) -> None:
        pass

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        return await input.fn(*input.args)
