"""Run an OMA worker: connect to Temporal and serve the ``oma`` task queue.

Environment: ``TEMPORAL_ADDRESS`` (default ``localhost:7233``),
``TEMPORAL_NAMESPACE`` (``default``), ``OMA_TASK_QUEUE`` (``oma``). Model
credentials (``ANTHROPIC_API_KEY``) are read here, by the activities, and
never travel in workflow input.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from types import TracebackType
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities.acp.pool import SessionPool
from activities.acp.reaper import reap_forever
from activities.acp_prompt import AcpActivities
from activities.llm_turn import LlmActivities
from activities.process_run import process_run
from activities.run_hooks import before_run, evaluate_run
from workflows.agent_run import AgentRun
from workflows.team_run import TeamRun

WORKFLOWS: Sequence[type] = (TeamRun, AgentRun)

HEARTBEAT_THROTTLE = timedelta(milliseconds=500)
"""Heartbeats reach the server at most this often, and at least this often when
an activity heartbeats faster, so a cancel reaches a running activity within
about a second (the SDK's default throttle is 30 s without a heartbeat timeout)."""


@dataclass(frozen=True)
class WorkerSettings:
    """Where the worker connects; read from the environment by ``from_env``."""

    address: str = "localhost:7233"
    namespace: str = "default"
    task_queue: str = "oma"

    @classmethod
    def from_env(cls) -> WorkerSettings:
        return cls(
            address=os.environ.get("TEMPORAL_ADDRESS", cls.address),
            namespace=os.environ.get("TEMPORAL_NAMESPACE", cls.namespace),
            task_queue=os.environ.get("OMA_TASK_QUEUE", cls.task_queue),
        )


@dataclass
class Activities:
    """The activity implementations a worker registers (built once per worker).

    ``acp_pool`` holds this worker's ACP sessions; ``session_task_queue`` is the
    task queue only this worker polls, where later turns of those sessions are
    routed (ARCHITECTURE.md, "ACP sessions across activities").
    """

    session_task_queue: str
    llm: LlmActivities = field(default_factory=LlmActivities)
    acp_pool: SessionPool = field(default_factory=SessionPool)

    def __post_init__(self) -> None:
        self.acp = AcpActivities(self.acp_pool, self.session_task_queue)

    def all(self) -> list[Any]:
        """Every activity, for the shared task queue."""
        return [
            self.llm.llm_turn,
            process_run,
            before_run,
            evaluate_run,
            *self.session_activities(),
        ]

    def session_activities(self) -> list[Any]:
        """The activities that must reach this worker's own sessions."""
        return [self.acp.acp_prompt, self.acp.acp_close_run]


def session_task_queue(task_queue: str) -> str:
    """A task queue name unique to this worker process."""
    return f"{task_queue}/{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


async def connect(settings: WorkerSettings) -> Client:
    """A client with the pydantic data converter, which every OMA payload uses."""
    return await Client.connect(
        settings.address, namespace=settings.namespace, data_converter=pydantic_data_converter
    )


class OmaWorker:
    """One OMA worker process: a Temporal worker on the shared ``task_queue``
    (every workflow and activity) and one on this process's own session task
    queue (the ACP activities only). While it runs, the sessions of runs that
    have ended are closed (``activities.acp.reaper``), however they ended; on
    the way out every ACP session this worker holds is closed. Use
    ``async with`` or ``run()``.
    """

    def __init__(self, client: Client, task_queue: str, activities: Activities, **kwargs: Any):
        self.client = client
        self.activities = activities
        common: dict[str, Any] = {
            "max_heartbeat_throttle_interval": HEARTBEAT_THROTTLE,
            "default_heartbeat_throttle_interval": HEARTBEAT_THROTTLE,
            **kwargs,
        }
        self.workers = [
            Worker(
                client,
                task_queue=task_queue,
                workflows=list(WORKFLOWS),
                activities=activities.all(),
                **common,
            ),
            Worker(
                client,
                task_queue=activities.session_task_queue,
                activities=activities.session_activities(),
                **common,
            ),
        ]
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> OmaWorker:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(self.activities.acp_pool.close_all)
            for w in self.workers:
                await stack.enter_async_context(w)
            reaper = asyncio.create_task(reap_forever(self.activities.acp_pool, self.client))
            stack.callback(reaper.cancel)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.__aexit__(exc_type, exc, tb)

    async def run(self) -> None:
        """Run until cancelled (e.g. Ctrl-C)."""
        async with self:
            await asyncio.Event().wait()


def build_worker(
    client: Client, task_queue: str, activities: Activities | None = None, **kwargs: Any
) -> OmaWorker:
    """An ``OmaWorker`` for ``task_queue`` serving every OMA workflow and activity."""
    return OmaWorker(
        client,
        task_queue,
        activities or Activities(session_task_queue=session_task_queue(task_queue)),
        **kwargs,
    )


async def main() -> None:
    settings = WorkerSettings.from_env()
    client = await connect(settings)
    worker = build_worker(client, settings.task_queue)
    print(
        f"OMA worker on task queue {settings.task_queue!r} at {settings.address} "
        f"(namespace {settings.namespace!r})",
        flush=True,
    )
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
