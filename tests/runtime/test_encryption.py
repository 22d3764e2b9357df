"""Encryption at rest against the real dev server: the AES-GCM payload codec
(``oma.runtime.codec``) on a worker and a client of their own, in the namespace
``ENCRYPTED_NAMESPACE``, the stock ``temporal`` CLI with and without
``--codec-endpoint`` pointed at a real ``oma codec-server`` process."""

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
from datetime import timedelta
from typing import Any

import pytest
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowQueryFailedError,
)
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from oma import worker as oma_worker
from oma.core.contracts.names import ActivityName, SignalName, WorkflowName
from oma.core.schema.errors import CodecKeyMissingError
from oma.core.schema.results import TeamRunResult
from oma.runtime.codec import AesGcmCodec, parse_keys
from oma.runtime.converter import data_converter
from oma.runtime.dev_server import DevServer, free_port, is_listening, temporal_binary
from oma.viewer.model import build_run_view
from oma.worker import plugin
from oma.workflows._visibility import start_attributes
from tests.support.anthropic_server import AnthropicServer
from tests.support.approvals import Run, eventually, result_within, start_run, terminate_if_running
from tests.support.encryption import KEY_A, KEY_B, QUEUE, connect
from tests.support.paths import HISTORIES
from tests.support.runs import (
    ENCRYPTED_NAMESPACE,
    TASK_QUEUE,
    histories_of,
    process,
    scripted,
    task,
    team_result,
    worker_activities,
)

pytestmark = pytest.mark.e2e

KEYS_A = parse_keys(KEY_A)
TOKEN = "codec-test-token"


@pytest.fixture(scope="module")
async def enc_client(dev_server: DevServer) -> Client:
    return await connect(dev_server, KEYS_A)


@pytest.fixture(scope="module")
async def enc_worker(
    enc_client: Client, anthropic_server: AnthropicServer
) -> AsyncIterator[oma_worker.OmaWorker]:
    activities = worker_activities(QUEUE, anthropic_server.base_url)
    async with oma_worker.build_worker(enc_client, QUEUE, activities) as w:
        yield w


