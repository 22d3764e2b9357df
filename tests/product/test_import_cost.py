"""What importing OMA's entry points loads: the provider SDKs, MCP, ACP and
the Temporal worker are imported where they are used, not by ``import``.

Each case runs in a fresh interpreter, so nothing this test process already
imported hides a module."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("anthropic", "openai", "mcp", "acp", "temporalio.worker", "boto3")
"""The modules that cost most of a second of CPU each (``python -X importtime``);
boto3 (the S3 payload store's) a few tenths."""


def _loaded_after(code: str) -> list[str]:
    """Which of ``HEAVY`` are in ``sys.modules`` after running ``code`` in a new interpreter."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    return out.split()


@pytest.mark.parametrize(
    "code",
    [
        "import oma; from oma import Agent, OpenMultiAgent",
        "import oma.client, oma.agent",
        "import oma.cli.app, oma.cli.run",
    ],
)
def test_the_client_and_the_agent_import_no_sdk_and_no_worker(code: str) -> None:
    assert _loaded_after(code) == []


def test_importing_the_worker_loads_no_provider_or_protocol_sdk() -> None:
    assert _loaded_after("from oma.worker import build_worker") == ["temporalio.worker"]


def test_a_replayer_imports_no_activity() -> None:
    # oma replay and oma debug replay with the worker's plugin, not its activities
    probe = "import oma.cli.replay, sys; print([m for m in sys.modules if m.startswith('oma.act')])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_built_worker_imports_no_provider_or_protocol_sdk() -> None:
    code = "import oma.worker\noma.worker.Activities(session_task_queue='q')"
    assert _loaded_after(code) == ["temporalio.worker"]


FIRST_USES = """
import asyncio, json, sys, threading
from importlib.abc import MetaPathFinder

on_loop = {}

class Where(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in ("anthropic", "openai", "acp", "mcp"):
            on_loop.setdefault(name, threading.current_thread() is threading.main_thread())
        return None

sys.meta_path.insert(0, Where())

import oma.worker
from oma.activities.providers import provider_for
from oma.core.schema.backends import AcpBackendConfig
from oma.core.schema.mcp import McpServerConfig

activities = oma.worker.Activities(session_task_queue="q")

async def main():
    await provider_for(activities.llm.providers, "anthropic")
    await provider_for(activities.llm.providers, "openai")
    for first_use in (
        activities.acp_pool.get_or_open("wf/run", "a", AcpBackendConfig(command="/no")),
        activities.mcp_pool.get_or_open("wf/run", "a", McpServerConfig(name="s", command="/no")),
    ):
        try:
            await first_use
        except Exception:
            pass  # no such command: the SDK was imported before it was started

asyncio.run(main())
print(json.dumps(on_loop, sort_keys=True))
"""


def test_a_worker_imports_each_sdk_at_its_first_use_off_its_event_loop() -> None:
    # a turn, an ACP session or an MCP server first used on a worker imports its
    # SDK (up to a second of CPU) in a thread: the worker's other activities
    # and their heartbeats go on meanwhile
    out = subprocess.run(
        [sys.executable, "-c", FIRST_USES], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == {"acp": False, "anthropic": False, "mcp": False, "openai": False}


def test_a_client_and_a_worker_with_an_s3_store_import_boto3_at_the_first_payload() -> None:
    code = (
        "import os\n"
        "os.environ['OMA_PAYLOAD_STORE'] = 's3://oma-payloads/p'\n"
        "import oma.worker\n"
        "from oma.runtime.client_plugin import OmaClientPlugin\n"
        "plugin = OmaClientPlugin()\n"
        "plugin.configure_client({})\n"
        "oma.worker.Activities(session_task_queue='q')\n"
    )
    assert _loaded_after(code) == ["temporalio.worker"]


FIRST_PAYLOAD = """
import asyncio, json, sys, threading
from importlib.abc import MetaPathFinder

on_loop = {}

class Where(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "boto3":
            on_loop.setdefault(name, threading.current_thread() is threading.main_thread())
        return None

sys.meta_path.insert(0, Where())

from oma.runtime.converter import data_converter
from oma.runtime.payload_store import PayloadStore

converter = data_converter(None, PayloadStore.parse("s3://oma-payloads/p"))

async def main():
    try:
        await converter.encode(["x" * 300_000])
    except Exception:
        pass  # no server at the endpoint: boto3 was imported before the request

asyncio.run(main())
print(json.dumps(on_loop))
"""


def test_the_s3_store_imports_boto3_at_its_first_payload_off_the_event_loop() -> None:
    env = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_MAX_ATTEMPTS": "1"}
    env |= {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION": "us-east-1"}
    out = subprocess.run(
        [sys.executable, "-c", FIRST_PAYLOAD], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert json.loads(out) == {"boto3": False}


def test_an_agent_on_the_scripted_provider_runs_without_the_provider_sdks() -> None:
    code = (
        "import asyncio\n"
        "from oma import Agent, AgentConfig\n"
        "agent = Agent(AgentConfig(name='a', provider='scripted', script=['hello']))\n"
        "assert asyncio.run(agent.run('hi')).output == 'hello'\n"
    )
    assert _loaded_after(code) == []
