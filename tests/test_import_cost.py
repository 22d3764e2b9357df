"""What importing OMA's entry points loads: the provider SDKs, MCP, ACP and
the Temporal worker are imported where they are used, not by ``import``.

Each case runs in a fresh interpreter, so nothing this test process already
imported hides a module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("anthropic", "openai", "mcp", "acp", "temporalio.worker")
"""The modules that cost most of a second of CPU each (``python -X importtime``)."""


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
    assert _loaded_after("import oma.worker") == ["temporalio.worker"]


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


def test_an_agent_on_the_scripted_provider_runs_without_the_provider_sdks() -> None:
    code = (
        "import asyncio\n"
        "from oma import Agent, AgentConfig\n"
        "agent = Agent(AgentConfig(name='a', provider='scripted', script=['hello']))\n"
        "assert asyncio.run(agent.run('hi')).output == 'hello'\n"
    )
    assert _loaded_after(code) == []
