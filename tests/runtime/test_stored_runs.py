"""Runs whose payloads pass the threshold, against the real dev server, with
their payloads kept in a payload store (``OMA_PAYLOAD_STORE``): a directory,
and S3 on a real S3-compatible server (``s3_server``). The history holds a
reference, the store the payload (encrypted: these workers and clients hold
keys), the run completes and reads back; a client or worker without the store
says so; the codec server, ``oma dev`` and ``oma run`` read and keep them.

Runs live in the namespace ``STORED_NAMESPACE`` with workers of their own, so
the session's replay (which has no store) does not meet them; each test
replays its own."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.sdk.v1 import ExternalStorageReference
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory

from oma import worker as oma_worker
from oma.client.fork import preview, start_fork
from oma.core.contracts.encoding import ENCRYPTED_ENCODING
from oma.core.contracts.workflow_ids import shard_workflow_id
from oma.core.schema import limits
from oma.core.schema.errors import (
    InvalidRunInputError,
    PayloadStoreMissingError,
    StoredPayloadMissingError,
)
from oma.core.schema.fork import parse_fork_input
from oma.core.schema.limits import MAX_SHARDED_RUN_TASKS
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import checked_team_run_input
from oma.records.histories import execution_chain
from oma.runtime.codec import new_key, parse_keys
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer, free_port, free_ports, is_listening, temporal_binary
from oma.runtime.payload_store import PayloadStore, reference_of
from oma.worker import plugin
from oma.worker.plugin import OmaPlugin
from tests.support.anthropic_server import AnthropicServer
from tests.support.approvals import (
    Run,
    eventually,
    failure_at_once,
    result_within,
    start_run,
    terminate_if_running,
)
from tests.support.procs import Processes
from tests.support.runs import STORED_NAMESPACE, histories_of, process, task, worker_activities
from tests.support.s3_server import S3Server

pytestmark = pytest.mark.e2e

OMA = str(Path(sys.executable).with_name("oma"))
KEY = new_key("stored")
KEYS = parse_keys(KEY)
FILE_QUEUE = "oma-stored-file"
S3_QUEUE = "oma-stored-s3"
DESCRIPTION_BYTES = 400 * 1024
"""A task description past the threshold (256 KiB)."""
S3_DESCRIPTION_BYTES = 3 * 1024 * 1024
"""The S3 run's: past Temporal's 2 MB payload limit too."""
OUTPUT_CHARS = 250 * 1024
"""An output within a task's cap (256 KiB): the run's result, which holds it
and the description, passes the threshold."""


def big_run(
    marker: str, output_chars: int = OUTPUT_CHARS, description_bytes: int = DESCRIPTION_BYTES
) -> dict[str, Any]:
    """One task whose description is ``description_bytes`` (``marker`` at its
    start) and whose agent answers with the length of its prompt and
    ``output_chars`` more."""
    code = f"import sys; p = sys.stdin.read(); print(f'got {{len(p)}} ' + 'y' * {output_chars})"
    description = marker + " " + "z" * (description_bytes - len(marker) - 1)
    return {
        "team": {"name": "stored", "agents": [process("echo", code)]},
        "tasks": [task("big", "echo", description=description)],
    }


def prompt_size(output: str | None) -> int:
    """The prompt's length ``big_run``'s agent reported in ``output``."""
    assert output is not None and output.startswith("got "), output
    return int(output.split()[1])


def small_run() -> dict[str, Any]:
    code = "import sys; sys.stdin.read(); print('small')"
    return {
        "team": {"name": "stored", "agents": [process("echo", code)]},
        "tasks": [task("small", "echo")],
    }


def references(history: WorkflowHistory) -> list[tuple[str, ExternalStorageReference]]:
    """Every reference to a stored payload in ``history``: the event's kind
    (``workflow_execution_started_event_attributes``...) and the reference."""
    found: list[tuple[str, ExternalStorageReference]] = []

    def walk(message: Message, where: str) -> None:
        if isinstance(message, Payload):
            if (reference := reference_of(message)) is not None:
                found.append((where, reference))
            return
        for field, value in message.ListFields():
            if field.message_type is None:
                continue
            values = value.values() if field.message_type.GetOptions().map_entry else value
            for item in [values] if isinstance(values, Message) else values:
                if isinstance(item, Message):
                    walk(item, where)

    for event in history.events:
        walk(event, event.WhichOneof("attributes") or "")
    return found


def stored_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file()) if directory.exists() else []


async def connect(dev_server: DevServer, store: PayloadStore | None, keys: Any = KEYS) -> Client:
    return await Connection.local(dev_server.address, "unused", STORED_NAMESPACE).connect(
        plugins=[OmaPlugin(codec_keys=keys, payload_store=store)]
    )


@pytest.fixture(scope="module")
def file_store(tmp_path_factory: pytest.TempPathFactory) -> PayloadStore:
    return PayloadStore.parse(f"file://{tmp_path_factory.mktemp('payloads')}")


@pytest.fixture(scope="module")
async def file_client(dev_server: DevServer, file_store: PayloadStore) -> Client:
    return await connect(dev_server, file_store)


@pytest.fixture(scope="module")
async def file_worker(
    file_client: Client, anthropic_server: AnthropicServer
) -> AsyncIterator[oma_worker.OmaWorker]:
    activities = worker_activities(FILE_QUEUE, anthropic_server.base_url)
    async with oma_worker.build_worker(file_client, FILE_QUEUE, activities) as w:
        yield w


@pytest.fixture(scope="module")
async def finished_big_run(
    file_client: Client, file_worker: oma_worker.OmaWorker
) -> tuple[str, str, TeamRunResult]:
    """A big run on the directory store, finished: its id, marker and result."""
    marker = f"STOREMARK{uuid.uuid4().hex[:8]}"
    run = await start_run(
        file_client, f"stored-{uuid.uuid4().hex[:8]}", big_run(marker), FILE_QUEUE
    )
    try:
        result = await result_within(run, 60)
    finally:
        await terminate_if_running(run)
    return run.id, marker, result


async def test_a_run_past_the_threshold_keeps_its_payloads_in_the_directory_store_encrypted(
    file_client: Client, file_store: PayloadStore, finished_big_run: tuple[str, str, TeamRunResult]
) -> None:
    workflow_id, marker, result = finished_big_run
    assert result.success, result.error
    [done] = result.tasks
    assert prompt_size(done.output) > DESCRIPTION_BYTES  # the agent read it whole
    assert done.output.rstrip("\n").endswith(" " + "y" * OUTPUT_CHARS)

    team, child = await histories_of(file_client, workflow_id)
    started = references(team)[0]
    assert started[0] == "workflow_execution_started_event_attributes"
    assert started[1].driver_name == "oma.file"
    assert "workflow_execution_completed_event_attributes" in {
        w for w, _ in references(team)
    } or "workflow_execution_failed_event_attributes" in {w for w, _ in references(team)}
    kinds = {w for w, _ in references(child)}
    assert "workflow_execution_started_event_attributes" in kinds  # the task's input
    assert "activity_task_scheduled_event_attributes" in kinds  # the process's prompt

    assert file_store.directory is not None
    kept = file_store.directory / started[1].claim_data["key"]
    data = kept.read_bytes()
    assert len(data) > DESCRIPTION_BYTES
    assert Payload.FromString(data).metadata["encoding"] == ENCRYPTED_ENCODING
    assert marker.encode() not in data
    assert all(marker.encode() not in f.read_bytes() for f in stored_files(file_store.directory))

    replayer = plugin.replayer(KEYS, payload_store=file_store, strict_sandbox=True)
    before = stored_files(file_store.directory)
    for history in (team, child):
        await replayer.replay_workflow(history)
    assert stored_files(file_store.directory) == before, "a replay stores nothing"


async def test_a_small_run_stores_nothing(
    file_client: Client, file_store: PayloadStore, file_worker: oma_worker.OmaWorker
) -> None:
    assert file_store.directory is not None
    before = stored_files(file_store.directory)
    run = await start_run(file_client, f"small-{uuid.uuid4().hex[:8]}", small_run(), FILE_QUEUE)

    assert (await result_within(run, 60)).success
    assert stored_files(file_store.directory) == before
    assert [references(h) for h in await histories_of(file_client, run.id)] == [[], []]


async def test_a_client_without_the_store_says_so_when_it_reads_a_stored_result(
    dev_server: DevServer, finished_big_run: tuple[str, str, TeamRunResult]
) -> None:
    workflow_id, _, _ = finished_big_run
    bare = await connect(dev_server, None)
    handle = bare.get_workflow_handle(workflow_id, result_type=TeamRunResult)

    with pytest.raises(PayloadStoreMissingError) as raised:
        await handle.result()

    assert raised.value.message.startswith(
        "a payload of this history is kept in a directory payload store (key 'sha256/"
    )
    assert raised.value.message.endswith(
        "and this process has no payload store: set OMA_PAYLOAD_STORE to the store every "
        "client and worker of the namespace shares (file:///path or s3://bucket/prefix; "
        'docs/orchestration.md, "Where large payloads go")'
    )


# -- past Temporal's 2 MB ----------------------------------------------------------------------

LARGE_TASKS = 4
LARGE_DESCRIPTION_BYTES = 5 * 1024 * 1024
"""Four descriptions of 5 MiB: a run input of 20 MiB (ten times Temporal's
payload limit), and a result that holds them with the outputs."""
SMALL_TASKS = 24
"""Small tasks two at a time before the large ones: past the run's
``history_event_limit`` (100), so it continues as new carrying its input."""


def large_run(marker: str) -> dict[str, Any]:
    """``LARGE_TASKS`` tasks whose descriptions are ``LARGE_DESCRIPTION_BYTES``
    each (``marker`` first) after ``SMALL_TASKS`` small ones; each large
    task's agent answers with the length of its prompt and ``OUTPUT_CHARS``
    more."""
    code = f"import sys; p = sys.stdin.read(); print(f'got {{len(p)}} ' + 'y' * {OUTPUT_CHARS})"
    small = [task(f"s{n}", "small") for n in range(SMALL_TASKS)]
    filler = "z" * (LARGE_DESCRIPTION_BYTES - len(marker) - 1)
    large = [
        task(f"big{n}", "echo", *(t["id"] for t in small), description=f"{marker} {filler}")
        for n in range(LARGE_TASKS)
    ]
    quiet = "import sys; sys.stdin.read(); print('small')"
    return {
        "team": {"name": "stored", "agents": [process("echo", code), process("small", quiet)]},
        "tasks": small + large,
        "options": {"max_concurrency": 2, "history_event_limit": 100},
    }


def marker_names(history: WorkflowHistory) -> list[str]:
    """The patch ids ``history``'s markers record."""
    return [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
        and "patch-data" in e.marker_recorded_event_attributes.details
    ]


