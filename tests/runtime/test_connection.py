"""Where OMA connects: Temporal's environment configuration (a profile file,
``TEMPORAL_*`` variables), used alike by ``oma dev``, ``oma run``, the worker
and the Python client."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from oma import OpenMultiAgent
from oma.core.schema.errors import TemporalConfigError, TemporalUnavailableError
from oma.runtime.connection import Connection
from oma.runtime.dev_server import free_ports, is_listening
from tests.support.cli import OMA, demo_copy, run_cmd
from tests.support.paths import ROOT
from tests.support.procs import Processes
from tests.support.runs import scripted, task

pytestmark = pytest.mark.e2e

PROFILE = """
[profile.default]
address = "127.0.0.1:1"

[profile.team]
address = "127.0.0.1:{port}"
namespace = "team-a"
"""


def profile_env(config_file: Path, **extra: str) -> dict[str, str]:
    """This process's environment with the ``team`` profile of ``config_file``
    selected and no ``TEMPORAL_*`` variable of the caller's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    return {**env, "TEMPORAL_CONFIG_FILE": str(config_file), "TEMPORAL_PROFILE": "team", **extra}


def test_nothing_configured_means_localhost_and_the_default_namespace(tmp_path: Path) -> None:
    connection = Connection.from_env({"TEMPORAL_CONFIG_FILE": str(tmp_path / "absent.toml")})
    assert (connection.address, connection.namespace, connection.task_queue) == (
        "localhost:7233",
        "default",
        "oma",
    )


def test_a_variable_that_is_not_utf8_does_not_stop_the_connection(tmp_path: Path) -> None:
    # a shell's X=$'\xff\xfe': Python holds the bytes as surrogates
    junk = os.fsdecode(b"\xff\xfe")
    connection = Connection.from_env(
        {
            "X": junk,
            "TEMPORAL_CONFIG_FILE": str(tmp_path / "absent.toml"),
            "TEMPORAL_ADDRESS": "temporal.example:7233",
        }
    )
    assert connection.address == "temporal.example:7233"


def test_a_profile_names_the_server_and_namespace_and_the_environment_overrides_it(
    tmp_path: Path,
) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text(PROFILE.format(port=7999))
    env = {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "team"}
    assert Connection.from_env(env).config == {
        "target_host": "127.0.0.1:7999",
        "namespace": "team-a",
    }
    overridden = Connection.from_env({**env, "TEMPORAL_NAMESPACE": "team-b", "OMA_TASK_QUEUE": "q"})
    assert (overridden.namespace, overridden.task_queue) == ("team-b", "q")


def test_an_api_key_turns_tls_on_as_temporal_cloud_needs() -> None:
    connection = Connection.from_env(
        {"TEMPORAL_ADDRESS": "ns.acct.tmprl.cloud:7233", "TEMPORAL_API_KEY": "secret"}
    )
    assert connection.config["api_key"] == "secret"
    assert connection.config["tls"] is True


@pytest.mark.parametrize(
    ("content", "profile", "problem"),
    [("[profile.team\naddress =", "team", "TOML parse error"), (PROFILE, "nope", "'nope'")],
)
def test_a_broken_profile_file_or_an_unknown_profile_is_a_clear_error(
    tmp_path: Path, content: str, profile: str, problem: str
) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text(content)
    with pytest.raises(TemporalConfigError, match=problem) as raised:
        Connection.from_env({"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": profile})
    assert raised.value.code == "TEMPORAL_CONFIG_INVALID"
    assert str(config) in raised.value.message


async def test_oma_dev_oma_run_the_worker_and_the_client_share_a_profile_namespace(
    processes: Processes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = demo_copy(tmp_path)
    port, ui_port = free_ports(2)
    config = tmp_path / "temporal.toml"
    config.write_text(PROFILE.format(port=port))
    dev = processes.start(
        [OMA, "dev", "--port", str(port), "--ui-port", str(ui_port)],
        cwd=project,
        env=profile_env(config, OMA_TASK_QUEUE="oma-dev-queue"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    worker = None
    try:
        assert dev.stdout is not None
        banner = await asyncio.to_thread(dev.stdout.readline)
        assert f"127.0.0.1:{port} (namespace 'team-a')" in banner
        # a second worker, `python worker.py`, on a queue of its own
        worker = processes.start(
            [sys.executable, str(ROOT / "worker.py")],
            cwd=project,
            env=profile_env(config, OMA_TASK_QUEUE="oma-worker-queue"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert worker.stdout is not None
        line = await asyncio.to_thread(worker.stdout.readline)
        assert "task queue 'oma-worker-queue'" in line and "namespace 'team-a'" in line

        run = await run_cmd(
            OMA,
            "run",
            "--no-worker",
            "--json",
            "--workflow-id",
            "profile-run",
            "examples/hybrid-team-scripted.json",
            cwd=project,
            env=profile_env(config, OMA_TASK_QUEUE="oma-worker-queue"),
        )
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["success"] is True

        for key, value in profile_env(config, OMA_TASK_QUEUE="oma-dev-queue").items():
            monkeypatch.setenv(key, value)
        for key in [k for k in os.environ if k.startswith("TEMPORAL_")]:
            if key not in ("TEMPORAL_CONFIG_FILE", "TEMPORAL_PROFILE"):
                monkeypatch.delenv(key)
        oma = OpenMultiAgent()
        result = await oma.run_tasks(
            {"name": "t", "agents": [scripted("a", "done")]},
            [task("one", "a")],
            workflow_id="profile-client-run",
        )
        assert result.success, result
        client = await oma.client()
        assert client.namespace == "team-a"
        described = await client.get_workflow_handle("profile-run").describe()
        assert described.task_queue == "oma-worker-queue"
        default_ns = await Connection.local(f"127.0.0.1:{port}").connect()
        assert [w.id async for w in default_ns.list_workflows()] == []
    finally:
        for proc in (worker, dev):
            if proc is not None:
                proc.send_signal(signal.SIGINT)
                await asyncio.to_thread(proc.wait, 30)
    assert not is_listening(f"127.0.0.1:{port}")


async def test_a_server_still_starting_is_asked_again_and_a_dead_one_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from temporalio.client import Client

    from oma.runtime import connection as module

    answers: list[str] = ["Frontend is not healthy yet", "Frontend is not healthy yet", "ok"]
    calls: list[str] = []

    async def connect(*args: object, **kwargs: object) -> str:
        calls.append(answers[0])
        answer = answers.pop(0)
        if answer != "ok":
            raise RuntimeError(f"Failed client connect: {answer}")
        return answer

    monkeypatch.setattr(Client, "connect", connect)
    assert await Connection.local("127.0.0.1:1").connect() == "ok"  # type: ignore[comparison-overlap]
    assert len(calls) == 3

    answers[:] = ["Connection refused"]
    with pytest.raises(
        TemporalUnavailableError,
        match=r"answers at 127\.0\.0\.1:1 .*Connection refused",
    ):
        await Connection.local("127.0.0.1:1").connect()
    monkeypatch.setattr(module, "STARTING_SERVER_WAIT_S", 0.0)
    answers[:] = ["Frontend is not healthy yet"] * 3
    with pytest.raises(TemporalUnavailableError, match="not healthy yet"):
        await Connection.local("127.0.0.1:1").connect()
