"""The docker-compose worker as it runs: the image's steps carried out on a
temporary directory (tests/support/image.py: no container engine runs here), the
compose file's worker service applied to it (its environment and volumes),
its CMD started against the session's dev server, and the README's
"Deploying" commands run from the host as a user types them."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client

from oma.core.schema.messages import TextBlock, ToolResultBlock
from oma.runtime.dev_server import DevServer
from tests.support import compose as _compose
from tests.support.cli import OMA, PYTHON_API_OUTPUT, demo_copy, run_cmd
from tests.support.image import Layout, build_layout, install
from tests.support.paths import ROOT
from tests.support.runs import agent_result

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("worker-image")]


DEPLOYING = [
    "docker compose up -d --build",
    "export TEMPORAL_ADDRESS=localhost:7233",
    "oma run examples/hybrid-team-scripted.json",
    "oma run examples/goal-team-scripted.json",
    "oma run examples/acp-team-scripted.json",
    "oma run examples/tool-team-scripted.json",
    "python examples/python_api.py",
]
"""The commands of the README's "Deploying" section; the ones after the
``export`` run here, from the host, against the image's worker."""


def test_the_readme_deploying_commands_are_the_ones_tested() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Deploying\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    assert block.splitlines() == DEPLOYING


@dataclass
class ImageWorker:
    """The image's CMD running in its layout, serving ``task_queue``."""

    layout: Layout
    task_queue: str
    address: str

    @property
    def scratch(self) -> Path:
        return self.layout.local("scratch")

    def host_env(self) -> dict[str, str]:
        """A shell on the host after the README's ``export``: the venv active,
        no model key, the cluster's address (and this worker's task queue)."""
        env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OMA_PATH")}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        return env | {"TEMPORAL_ADDRESS": self.address, "OMA_TASK_QUEUE": self.task_queue}


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """The image, built and installed once for the module."""
    base = tmp_path_factory.mktemp("image")
    built = build_layout(base / "app")
    install(built, base / "venv")
    return built


def mount_volumes(layout: Layout, service: dict[str, object], env: dict[str, str]) -> None:
    """What compose mounts into the worker's container: a bind mount's
    source replaces the image's directory (a copy here); a named volume
    starts as the image's directory, which must exist (compose would
    otherwise create it owned by root, where the worker's user cannot write)."""
    for volume in _compose.volumes(service, env):
        target = layout.local(volume.target)
        if volume.named:
            assert target.is_dir(), f"the image has no {volume.target} for volume {volume.source}"
        else:
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(ROOT / volume.source, target)


def start_cmd(layout: Layout, dev_server: DevServer, task_queue: str) -> subprocess.Popen[str]:
    """The image's CMD in its WORKDIR with the compose worker's environment
    (interpolated from an empty host environment: no key, no OMA_TEAM_DIR),
    the server's address in place of the compose network's ``temporal:7233``."""
    service = _compose.load()["services"]["worker"]
    compose_env = {k: _compose.interpolate(v, {}) for k, v in _compose.environment(service).items()}
    env = layout.environment() | compose_env
    env |= {"TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": task_queue}
    log = (layout.root.parent / f"{task_queue}.log").open("w")
    return subprocess.Popen(
        layout.command(env),
        cwd=layout.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )


async def wait_for_banner(proc: subprocess.Popen[str], layout: Layout, queue: str) -> None:
    """Until the worker prints that it serves (then its stdout is drained in a thread)."""
    assert proc.stdout is not None
    banner = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
    log = (layout.root.parent / f"{queue}.log").read_text()
    assert banner.startswith("OMA worker on task queue"), banner + log
    threading.Thread(target=proc.stdout.read, daemon=True).start()


@pytest.fixture(scope="module")
async def image_worker(layout: Layout, dev_server: DevServer) -> AsyncIterator[ImageWorker]:
    """The compose worker: the image with the service's volumes, its CMD serving."""
    service = _compose.load()["services"]["worker"]
    mount_volumes(layout, service, {})
    queue = f"oma-image-{uuid.uuid4().hex[:8]}"
    proc = start_cmd(layout, dev_server, queue)
    try:
        await wait_for_banner(proc, layout, queue)
        yield ImageWorker(layout, queue, dev_server.address)
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def checkout(tmp_path: Path) -> Iterator[Path]:
    """The host's checkout: a copy of examples/ to run the commands from."""
    yield demo_copy(tmp_path)