@pytest.fixture(scope="module")
async def finished_large_run(
    file_client: Client, file_worker: oma_worker.OmaWorker
) -> tuple[str, str, TeamRunResult]:
    """A run given 20 MiB on the directory store, finished: its id, first run
    id and result."""
    run = await start_run(
        file_client, f"large-{uuid.uuid4().hex[:8]}", large_run("LARGEMARK"), FILE_QUEUE
    )
    try:
        result = await result_within(run, 120)
    finally:
        await terminate_if_running(run)
    assert run.handle.first_execution_run_id is not None
    return run.id, run.handle.first_execution_run_id, result


async def test_a_run_given_20_mb_carries_it_and_returns_it_with_every_output_inline(
    file_client: Client,
    file_store: PayloadStore,
    finished_large_run: tuple[str, str, TeamRunResult],
) -> None:
    workflow_id, first_run_id, result = finished_large_run
    assert result.success, [(t.id, t.status, t.error) for t in result.tasks if t.error]
    assert len(result.tasks) == SMALL_TASKS + LARGE_TASKS
    assert all(t.output_ref is None and t.output for t in result.tasks)  # none by reference
    large = [t for t in result.tasks if t.id.startswith("big")]
    assert all(prompt_size(t.output) > LARGE_DESCRIPTION_BYTES for t in large)
    assert all(len(t.description) == LARGE_DESCRIPTION_BYTES for t in large)

    runs = await execution_chain(file_client, workflow_id, first_run_id, later=True)
    assert len(runs) >= 2, "the run continued as new, carrying its 20 MiB input and its state"
    assert all("oma-payload-store" in marker_names(h) for h in runs)
    first_reference = references(runs[0])[0]
    assert first_reference[0] == "workflow_execution_started_event_attributes"
    assert first_reference[1].claim_data  # the input is in the store, the history a reference
    assert {w for w, _ in references(runs[0])} >= {
        "workflow_execution_continued_as_new_event_attributes"
    }
    assert "workflow_execution_completed_event_attributes" in {w for w, _ in references(runs[-1])}
    assert all(h.events[0].ByteSize() < 4096 for h in runs)  # a reference, not 20 MiB

    replayer = plugin.replayer(KEYS, payload_store=file_store, strict_sandbox=True)
    for history in runs:
        await replayer.replay_workflow(history)


