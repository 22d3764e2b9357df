"""The embedded dev server: one server per SQLite file, started again when it
exits as it starts."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from oma.core.schema.errors import TemporalUnavailableError
from oma.runtime.dev_server import SETTLE_S, DevServer, free_port, is_listening

pytestmark = pytest.mark.e2e


def test_a_second_server_on_the_same_database_is_refused_naming_the_first(
    tmp_path: Path,
) -> None:
    db = tmp_path / ".oma" / "temporal.db"
    with DevServer(port=free_port(), db_file=db) as first:
        second = DevServer(port=free_port(), db_file=db)
        with pytest.raises(TemporalUnavailableError) as info:
            second.start()
        assert first.address in info.value.message
        assert f"TEMPORAL_ADDRESS={first.address}" in info.value.message
        assert not is_listening(second.address)
    # the first one stopped: the file is free again
    with DevServer(port=free_port(), db_file=db) as third:
        assert is_listening(third.address)


def test_a_server_on_a_database_file_writes_through_the_write_ahead_log(
    tmp_path: Path,
) -> None:
    # SQLite's default rollback journal syncs the disk at every commit: a
    # run's tasks were twice as slow as with the write-ahead log
    db = tmp_path / "temporal.db"
    with DevServer(port=free_port(), db_file=db):
        assert db.with_name("temporal.db-wal").is_file()
    with sqlite3.connect(db) as kept:
        assert kept.execute("PRAGMA journal_mode").fetchone() == ("wal",)


class CrashingFirst(DevServer):
    """A dev server whose first spawn listens and exits at once, as the real
    one does when an internal service's port is taken as it binds it."""

    spawns = 0

    def command(self) -> list[str]:
        real = super().command()
        self.spawns += 1
        if self.spawns > 1:
            return real
        crash = (
            "import socket, sys, time\n"
            "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
            "time.sleep(0.1); sys.exit(2)\n"
        )
        return [sys.executable, "-c", crash, str(self.port)]


def test_a_server_that_exits_right_after_it_listened_is_started_again() -> None:
    with CrashingFirst(port=free_port()) as server:
        assert server.spawns == 2
        time.sleep(SETTLE_S)
        assert is_listening(server.address)


@workflow.defn(name="CacheProbeChild", sandboxed=False)
class CacheProbeChild:
    @workflow.run
    async def run(self, payload: str) -> int:
        return len(payload)


@workflow.defn(name="CacheProbeFanOut", sandboxed=False)
class CacheProbeFanOut:
    @workflow.run
    async def run(self, width: int) -> int:
        parent = workflow.info().workflow_id
        started = [
            workflow.execute_child_workflow(CacheProbeChild.run, "x" * 4096, id=f"{parent}/{i}")
            for i in range(width)
        ]
        return sum(await asyncio.gather(*started))


def events_cache_misses(server: DevServer) -> float:
    """The server's events cache misses so far (its Prometheus metrics)."""
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("cache_miss{") and "EventsCache" in line
    )


async def test_a_wide_fan_out_s_children_start_from_the_events_cache() -> None:
    # the server reads each child's initiating event (its 4 KiB input) as it
    # starts it; with Temporal's default 512 KiB cache most of 300 were gone
    # and each was read back from the database with its whole batch
    with DevServer(port=free_port()) as server:
        client = await Client.connect(server.address)
        async with Worker(
            client,
            task_queue="cache-probe",
            workflows=[CacheProbeFanOut, CacheProbeChild],
            max_cached_workflows=400,
        ):
            total = await client.execute_workflow(
                CacheProbeFanOut.run, 300, id=f"probe-{uuid.uuid4().hex}", task_queue="cache-probe"
            )
        assert total == 300 * 4096
        assert events_cache_misses(server) < 10


@workflow.defn(name="SlowFanOut", sandboxed=False)
class SlowFanOut:
    """Starts ``width`` children on another worker's task queue; each of its
    activations (but a replay's) holds the worker 1.2 s, as a loaded worker does."""

    @workflow.run
    async def run(self, width: int, children_queue: str) -> int:
        parent = workflow.info().workflow_id
        started = []
        for i in range(width):
            started.append(
                workflow.execute_child_workflow(
                    CacheProbeChild.run, "x", id=f"{parent}/{i}", task_queue=children_queue
                )
            )
        done, slowed = 0, None
        for child in asyncio.as_completed(started):
            done += await child
            if slowed != workflow.now() and not workflow.unsafe.is_replaying():
                slowed = workflow.now()  # once an activation
                time.sleep(1.2)
        return done


async def test_a_slow_workflow_task_is_not_failed_for_the_events_its_children_buffer() -> None:
    # Temporal's default fails a workflow task once 100 events came in while
    # it ran (WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND)
    with DevServer(port=free_port()) as server:
        client = await Client.connect(server.address)
        async with (
            Worker(client, task_queue="slow-parent", workflows=[SlowFanOut]),
            Worker(client, task_queue="fast-children", workflows=[CacheProbeChild]),
        ):
            handle = await client.start_workflow(
                SlowFanOut.run,
                args=[300, "fast-children"],
                id=f"slow-{uuid.uuid4().hex}",
                task_queue="slow-parent",
            )
            # (with the default it never ends: each replay lets more events in)
            assert await asyncio.wait_for(handle.result(), timeout=90) == 300
            failed = [
                event
                async for event in handle.fetch_history_events()
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
            ]
        assert failed == []
