"""What importing OMA's entry points loads: the provider SDKs, MCP, ACP and
the Temporal worker are imported where they are used, not by ``import``.

Each case runs in a fresh interpreter, so nothing this test process already
imported hides a module."""

from __future__ import annotations

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


def test_a_built_worker_has_imported_what_its_activities_use() -> None:
    # so that no activity's first call blocks the worker's event loop importing an SDK
    code = "import oma.worker\noma.worker.Activities(session_task_queue='q')"
    assert _loaded_after(code) == list(HEAVY)


def test_an_agent_on_the_scripted_provider_runs_without_the_provider_sdks() -> None:
    code = (
        "import asyncio\n"
        "from oma import Agent, AgentConfig\n"
        "agent = Agent(AgentConfig(name='a', provider='scripted', script=['hello']))\n"
        "assert asyncio.run(agent.run('hi')).output == 'hello'\n"
    )
    assert _loaded_after(code) == []