async def test_a_fork_of_a_run_given_20_mb_keeps_its_tasks_and_runs_one_again(
    file_client: Client,
    file_store: PayloadStore,
    finished_large_run: tuple[str, str, TeamRunResult],
) -> None:
    workflow_id, _, source = finished_large_run
    fork = parse_fork_input({"fork": {"run_id": workflow_id, "rerun": ["big0"]}})
    fork_id = f"{workflow_id}-fork"
    forked = await preview(file_client, fork, fork_id)
    assert len(forked.reused) == SMALL_TASKS + LARGE_TASKS - 1

    handle = await start_fork(file_client, fork, id=fork_id, task_queue=FILE_QUEUE)
    try:
        result = await asyncio.wait_for(handle.result(), 120)
    finally:
        await terminate_if_running(Run(handle))
    assert result.success, result.error
    again = result.task("big0")
    assert again.reused_from is None and prompt_size(again.output) > LARGE_DESCRIPTION_BYTES
    kept = [t for t in result.tasks if t.id != "big0"]
    assert all(t.reused_from is not None for t in kept)
    by_id = {t.id: t for t in source.tasks}
    assert all(len(t.description) == len(by_id[t.id].description) for t in kept)

    replayer = plugin.replayer(KEYS, payload_store=file_store, strict_sandbox=True)
    await replayer.replay_workflow(await handle.fetch_history())


