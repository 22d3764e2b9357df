"""Run an OMA worker: connect to Temporal and serve the ``oma`` task queue.

Environment: ``TEMPORAL_ADDRESS`` (default ``localhost:7233``),
``TEMPORAL_NAMESPACE`` (``default``), ``OMA_TASK_QUEUE`` (``oma``). Model
credentials (``ANTHROPIC_API_KEY``) are read here, by the activities, and
never travel in workflow input.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities.llm_turn import LlmActivities
from activities.process_run import process_run
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
    """The activity implementations a worker registers (built once per worker)."""

    llm: LlmActivities = field(default_factory=LlmActivities)

    def all(self) -> list[Any]:
        return [self.llm.llm_turn, process_run]


async def connect(settings: WorkerSettings) -> Client:
    """A client with the pydantic data converter, which every OMA payload uses."""
    return await Client.connect(
        settings.address, namespace=settings.namespace, data_converter=pydantic_data_converter
    )


def build_worker(
    client: Client, task_queue: str, activities: Activities | None = None, **kwargs: Any
) -> Worker:
    """A worker for ``task_queue`` serving every OMA workflow and activity."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=list(WORKFLOWS),
        activities=(activities or Activities()).all(),
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
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