@pytest.fixture(scope="module")
def codec_server() -> Iterator[str]:
    """A real ``oma codec-server`` process holding key A, behind a bearer token."""
    port = free_port()
    env = {**os.environ, "OMA_CODEC_KEYS": KEY_A}
    proc = subprocess.Popen(
        [sys.executable, "-m", "oma.cli", "codec-server", "--port", str(port), "--token", TOKEN],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(200):
            if is_listening(f"127.0.0.1:{port}") or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def markers() -> dict[str, str]:
    """Three markers, one per place; the agents' code builds the output and
    error ones at run time, so they are not in the input."""
    tag = uuid.uuid4().hex[:8]
    return {"input": f"INMARK{tag}", "output": f"OUTMARK{tag}", "error": f"ERRMARK{tag}"}


def marked_run(m: dict[str, str]) -> dict[str, Any]:
    out_code = f"import sys; sys.stdin.read(); print('OUTMARK' + '{m['output'][7:]}')"
    err_code = (
        f"import sys; sys.stdin.read(); sys.stderr.write('ERRMARK' + '{m['error'][7:]}'); "
        "sys.exit(1)"
    )
    return {
        "team": {"name": "t", "agents": [process("writer", out_code), process("broken", err_code)]},
        "tasks": [
            task("write", "writer", description=f"write about {m['input']}"),
            task("fail", "broken"),
        ],
    }


async def temporal_show(dev_server: DevServer, workflow_id: str, *codec: str) -> str:
    done = await asyncio.to_thread(
        subprocess.run,
        [
            temporal_binary(),
            "workflow",
            "show",
            "--workflow-id",
            workflow_id,
            "--output",
            "json",
            "--address",
            dev_server.address,
            "--namespace",
            ENCRYPTED_NAMESPACE,
            *codec,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return readable(json.loads(done.stdout))


def readable(shown: Any) -> str:
    """The CLI's JSON history with every payload's data base64-decoded
    (``--output json`` prints payloads in protobuf JSON: data is base64)."""
    parts: list[str] = []
    stack = [shown]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            data = item.get("data")
            if isinstance(data, str) and "metadata" in item:
                parts.append(base64.b64decode(data).decode(errors="replace"))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            parts.append(item)
    return "\n".join(parts)


async def start_marked_run(enc_client: Client, workflow_id: str) -> dict[str, str]:
    m = markers()
    handle = await enc_client.start_workflow(
        WorkflowName.TEAM_RUN,
        marked_run(m),
        id=workflow_id,
        task_queue=QUEUE,
        result_type=TeamRunResult,
    )
    result = await team_result(handle)
    assert result.task("write").output == f"{m['output']}\n"
    assert m["error"] in (result.task("fail").error or "")
    return m


async def test_history_holds_no_plaintext_and_the_codec_server_decodes_it(
    dev_server: DevServer,
    enc_client: Client,
    enc_worker: oma_worker.OmaWorker,
    codec_server: str,
    workflow_id: str,
) -> None:
    m = await start_marked_run(enc_client, workflow_id)

    plain = await temporal_show(dev_server, workflow_id)
    child = await temporal_show(dev_server, f"{workflow_id}/fail")
    assert [v for v in m.values() if v in plain or v in child] == []

    decoded = await temporal_show(
        dev_server,
        workflow_id,
        "--codec-endpoint",
        codec_server,
        "--codec-auth",
        f"Bearer {TOKEN}",
    )
    assert [v for v in m.values() if v not in decoded] == []
    replayer = plugin.replayer(codec_keys=KEYS_A)
    for history in await histories_of(enc_client, workflow_id):
        await replayer.replay_workflow(history)


async def test_a_client_without_the_key_starts_a_run_whose_worker_encrypts_what_it_writes(
    dev_server: DevServer, enc_client: Client, enc_worker: oma_worker.OmaWorker, workflow_id: str
) -> None:
    keyless = await connect(dev_server, None)
    m = markers()

    handle = await keyless.start_workflow(
        WorkflowName.TEAM_RUN,
        marked_run(m),
        id=workflow_id,
        task_queue=QUEUE,
        result_type=TeamRunResult,
    )
    result = await team_result(
        enc_client.get_workflow_handle(workflow_id, result_type=TeamRunResult)
    )

    # the input went in plaintext, as its client sent it; nothing the worker
    # wrote is readable without the key, the client's own result included
    assert result.task("write").output == f"{m['output']}\n"
    shown = await temporal_show(dev_server, workflow_id)
    child = await temporal_show(dev_server, f"{workflow_id}/fail")
    assert m["input"] in shown
    assert [v for v in (m["output"], m["error"]) if v in shown or v in child] == []
    with pytest.raises(CodecKeyMissingError):
        await team_result(handle)
    await replay_with_key_a(enc_client, workflow_id)


async def test_a_client_without_the_key_reading_a_result_gets_a_clear_error(
    dev_server: DevServer, enc_client: Client, enc_worker: oma_worker.OmaWorker, workflow_id: str
) -> None:
    await start_marked_run(enc_client, workflow_id)
    other_key = await connect(dev_server, parse_keys(KEY_B))

    handle = other_key.get_workflow_handle(workflow_id, result_type=TeamRunResult)
    # the run did not succeed: it ended Failed, its result in the (encrypted) failure
    with pytest.raises(CodecKeyMissingError) as caught:
        await team_result(handle)

    assert caught.value.code == "CODEC_KEY_MISSING"
    assert "encrypted with key id 'key-a'; OMA_CODEC_KEYS holds 'key-b'" in str(caught.value)


@pytest.mark.parametrize("worker_keys", [None, KEY_B], ids=["no-key", "wrong-key"])
async def test_a_run_no_worker_holds_the_key_of_waits_for_one_that_does(
    dev_server: DevServer,
    enc_client: Client,
    anthropic_server: AnthropicServer,
    workflow_id: str,
    worker_keys: str | None,
) -> None:
    queue = f"{QUEUE}-{uuid.uuid4().hex[:6]}"
    lacking = await connect(dev_server, parse_keys(worker_keys) if worker_keys else None)
    activities = worker_activities(queue, anthropic_server.base_url)
    handle = await enc_client.start_workflow(
        WorkflowName.TEAM_RUN,
        marked_run(markers()),
        id=workflow_id,
        task_queue=queue,
        result_type=TeamRunResult,
        task_timeout=TASK_TIMEOUT,
    )
    run = Run(handle)

    try:
        async with oma_worker.build_worker(lacking, queue, activities):
            failure = await workflow_task_failure(run)
            status = (await handle.describe()).status
        async with oma_worker.build_worker(enc_client, queue, activities):
            result = await result_within(run, 30)
    finally:
        await terminate_if_running(run)

    assert failure.startswith("CODEC_KEY_MISSING: the payload is encrypted with key id 'key-a'")
    assert status == WorkflowExecutionStatus.RUNNING
    assert result.task("write").status == "completed"
    await replay_with_key_a(enc_client, workflow_id)


async def test_rotation_decodes_and_replays_a_history_recorded_under_the_old_key(
    dev_server: DevServer, enc_client: Client, enc_worker: oma_worker.OmaWorker, workflow_id: str
) -> None:
    m = await start_marked_run(enc_client, workflow_id)
    rotated = parse_keys(f"{KEY_B},{KEY_A}")

    client = await connect(dev_server, rotated)
    result = await team_result(client.get_workflow_handle(workflow_id, result_type=TeamRunResult))
    replayer = plugin.replayer(codec_keys=rotated)
    for history in await histories_of(client, workflow_id):
        await replayer.replay_workflow(history)

    assert result.task("write").output == f"{m['output']}\n"
    encoded = await AesGcmCodec(rotated).encode(
        [
            (
                await AesGcmCodec(rotated).decode(
                    [_first_input(await _history(client, workflow_id))]
                )
            )[0]
        ]
    )
    assert encoded[0].metadata["encryption-key-id"] == b"key-b"


async def _history(client: Client, workflow_id: str) -> Any:
    return await client.get_workflow_handle(workflow_id).fetch_history()


def _first_input(history: Any) -> Any:
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.input.payloads[0].metadata["encryption-key-id"] == b"key-a"
    return started.input.payloads[0]


async def test_oma_replay_decrypts_with_the_keys_and_names_a_missing_one(
    enc_client: Client, enc_worker: oma_worker.OmaWorker, workflow_id: str, tmp_path: Any
) -> None:
    await start_marked_run(enc_client, workflow_id)
    exported = tmp_path / "history.json"
    exported.write_text((await _history(enc_client, workflow_id)).to_json())

    def oma_replay(keys: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "OMA_CODEC_KEYS": keys}
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "oma.cli",
                "replay",
                str(exported),
                "--workflow-id",
                workflow_id,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    rotated, other = await asyncio.gather(
        asyncio.to_thread(oma_replay, f"{KEY_B},{KEY_A}"),
        asyncio.to_thread(oma_replay, KEY_B),
    )

    assert rotated.returncode == 0, rotated.stderr
    assert "no mismatch" in rotated.stdout
    assert other.returncode == 1
    assert "CODEC_KEY_MISSING: cannot replay: the payload is encrypted with key id 'key-a'" in (
        other.stdout + other.stderr
    )


SHORT = b"\x01\x02\x03"


def short_ciphertext() -> RawValue:
    """A payload marked encrypted under key A that is 3 bytes long: too short
    to hold a nonce, let alone a ciphertext; sent as it is by a client with no
    codec (``RawValue``), as anyone who can reach the namespace can."""
    return RawValue(
        Payload(
            metadata={"encoding": b"binary/encrypted", "encryption-key-id": b"key-a"},
            data=SHORT,
        )
    )


SHORT_REASON = (
    "the payload encrypted with key id 'key-a' is 3 bytes, shorter than a nonce and a tag "
    "(28 bytes): it is not one OMA's codec wrote"
)


async def gated_run(enc_client: Client, workflow_id: str) -> Run:
    run = await start_run(
        enc_client,
        workflow_id,
        {
            "team": {"name": "t", "agents": [scripted("w", "done")]},
            "tasks": [task("a", "w")],
            "options": {"approvals": {"dispatch": ["a"]}},
        },
        task_queue=QUEUE,
    )
    await run.request("dispatch-a")
    return run


async def replay_with_key_a(client: Client, workflow_id: str) -> None:
    replayer = plugin.replayer(codec_keys=KEYS_A)
    for history in await histories_of(client, workflow_id):
        await replayer.replay_workflow(history)


async def test_a_decide_signal_with_a_short_ciphertext_is_refused_and_the_run_goes_on(
    dev_server: DevServer, enc_client: Client, enc_worker: oma_worker.OmaWorker, workflow_id: str
) -> None:
    run = await gated_run(enc_client, workflow_id)
    keyless = await connect(dev_server, None)

    await keyless.get_workflow_handle(workflow_id).signal(SignalName.DECIDE, short_ciphertext())

    async def refused() -> str | None:
        events = [e for e in await run.events() if e.type == "approval_refused"]
        return events[0].detail if events else None

    detail = await eventually(refused, "the approval_refused event", 15)
    assert detail.startswith(f"(no request_id): CIPHERTEXT_INVALID: {SHORT_REASON}")
    await run.decide((await run.pending())[0])
    assert (await result_within(run, 15)).status == "completed"
    await replay_with_key_a(enc_client, workflow_id)


async def test_an_abort_signal_with_a_short_ciphertext_aborts_instead_of_wedging(
    dev_server: DevServer, enc_client: Client, enc_worker: oma_worker.OmaWorker, workflow_id: str
) -> None:
    run = await gated_run(enc_client, workflow_id)
    keyless = await connect(dev_server, None)

    await keyless.get_workflow_handle(workflow_id).signal(SignalName.ABORT, short_ciphertext())

    assert (await result_within(run, 15)).status == "cancelled"
    await replay_with_key_a(enc_client, workflow_id)


@pytest.mark.parametrize("worker_keys", [KEY_A, None], ids=["with-key", "no-key"])
@pytest.mark.parametrize("workflow_type", [WorkflowName.TEAM_RUN, WorkflowName.AGENT_RUN])
async def test_a_start_with_a_short_ciphertext_fails_naming_what_is_wrong(
    dev_server: DevServer,
    anthropic_server: AnthropicServer,
    enc_client: Client,
    workflow_id: str,
    workflow_type: str,
    worker_keys: str | None,
) -> None:
    # no key can read it: every worker, with a key or none, fails the run alike
    queue = f"{QUEUE}-{uuid.uuid4().hex[:6]}"
    worker_client = await connect(dev_server, parse_keys(worker_keys) if worker_keys else None)
    activities = worker_activities(queue, anthropic_server.base_url)
    keyless = await connect(dev_server, None)

    async with oma_worker.build_worker(worker_client, queue, activities):
        with pytest.raises(WorkflowFailureError) as caught:
            await asyncio.wait_for(
                keyless.execute_workflow(
                    workflow_type, short_ciphertext(), id=workflow_id, task_queue=queue
                ),
                timeout=30,
            )

    cause = caught.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "CIPHERTEXT_INVALID"
    assert cause.message == SHORT_REASON
    await replay_with_key_a(enc_client, workflow_id)


TASK_TIMEOUT = timedelta(seconds=2)
"""The workflow task timeout of the runs a worker without their key meets:
after its first failure the SDK lets each retry of the workflow task time out
instead of failing it again, so a worker with the key gets the run's next
task only when this has passed (10 s by default)."""

WAITING_RUN = {
    "team": {"name": "t", "agents": [scripted("w", "done", "done")]},
    # task a has run (its child workflow is in the history) when b waits
    "tasks": [task("a", "w"), task("b", "w", "a")],
    "options": {"approvals": {"dispatch": ["b"]}},
}


async def start_waiting_run(client: Client, workflow_id: str, queue: str) -> Run:
    """``WAITING_RUN``, started by ``client`` (its keys, or none) on ``queue``."""
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        WAITING_RUN,
        id=workflow_id,
        task_queue=queue,
        result_type=TeamRunResult,
        search_attributes=start_attributes(team="t"),
        task_timeout=TASK_TIMEOUT,
    )
    return Run(handle)


async def workflow_task_failure(run: Run) -> str:
    """The message of the run's first failed workflow task, once there is one."""

    async def probe() -> str | None:
        history = await run.handle.fetch_history()
        failed = [
            e.workflow_task_failed_event_attributes.failure.message
            for e in history.events
            if e.HasField("workflow_task_failed_event_attributes")
        ]
        return failed[0] if failed else None

    return await eventually(probe, "a failed workflow task", 15)


def payloads(events: Any) -> list[Payload]:
    """Every payload in ``events`` but search attributes (Temporal indexes
    them, so they are never encrypted) and markers (the SDK's core writes a
    patch id there itself)."""
    found: list[Payload] = []

    def walk(message: Message) -> None:
        if isinstance(message, Payload):
            found.append(message)
            return
        for field, value in message.ListFields():
            if field.message_type is None or field.name == "search_attributes":
                continue
            if field.message_type.GetOptions().map_entry:
                values = list(value.values())
            else:
                values = [value] if isinstance(value, Message) else list(value)
            for v in values:
                if isinstance(v, Message):
                    walk(v)

    for event in events:
        if not event.HasField("marker_recorded_event_attributes"):
            walk(event)
    return found


def encodings(found: list[Payload]) -> set[bytes]:
    return {p.metadata.get("encoding", b"") for p in found}


def key_ids(found: list[Payload]) -> set[bytes]:
    return {p.metadata.get("encryption-key-id", b"") for p in found}


async def test_turning_encryption_on_keeps_a_run_waiting_for_an_approval(
    dev_server: DevServer, anthropic_server: AnthropicServer, workflow_id: str
) -> None:
    queue = f"{QUEUE}-{uuid.uuid4().hex[:6]}"
    activities = worker_activities(queue, anthropic_server.base_url)
    plain = await connect(dev_server, None)
    async with oma_worker.build_worker(plain, queue, activities):
        await (await start_waiting_run(plain, workflow_id, queue)).request("dispatch-b")
    switched_at = len((await plain.get_workflow_handle(workflow_id).fetch_history()).events)
    # the procedure of docs/security.md: every worker and client gets the key
    client = await connect(dev_server, KEYS_A)
    run = Run(client.get_workflow_handle(workflow_id, result_type=TeamRunResult))

    try:
        async with oma_worker.build_worker(client, queue, activities):
            [request] = await run.pending()  # a query: the plaintext history replayed
            await run.decide(request)
            result = await result_within(run, 30)
    finally:
        await terminate_if_running(run)

    assert (request.request_id, result.status) == ("dispatch-b", "completed")
    events = (await client.get_workflow_handle(workflow_id).fetch_history()).events
    assert encodings(payloads(events[:switched_at])) == {b"json/plain"}
    assert encodings(payloads(events[switched_at:])) == {b"binary/encrypted"}
    await replay_with_key_a(client, workflow_id)


@pytest.mark.parametrize("worker_keys", [KEY_B, None], ids=["rotated-out", "no-key"])
async def test_a_worker_without_the_key_of_a_run_in_progress_leaves_it_to_one_with_the_key(
    dev_server: DevServer,
    enc_client: Client,
    anthropic_server: AnthropicServer,
    workflow_id: str,
    worker_keys: str | None,
) -> None:
    queue = f"{QUEUE}-{uuid.uuid4().hex[:6]}"
    activities = worker_activities(queue, anthropic_server.base_url)
    async with oma_worker.build_worker(enc_client, queue, activities):
        request = await (await start_waiting_run(enc_client, workflow_id, queue)).request(
            "dispatch-b"
        )
    rotated_at = len((await enc_client.get_workflow_handle(workflow_id).fetch_history()).events)
    # key-b comes in to encrypt; key-a stays, to read
    rotated_keys = parse_keys(f"{KEY_B},{KEY_A}")
    rotated = await connect(dev_server, rotated_keys)
    run = Run(rotated.get_workflow_handle(workflow_id, result_type=TeamRunResult))
    lacking = await connect(dev_server, parse_keys(worker_keys) if worker_keys else None)

    try:
        async with oma_worker.build_worker(lacking, queue, activities):
            with pytest.raises(WorkflowQueryFailedError) as query:
                await run.pending()
            await run.signal_decision(request)
            failure = await workflow_task_failure(run)
            status = (await run.handle.describe()).status
            shown = await temporal_show(dev_server, workflow_id)
        async with oma_worker.build_worker(rotated, queue, activities):
            result = await result_within(run, 30)
    finally:
        await terminate_if_running(run)

    needs_a = "CODEC_KEY_MISSING: the payload is encrypted with key id 'key-a'"
    assert str(query.value).startswith(needs_a)
    assert failure.startswith(needs_a)
    assert "set OMA_CODEC_KEYS (or OMA_CODEC_KEYS_FILE) to a list holding it" in failure
    assert failure in shown  # the stock CLI, without the key
    assert status == WorkflowExecutionStatus.RUNNING
    assert result.status == "completed"
    events = (await rotated.get_workflow_handle(workflow_id).fetch_history()).events
    assert key_ids(payloads(events[:rotated_at])) == {b"key-a"}
    assert key_ids(payloads(events[rotated_at:])) == {b"key-b"}
    replayer = plugin.replayer(codec_keys=rotated_keys)
    for history in await histories_of(rotated, workflow_id):
        await replayer.replay_workflow(history)


async def test_oma_show_reads_an_encrypted_run_whole_its_local_model_turns_included(
    enc_client: Client, enc_worker: oma_worker.OmaWorker, workflow_id: str
) -> None:
    # a scripted model turn is a local activity: its marker's own data is
    # written by the SDK's core, unencrypted, beside the encrypted result
    run_input = {
        "team": {"name": "t", "agents": [scripted("writer", "the answer")]},
        "tasks": [task("write", "writer")],
    }
    handle = await enc_client.start_workflow(
        WorkflowName.TEAM_RUN,
        run_input,
        id=workflow_id,
        task_queue=QUEUE,
        result_type=TeamRunResult,
    )
    assert (await team_result(handle)).success
    histories = await histories_of(enc_client, workflow_id)

    view = await build_run_view(histories, data_converter(KEYS_A), workflow_id)

    assert view.notes == []
    [write] = view.tasks
    assert [(s.kind, s.status) for s in write.runs[0].activities] == [
        (ActivityName.LLM_TURN, "completed")
    ]
    assert write.output == "the answer"


@pytest.mark.usefixtures("worker")
async def test_oma_show_with_keys_reads_a_run_recorded_before_encryption(
    client: Client, workflow_id: str
) -> None:
    run_input = {
        "team": {"name": "plain", "agents": [scripted("writer", "in the clear")]},
        "tasks": [task("write", "writer")],
    }
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        run_input,
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=TeamRunResult,
    )
    assert (await team_result(handle)).success

    view = await build_run_view(
        await histories_of(client, workflow_id), data_converter(KEYS_A), workflow_id
    )

    assert view.notes == []
    assert (view.team, view.tasks[0].output) == ("plain", "in the clear")


def test_oma_replay_with_keys_replays_a_run_recorded_before_encryption() -> None:
    # turning encryption on must not make every older history a false mismatch
    history = HISTORIES / "team_run_cancelled.json"
    replayed = subprocess.run(
        [sys.executable, "-m", "oma.cli", "replay", str(history)],
        env={**os.environ, "OMA_CODEC_KEYS": KEY_A},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "no mismatch" in replayed.stdout