async def test_a_client_without_a_store_refuses_a_run_past_2_mb_naming_the_store(
    dev_server: DevServer,
) -> None:
    with pytest.raises(InvalidRunInputError) as raised:
        checked_team_run_input(large_run("X"))
    assert "over Temporal's payload limit of 2097152 bytes (2 MB; a payload store, " in (
        raised.value.message
    )
    assert "OMA_PAYLOAD_STORE, lifts it)" in raised.value.message
    checked_team_run_input(large_run("X"), stored=True)  # with one, it is taken


def many_tasks(count: int) -> dict[str, Any]:
    """A run of ``count`` independent tasks of one process agent."""
    return {
        "team": {"name": "stored", "agents": [process("echo", "print('x')")]},
        "tasks": [task(f"t{n}", "echo") for n in range(count)],
    }


async def test_a_run_of_more_tasks_than_one_run_holds_is_refused_before_anything_runs(
    file_client: Client, file_worker: oma_worker.OmaWorker
) -> None:
    # (a run of more than MAX_RUN_TASKS runs in shards: tests/workflows/test_shards.py)
    too_many = many_tasks(MAX_SHARDED_RUN_TASKS + 1)
    with pytest.raises(InvalidRunInputError) as raised:
        checked_team_run_input(too_many, stored=True)
    said = (
        f"tasks: the run has {MAX_SHARDED_RUN_TASKS + 1} tasks; a run may have at most "
        f"{MAX_SHARDED_RUN_TASKS}"
    )
    assert raised.value.message.startswith(said)

    # started past the client (the stock CLI): the run fails at once, none of its tasks ran
    run = await start_run(file_client, f"many-{uuid.uuid4().hex[:8]}", too_many, FILE_QUEUE)
    assert said in (await failure_at_once(run.handle, "INVALID_RUN_INPUT")).message
    history = await run.handle.fetch_history()
    assert not any(
        e.HasField("start_child_workflow_execution_initiated_event_attributes")
        for e in history.events
    )