async def host(
    worker: ImageWorker, checkout: Path, command: str
) -> subprocess.CompletedProcess[str]:
    """``command`` (one line of ``DEPLOYING``) run on the host in ``checkout``."""
    program, *args = shlex.split(command)
    executable = OMA if program == "oma" else sys.executable
    return await run_cmd(executable, *args, cwd=checkout, env=worker.host_env())


async def test_the_readmes_first_example_runs_on_the_image_worker(
    image_worker: ImageWorker, checkout: Path
) -> None:
    for leftover in image_worker.scratch.glob("*"):
        leftover.unlink()
    ran = await host(image_worker, checkout, DEPLOYING[2] + " --json")

    assert ran.returncode == 0, ran.stdout + ran.stderr
    result = json.loads(ran.stdout)
    assert [(t["id"], t["status"]) for t in result["tasks"]] == [
        ("plan", "completed"),
        ("code", "completed"),
        ("review", "completed"),
    ]
    # written by the worker, in its own scratch/ (the volume), not on the host
    assert sorted(p.name for p in image_worker.scratch.iterdir()) == [
        "slugify.py",
        "test_slugify.py",
    ]
    assert not (checkout / "scratch" / "slugify.py").exists()


@pytest.mark.parametrize("command", DEPLOYING[3:5], ids=["goal", "acp"])
async def test_the_readmes_other_examples_run_on_the_image_worker(
    image_worker: ImageWorker, checkout: Path, command: str
) -> None:
    ran = await host(image_worker, checkout, command + " --json")

    assert ran.returncode == 0, ran.stdout + ran.stderr
    result = json.loads(ran.stdout)
    assert result["status"] == "completed"
    assert {t["status"] for t in result["tasks"]} == {"completed"}


async def test_a_team_with_a_custom_tool_and_hook_runs_on_the_image_worker(
    image_worker: ImageWorker, checkout: Path, client: Client
) -> None:
    wid = f"tool-team-{uuid.uuid4().hex[:8]}"
    ran = await host(image_worker, checkout, f"{DEPLOYING[5]} --json --workflow-id {wid}")

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["status"] == "completed"
    report = await agent_result(client, wid, "report")
    prompt, _, results, _ = report.messages
    # the hook (myteam.hooks:be_brief) ran before the agent, the tool for each call
    assert isinstance(prompt.content[-1], TextBlock)
    assert prompt.content[-1].text.endswith("\n\nAnswer in one sentence.")
    assert [(b.content, b.is_error) for b in results.content if isinstance(b, ToolResultBlock)] == [
        ("closed: the worker image runs the README's examples", False),
        ("open: waiting for review", False),
    ]


async def test_the_python_api_example_runs_on_the_image_worker(
    image_worker: ImageWorker, checkout: Path
) -> None:
    ran = await host(image_worker, checkout, DEPLOYING[6])

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == PYTHON_API_OUTPUT
    assert not (checkout / ".oma" / "temporal.db").exists(), "it must use the cluster"


def test_the_installed_package_has_its_bytecode(layout: Layout) -> None:
    # the sandbox re-imports the workflow modules for every run: without .pyc
    # files (PYTHONDONTWRITEBYTECODE keeps the worker from writing them) it
    # would compile them each time
    assert layout.venv is not None
    [package] = layout.venv.glob("lib/python*/site-packages/oma")
    sources = {p.relative_to(package).with_suffix("") for p in package.rglob("*.py")}
    compiled = {
        p.relative_to(package).parent.parent / p.name.split(".")[0]
        for p in package.rglob("__pycache__/*.pyc")
    }
    assert sources and sources <= compiled


async def test_the_image_worker_stops_on_sigterm_as_docker_stop_asks(
    layout: Layout, dev_server: DevServer
) -> None:
    queue = f"oma-image-stop-{uuid.uuid4().hex[:8]}"
    proc = start_cmd(layout, dev_server, queue)
    try:
        await wait_for_banner(proc, layout, queue)
        proc.send_signal(signal.SIGTERM)
        # its own handler, not the signal's default: as PID 1 in a container,
        # a process without one ignores SIGTERM until docker kills it
        assert await asyncio.to_thread(proc.wait, 30) == 130
    finally:
        proc.kill()
        proc.wait()
