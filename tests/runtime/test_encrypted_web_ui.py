"""The encrypted Web UI in one step: ``oma dev`` with ``OMA_CODEC_KEYS`` serves
the codec endpoint and points its dev server's UI at it, and the UI, in a real
headless Chromium, shows a run's encrypted input decoded."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from oma.core.contracts.names import WorkflowName
from oma.core.schema.results import TeamRunResult
from oma.runtime.codec import new_key, parse_keys
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer, free_ports, is_listening, temporal_binary
from oma.worker.plugin import OmaPlugin
from tests.support.procs import Processes
from tests.support.runs import process, task, team_result
from tests.support.web_ui import chromium_command, dev_env, wait_listening

pytestmark = pytest.mark.e2e

OMA = str(Path(sys.executable).with_name("oma"))
KEY = new_key("ui-key")
QUEUE = "oma-encrypted-ui"


def oma_dev(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [OMA, "dev", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_oma_dev_says_its_web_ui_cannot_send_a_codec_token(tmp_path: Path) -> None:
    port, ui_port = free_ports(2)
    env = dev_env(QUEUE, OMA_CODEC_KEYS=KEY, OMA_CODEC_SERVER_TOKEN="s3cret-token")
    proc = oma_dev("--port", str(port), "--ui-port", str(ui_port), env=env, cwd=tmp_path)

    assert proc.returncode == 2
    assert "oma dev's codec server cannot require OMA_CODEC_SERVER_TOKEN" in proc.stderr
    assert "--no-codec-server" in proc.stderr
    assert not is_listening(f"127.0.0.1:{port}"), "refused before the dev server started"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--codec-port", "99999"], "Invalid value for '--codec-port'"),
        (["--codec-port", "0"], "Invalid value for '--codec-port'"),
        (["--port", "65536"], "Invalid value for '--port'"),
        (["--codec-port", "{ui_port}"], "is the Web UI's (--ui-port)"),
        (["--codec-port", "{port}"], "is the dev server's (--port)"),
    ],
)
def test_oma_dev_refuses_a_codec_port_it_cannot_serve_before_it_starts(
    tmp_path: Path, args: list[str], said: str
) -> None:
    port, ui_port = free_ports(2)
    given = [a.format(port=port, ui_port=ui_port) for a in args]
    if "--port" not in given:
        given += ["--port", str(port)]
    proc = oma_dev(
        "--ui-port", str(ui_port), *given, env=dev_env(QUEUE, OMA_CODEC_KEYS=KEY), cwd=tmp_path
    )

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not is_listening(f"127.0.0.1:{port}"), "refused before the dev server started"


async def test_the_dev_web_ui_shows_an_encrypted_input_decoded_in_headless_chromium(
    processes: Processes, tmp_path: Path
) -> None:
    port, ui_port, codec_port = free_ports(3)
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
            "--db",
            str(tmp_path / "dev.db"),
        ],
        cwd=tmp_path,
        env=dev_env(QUEUE, OMA_CODEC_KEYS=KEY),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    for address in (f"127.0.0.1:{port}", f"127.0.0.1:{ui_port}", f"127.0.0.1:{codec_port}"):
        await wait_listening(address, dev, 60)

    marker = f"UIMARK{uuid.uuid4().hex[:8]}"
    client = await Connection.local(f"127.0.0.1:{port}", QUEUE).connect(
        plugins=[OmaPlugin(codec_keys=parse_keys(KEY))]
    )
    workflow_id = f"encrypted-ui-{uuid.uuid4().hex[:8]}"
    run_input = {
        "team": {
            "name": "t",
            "agents": [process("echo", "import sys; print(sys.stdin.read()[:9])")],
        },
        "tasks": [task("say", "echo", description=f"say {marker}")],
    }
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        run_input,
        id=workflow_id,
        task_queue=QUEUE,
        result_type=TeamRunResult,
    )
    assert (await asyncio.wait_for(team_result(handle), 60)).success

    # the history holds the input encrypted: only the codec endpoint can show it
    shown = await asyncio.to_thread(
        subprocess.run,
        [
            temporal_binary(),
            "workflow",
            "show",
            "-w",
            workflow_id,
            "--address",
            f"127.0.0.1:{port}",
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "binary/encrypted" in shown.stdout or "YmluYXJ5L2VuY3J5cHRlZA" in shown.stdout
    assert marker not in shown.stdout

    # the page `oma dev` prints, under the UI's 127.0.0.1 name
    page = f"http://127.0.0.1:{ui_port}/namespaces/default/workflows/{workflow_id}"
    browser = chromium_command(tmp_path / "profile")
    dom = ""
    for _ in range(3):  # a JS app: give its fetches virtual time, once more if they lagged
        dumped = await asyncio.to_thread(
            subprocess.run,
            [*browser, "--virtual-time-budget=20000", "--dump-dom", page],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        dom = dumped.stdout
        if marker in dom:
            break
    assert marker in dom, dom[-3000:]


async def test_a_temporal_cli_without_codec_auth_is_refused_and_the_codec_server_says_why_at_once(
    processes: Processes, dev_server: DevServer, tmp_path: Path
) -> None:
    codec_port = free_ports(1)[0]
    log = tmp_path / "codec-server.log"
    with open(log, "w") as out:
        processes.start(
            [OMA, "codec-server", "--port", str(codec_port), "--token", "s3cret-token"],
            env=dev_env(QUEUE, OMA_CODEC_KEYS=KEY),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    while not is_listening(f"127.0.0.1:{codec_port}"):
        assert time.monotonic() < deadline, log.read_text()
        await asyncio.sleep(0.1)

    # the CLI retries a failed codec call until its deadline: bound it
    cli = await asyncio.to_thread(
        subprocess.run,
        [
            temporal_binary(),
            "workflow",
            "start",
            "--type",
            "TeamRun",
            "--task-queue",
            QUEUE,
            "--workflow-id",
            f"refused-{uuid.uuid4().hex[:8]}",
            "--input",
            '"x"',
            "--address",
            dev_server.address,
            "--codec-endpoint",
            f"http://127.0.0.1:{codec_port}",
            "--command-timeout",
            "3s",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = [line for line in log.read_text().splitlines() if "refused" in line]

    assert cli.returncode != 0
    assert lines, log.read_text()
    assert "refused POST /encode (401): no Authorization header" in lines[0]
    assert "--codec-auth 'Bearer <token>'" in lines[0]