async def test_a_sharded_runs_input_is_checked_and_split_in_an_activity_stored_and_encrypted(
    file_client: Client,
    file_store: PayloadStore,
    file_worker: oma_worker.OmaWorker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (the limits lowered as tests/workflows/test_shards.py lowers them: the
    # worker is in this process)
    monkeypatch.setattr(limits, "MAX_RUN_TASKS", 2)
    monkeypatch.setattr(limits, "SHARD_TASKS", 2)
    monkeypatch.setattr(limits, "SHARDS_AT_ONCE", 1)
    marker = f"SHARDMARK{uuid.uuid4().hex[:8]}"
    run_input = big_run(marker)  # its input past the threshold, so in the store
    run_input["tasks"] += [task(f"t{n}", "echo") for n in range(3)]
    run = await start_run(file_client, f"sharded-{uuid.uuid4().hex[:8]}", run_input, FILE_QUEUE)
    try:
        result = await result_within(run, 60)
    finally:
        await terminate_if_running(run)

    assert result.success, result.error
    assert [(s.first_task, s.tasks, s.status) for s in result.shards] == [
        ("big", 2, "completed"),
        ("t1", 2, "completed"),
    ]
    histories = await histories_of(file_client, run.id)
    parent = histories[0]
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in parent.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert scheduled == ["plan_shards"]
    # its input in the store (the run's input, given to the activity), encrypted
    kinds = {w for w, _ in references(parent)}
    assert "activity_task_scheduled_event_attributes" in kinds
    first_shard = await histories_of(file_client, shard_workflow_id(run.id, 1))
    assert references(first_shard[0])[0][0] == "workflow_execution_started_event_attributes"
    assert file_store.directory is not None
    assert all(marker.encode() not in f.read_bytes() for f in stored_files(file_store.directory))
    replayer = plugin.replayer(KEYS, payload_store=file_store, strict_sandbox=True)
    for history in [parent, *first_shard]:
        await replayer.replay_workflow(history)


def oma_env(dev_server: DevServer, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "OMA_"))}
    return {
        **env,
        "TEMPORAL_ADDRESS": dev_server.address,
        "TEMPORAL_NAMESPACE": STORED_NAMESPACE,
        "OMA_CODEC_KEYS": KEY,
        **extra,
    }


