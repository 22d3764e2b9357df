"""The worker's composition root: ``main`` connects to Temporal and serves
the task queue, ``build_worker`` builds the ``Worker`` with every workflow,
every activity (``Activities``) and ``OmaPlugin``. It alone (with the CLI,
the client, the in-process ``Agent`` and the dev server) imports everything;
``oma.worker`` names what it exports (docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig

from oma.activities.acp.pool import SessionPool
from oma.activities.acp_prompt import AcpActivities
from oma.activities.fork_source import read_fork_source
from oma.activities.llm_turn import LlmActivities
from oma.activities.mcp import McpServerPool
from oma.activities.mcp_tools import McpActivities
from oma.activities.pinned import PinnedPool, reap_forever
from oma.activities.process_run import process_run
from oma.activities.run_hooks import before_run, evaluate
from oma.activities.shard_plan import plan_shards
from oma.activities.task_outputs import read_task_outputs
from oma.activities.tool_call import ToolActivities
from oma.activities.visibility import VisibilityActivities
from oma.runtime.client_plugin import OmaClientPlugin
from oma.runtime.codec import keys_from_env
from oma.runtime.connection import Connection
from oma.runtime.credentials import CredentialPolicy
from oma.runtime.deployment import BUILD_ID_VAR, DEPLOYMENT_NAME_VAR, deployment_from_env
from oma.runtime.payload_store import store_from_env
from oma.worker.plugin import OmaPlugin


@dataclass
class Activities:
    """The activity implementations a worker registers (built once per worker).

    ``acp_pool`` holds this worker's ACP sessions, ``mcp_pool`` its runs'
    MCP servers; ``session_task_queue`` is the
    task queue only this worker polls, where later turns of those sessions are
    routed (docs/external-agents.md, "Sessions on Temporal").
    """

    session_task_queue: str
    llm: LlmActivities = field(default_factory=LlmActivities)
    acp_pool: SessionPool = field(default_factory=SessionPool)
    mcp_pool: McpServerPool = field(default_factory=McpServerPool)

    def __post_init__(self) -> None:
        # a malformed OMA_CREDENTIALS stops the worker here, before it serves
        # a run (CredentialsConfigError); the activities read it at each use
        CredentialPolicy.from_env()
        self.acp = AcpActivities(self.acp_pool, self.session_task_queue)
        self.tools = ToolActivities(self.mcp_pool, self.session_task_queue)
        self.mcp = McpActivities(self.mcp_pool, self.session_task_queue)
        self.visibility = VisibilityActivities()

    def pinned_pools(self) -> tuple[PinnedPool[Any], ...]:
        """The pools of what this worker holds across activities (its ACP
        sessions, its runs' MCP servers), closed by run and at shutdown."""
        return (self.acp_pool, self.mcp_pool)

    def all(self) -> list[Any]:
        """Every activity, for the shared task queue."""
        return [
            self.llm.llm_turn,
            process_run,
            before_run,
            evaluate,
            self.visibility.registered_search_attributes,
            read_task_outputs,
            read_fork_source,
            plan_shards,
            *self.session_activities(),
        ]

    def session_activities(self) -> list[Any]:
        """The activities that must reach this worker's own sessions."""
        return [
            self.acp.acp_prompt,
            self.acp.acp_close_run,
            self.tools.tool_call,
            self.mcp.mcp_list_tools,
            self.mcp.mcp_close_run,
        ]


def session_task_queue(task_queue: str) -> str:
    """A task queue name unique to this worker process."""
    return f"{task_queue}/{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class OmaWorker:
    """One OMA worker process: a Temporal worker on the shared ``task_queue``
    (every workflow and activity) and one on this process's own task queue
    (the activities that must reach its ACP sessions and MCP servers). While
    it runs, the sessions and servers of runs that have ended are closed
    however they ended (the reaper, ``oma.activities.pinned``); on the way
    out every one this worker holds is closed. Use ``async with`` or ``run()``.

    With ``deployment``, the worker on ``task_queue`` serves that Worker
    Deployment Version (Temporal's Worker Versioning: ``oma.runtime.deployment``);
    the one on this process's own queue stays unversioned: what is routed there
    must reach this process's sessions, whatever build the run that routes it
    is on.
    """

    def __init__(
        self,
        client: Client,
        task_queue: str,
        activities: Activities,
        *,
        deployment: WorkerDeploymentVersion | None = None,
        **kwargs: Any,
    ):
        self.client = client
        self.activities = activities
        self.deployment = deployment
        serving = serving_client(client, activities)
        self.workers = [
            Worker(
                serving,
                task_queue=task_queue,
                deployment_config=None if deployment is None else deployment_config(deployment),
                **kwargs,
            ),
            Worker(serving, task_queue=activities.session_task_queue, **kwargs),
        ]
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> OmaWorker:
        async with AsyncExitStack() as stack:
            pools = self.activities.pinned_pools()
            for pool in pools:
                stack.push_async_callback(pool.close_all)
            for w in self.workers:
                await stack.enter_async_context(w)
            for pool in pools:
                reaper = asyncio.create_task(reap_forever(pool, self.client))
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


def serving_client(client: Client, activities: Activities) -> Client:
    """``client`` (its connection, namespace and plugins) with
    ``OmaPlugin(activities)`` in place of its own ``OmaClientPlugin`` (or
    ``OmaPlugin``): a worker built
    on it serves OMA's workflows and these activities (the SDK takes a
    worker's plugins from its client, and warns when a worker repeats one).
    The worker keeps the client's encryption keys, payload store and tracing
    (``OmaClientPlugin.codec_keys``, ``.payload_store``, ``.tracing``)."""
    config = client.config()
    plugins = config.get("plugins", ())
    own = [p for p in plugins if isinstance(p, OmaClientPlugin)]
    others = [p for p in plugins if not isinstance(p, OmaClientPlugin)]
    keys = own[0].codec_keys if own else keys_from_env()
    store = own[0].payload_store if own else store_from_env()
    tracing: bool | Literal["env"] = own[0].tracing if own else "env"
    config["plugins"] = [
        *others,
        OmaPlugin(activities, codec_keys=keys, payload_store=store, tracing=tracing),
    ]
    return Client(**config)


def deployment_config(version: WorkerDeploymentVersion) -> WorkerDeploymentConfig:
    """A versioned worker's configuration: ``version``, its runs ``PINNED``.

    Pinned: a run finishes on the build it started on, its approvals waiting
    days on the code that asked for them, and a task's ``AgentRun`` runs on
    its team run's build; a ``TeamRun`` moves to the current build when it
    continues as new (``oma.workflows._continue``). The worker's default, not
    ``workflow.defn(versioning_behavior=...)``: an unversioned worker (SDK
    1.35, server 1.32) sends a workflow's declared behaviour with its
    continue-as-new, which the server refuses, and the run's workflow task
    fails for good."""
    return WorkerDeploymentConfig(
        version=version,
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


def build_worker(
    client: Client,
    task_queue: str,
    activities: Activities | None = None,
    *,
    deployment: WorkerDeploymentVersion | None = None,
    **kwargs: Any,
) -> OmaWorker:
    """An ``OmaWorker`` for ``task_queue`` serving every OMA workflow and
    activity; with ``deployment``, that Worker Deployment Version of them."""
    return OmaWorker(
        client,
        task_queue,
        activities or Activities(session_task_queue=session_task_queue(task_queue)),
        deployment=deployment,
        **kwargs,
    )


async def main(
    connection: Connection | None = None, deployment: WorkerDeploymentVersion | None = None
) -> None:
    """Connect (``Connection.from_env()`` by default) and serve until
    cancelled, as ``deployment`` (by default the version
    ``TEMPORAL_DEPLOYMENT_NAME`` and ``TEMPORAL_WORKER_BUILD_ID`` name, if
    any: ``oma.runtime.deployment``). Log lines go to stderr, an expected task
    failure as one line (``oma.runtime.logs``). Raises
    ``WorkerDeploymentInvalidError`` for a half-set or refused version."""
    from oma.runtime.logs import route_logs

    route_logs(None)
    connection = connection or Connection.from_env()
    deployment = deployment or deployment_from_env()
    client = await connection.connect()
    worker = build_worker(client, connection.task_queue, deployment=deployment)
    print(
        f"OMA worker on task queue {connection.task_queue!r} at {connection.address} "
        f"(namespace {connection.namespace!r})",
        flush=True,
    )
    if deployment is not None:
        name, build = deployment.deployment_name, deployment.build_id
        print(
            f"serving build {build!r} of worker deployment {name!r} "
            f"({DEPLOYMENT_NAME_VAR}, {BUILD_ID_VAR}): new runs start on it while it is the "
            f"deployment's current version (temporal worker deployment set-current-version "
            f"--deployment-name {name} --build-id {build})",
            flush=True,
        )
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