async def test_oma_show_reads_a_stored_run_with_the_store_and_says_what_it_lacks_without(
    dev_server: DevServer,
    file_store: PayloadStore,
    finished_big_run: tuple[str, str, TeamRunResult],
) -> None:
    workflow_id, _, _ = finished_big_run

    async def show(**extra: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(
            subprocess.run,
            [OMA, "show", workflow_id, "--json"],
            env=oma_env(dev_server, **extra),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    shown, bare = await asyncio.gather(show(OMA_PAYLOAD_STORE=file_store.url), show())

    assert shown.returncode == 0, shown.stderr
    assert "got 4096" in shown.stdout
    # as without the key: what it can show, and a note for what it cannot read
    said = " ".join(bare.stderr.split())
    assert "note: cannot read the run's input: PAYLOAD_STORE_MISSING: a payload of this " in (
        said
    ), bare.stderr


async def test_a_worker_without_the_store_fails_the_workflow_task_and_the_run_waits(
    dev_server: DevServer, file_client: Client, anthropic_server: AnthropicServer
) -> None:
    queue = f"oma-stored-wait-{uuid.uuid4().hex[:6]}"
    marker = f"WAITMARK{uuid.uuid4().hex[:8]}"
    bare_client = await connect(dev_server, None)
    bare = oma_worker.build_worker(
        bare_client, queue, worker_activities(queue, anthropic_server.base_url)
    )
    run = await start_run(file_client, f"waits-{uuid.uuid4().hex[:8]}", big_run(marker, 0), queue)
    try:
        async with bare:

            async def failed_task() -> str | None:
                history = await run.handle.fetch_history()
                return next(
                    (
                        e.workflow_task_failed_event_attributes.failure.message
                        for e in history.events
                        if e.HasField("workflow_task_failed_event_attributes")
                    ),
                    None,
                )

            message = await eventually(failed_task, "a failed workflow task", 30)
        assert message.startswith(
            "PAYLOAD_STORE_MISSING: a payload of this history is kept in a directory payload "
            "store (key 'sha256/"
        ), message
        assert (await run.handle.describe()).status == WorkflowExecutionStatus.RUNNING

        activities = worker_activities(queue, anthropic_server.base_url)
        async with oma_worker.build_worker(file_client, queue, activities):
            assert (await result_within(run, 60)).success
    finally:
        await terminate_if_running(run)


async def test_a_stored_payload_deleted_from_the_store_is_named_when_read(
    file_client: Client, file_store: PayloadStore, file_worker: oma_worker.OmaWorker
) -> None:
    run = await start_run(
        file_client, f"deleted-{uuid.uuid4().hex[:8]}", big_run("GONE", 0), FILE_QUEUE
    )
    assert (await result_within(run, 60)).success
    history = await run.handle.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes.input.payloads[0]
    reference = reference_of(started)
    assert reference is not None and file_store.directory is not None
    kept = file_store.directory / reference.claim_data["key"]
    kept.unlink()

    with pytest.raises(StoredPayloadMissingError) as raised:
        await file_client.data_converter.decode([started])

    assert raised.value.message.startswith(
        f"the payload store {file_store.url} has no file {kept}, which a reference in this "
        "history names"
    )


# -- S3 --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_store(s3_server: S3Server) -> PayloadStore:
    return PayloadStore.parse(f"s3://{s3_server.bucket}/stored-runs")


async def test_a_run_past_the_threshold_keeps_its_payloads_in_the_s3_store_encrypted(
    dev_server: DevServer,
    s3_server: S3Server,
    s3_store: PayloadStore,
    anthropic_server: AnthropicServer,
) -> None:
    client = await connect(dev_server, s3_store)
    marker = f"S3MARK{uuid.uuid4().hex[:8]}"
    activities = worker_activities(S3_QUEUE, anthropic_server.base_url)
    async with oma_worker.build_worker(client, S3_QUEUE, activities):
        given = big_run(marker, description_bytes=S3_DESCRIPTION_BYTES)
        run = await start_run(client, f"s3-{uuid.uuid4().hex[:8]}", given, S3_QUEUE)
        try:
            result = await result_within(run, 60)
        finally:
            await terminate_if_running(run)
    assert result.success, result.error
    [done] = result.tasks
    assert prompt_size(done.output) > S3_DESCRIPTION_BYTES  # past 2 MB, in and out
    assert len(done.description) == S3_DESCRIPTION_BYTES and done.output_ref is None

    team, child = await histories_of(client, run.id)
    where, started = references(team)[0]
    assert (where, started.driver_name) == (
        "workflow_execution_started_event_attributes",
        "aws.s3driver",
    )
    key = started.claim_data["key"]
    assert started.claim_data["bucket"] == s3_server.bucket
    assert key.startswith(f"v0/ns/{STORED_NAMESPACE}/wt/TeamRun/wi/{run.id}/")
    s3 = s3_server.client()
    data = s3.get_object(Bucket=s3_server.bucket, Key=f"stored-runs/{key}")["Body"].read()
    assert Payload.FromString(data).metadata["encoding"] == ENCRYPTED_ENCODING
    assert marker.encode() not in data
    assert references(child), "the task's input and output are stored too"

    # read back by another client of the same store, replayed by the product's replayer
    reader = await connect(dev_server, PayloadStore.parse(s3_store.url))
    again = await reader.get_workflow_handle(run.id, result_type=TeamRunResult).result()
    assert again.tasks[0].output == done.output
    replayer = plugin.replayer(KEYS, payload_store=s3_store, strict_sandbox=True)
    for history in (team, child):
        await replayer.replay_workflow(history)

    # a client given another bucket does not follow the reference there
    s3_server.create_bucket("oma-other-payloads")
    elsewhere = await connect(dev_server, PayloadStore.parse("s3://oma-other-payloads/stored-runs"))
    with pytest.raises(StoredPayloadMissingError) as raised:
        await elsewhere.get_workflow_handle(run.id, result_type=TeamRunResult).result()
    assert raised.value.message.startswith(
        f"a payload of this history is stored in the bucket {s3_server.bucket!r}"
    )
    assert "this process's payload store is s3://oma-other-payloads/stored-runs/" in (
        raised.value.message
    )


# -- the codec server, oma dev, oma run --------------------------------------------------------


@pytest.fixture
def stored_codec_server(file_store: PayloadStore, processes: Processes) -> Iterator[str]:
    """A real ``oma codec-server`` process with the keys and the directory store."""
    port = free_port()
    env = {**os.environ, "OMA_CODEC_KEYS": KEY, "OMA_PAYLOAD_STORE": file_store.url}
    proc = processes.start(
        [OMA, "codec-server", "--port", str(port), "--token", "stored-token"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not is_listening(f"127.0.0.1:{port}"):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"


def readable(shown: Any) -> str:
    """The CLI's JSON history (``--output json``: payloads in protobuf JSON,
    their data and metadata base64) with every payload's data and metadata
    decoded."""
    parts: list[str] = []
    stack = [shown]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("data"), str) and "metadata" in item:
                blobs = [item["data"], *item["metadata"].values()]
                parts += [base64.b64decode(b).decode(errors="replace") for b in blobs]
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return "\n".join(parts)


async def test_the_temporal_cli_shows_a_stored_input_through_the_codec_server(
    dev_server: DevServer,
    stored_codec_server: str,
    finished_big_run: tuple[str, str, TeamRunResult],
) -> None:
    workflow_id, marker, _ = finished_big_run

    async def show(*codec: str) -> str:
        done = await asyncio.to_thread(
            subprocess.run,
            [
                temporal_binary(),
                "workflow",
                "show",
                "-w",
                workflow_id,
                "--address",
                dev_server.address,
                "--namespace",
                STORED_NAMESPACE,
                "--output",
                "json",
                *codec,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return readable(json.loads(done.stdout))

    plain, decoded = await asyncio.gather(
        show(), show("--codec-endpoint", stored_codec_server, "--codec-auth", "Bearer stored-token")
    )

    assert marker not in plain
    assert "temporal.api.sdk.v1.ExternalStorageReference" in plain  # what the history holds
    assert marker in decoded


async def test_oma_dev_keeps_large_payloads_beside_its_database_and_its_web_ui_reads_them(
    processes: Processes, tmp_path: Path
) -> None:
    port, ui_port, codec_port = free_ports(3)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "OMA_"))}
    env["OMA_TASK_QUEUE"] = "oma-stored-dev"
    dev = processes.start(
        [
            OMA,
            "dev",
            "--port",
            str(port),
            "--ui-port",
            str(ui_port),
            "--codec-port",
            str(codec_port),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert dev.stdout is not None
    banner = [await asyncio.to_thread(dev.stdout.readline) for _ in range(4)]
    store = tmp_path / ".oma" / "payloads"
    assert f"Codec endpoint at http://127.0.0.1:{codec_port}" in banner[1], banner
    assert f"Payloads of 256 KiB or more are kept in file://{store}." in banner[2], banner

    marker = f"DEVMARK{uuid.uuid4().hex[:8]}"
    (tmp_path / "big.json").write_text(json.dumps(big_run(marker, 0)))
    # TEMPORAL_ADDRESS names oma dev's server, which its lock file beside
    # .oma/temporal.db names too: `oma run` keeps payloads in its store
    ran = await asyncio.to_thread(
        subprocess.run,
        [OMA, "run", "--no-worker", "--json", "big.json", "--workflow-id", "dev-stored"],
        cwd=tmp_path,
        env={**env, "TEMPORAL_ADDRESS": f"127.0.0.1:{port}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["success"] is True
    kept = stored_files(store)
    assert kept, "the input is stored beside the dev server's database"

    # what the Web UI does with the start event's input: POST it to /decode
    client = await Connection.local(f"127.0.0.1:{port}").connect(
        plugins=[OmaPlugin(codec_keys=None, payload_store=None)]
    )
    history = await client.get_workflow_handle("dev-stored").fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes.input.payloads[0]
    assert reference_of(started) is not None
    wire = {
        "metadata": {k: base64.b64encode(v).decode() for k, v in started.metadata.items()},
        "data": base64.b64encode(started.data).decode(),
    }
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://127.0.0.1:{codec_port}/decode", json={"payloads": [wire]}) as answer,
    ):
        body = await answer.json()
    [decoded] = body["payloads"]
    assert marker in base64.b64decode(decoded["data"]).decode()


async def test_oma_run_keeps_large_payloads_beside_the_embedded_database(tmp_path: Path) -> None:
    marker = f"RUNMARK{uuid.uuid4().hex[:8]}"
    (tmp_path / "big.json").write_text(json.dumps(big_run(marker, 0)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "OMA_"))}
    # nothing listens there: `oma run` starts the embedded server, and its worker
    env["TEMPORAL_ADDRESS"] = f"127.0.0.1:{free_port()}"

    ran = await asyncio.to_thread(
        subprocess.run,
        [OMA, "run", "--json", "big.json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["success"] is True
    kept = stored_files(tmp_path / ".oma" / "payloads")
    assert any(Payload.FromString(f.read_bytes()).data.find(marker.encode()) >= 0 for f in kept)


def test_a_malformed_store_stops_a_worker_before_it_connects() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "OMA_"))}
    env |= {"OMA_PAYLOAD_STORE": "s3://", "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}"}

    proc = subprocess.run(
        [OMA, "worker"], env=env, capture_output=True, text=True, timeout=60, check=False
    )

    assert proc.returncode == 1
    assert "PAYLOAD_STORE_INVALID: OMA_PAYLOAD_STORE='s3://' names the bucket ''" in (
        proc.stderr.replace("\n", " ")
    )
    assert "Traceback" not in proc.stderr
