"""Tracing (oma.runtime.tracing): one team run on the dev server is one connected
OpenTelemetry trace, with OMA's attributes, recorded by the SDK's in-memory
exporter; replay exports nothing; with tracing off nothing imports OpenTelemetry."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Replayer

from oma import worker as oma_worker
from oma.core.contracts.names import WorkflowName
from oma.core.schema.results import TeamRunResult
from oma.runtime import tracing
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer
from oma.worker.plugin import OmaPlugin
from tests.support.otlp import Collector
from tests.support.paths import ROOT
from tests.support.runs import assert_replays, histories_of, process, task, worker_activities

pytestmark = pytest.mark.e2e

TASK_QUEUE = "oma-test-tracing"


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    """The process's global tracer provider (set once per process), exporting
    to memory."""
    memory = InMemorySpanExporter()
    trace.set_tracer_provider(tracing.tracer_provider(SimpleSpanProcessor(memory)))
    yield memory


@pytest.fixture
async def traced_client(dev_server: DevServer, exporter: InMemorySpanExporter) -> Client:
    exporter.clear()
    return await Connection.local(dev_server.address, TASK_QUEUE).connect(
        plugins=[OmaPlugin(tracing=True)]
    )


def writer(tmp_path: Path) -> dict[str, Any]:
    """A scripted LLM agent that calls the ``add`` tool, then answers."""
    return {
        "name": "writer",
        "provider": "scripted",
        "script": [
            [{"type": "tool_use", "id": "u1", "name": "add", "input": {"a": 2, "b": 3}}],
            "two and three make five",
        ],
        "tools": ["tests.support.tools:add"],
        "cwd": str(tmp_path),
    }


async def traced_team_run(client: Client, workflow_id: str, run_input: Any) -> TeamRunResult:
    # no model server: the agents are scripted
    activities = worker_activities(TASK_QUEUE, "http://127.0.0.1:9")
    async with oma_worker.build_worker(client, TASK_QUEUE, activities):
        return await client.execute_workflow(
            WorkflowName.TEAM_RUN,
            run_input,
            id=workflow_id,
            task_queue=TASK_QUEUE,
            result_type=TeamRunResult,
        )


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def run_of(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> ReadableSpan:
    """The nearest ``RunWorkflow:*`` ancestor of ``span``."""
    while span.parent is not None:
        span = by_id[span.parent.span_id]
        if span.name.startswith("RunWorkflow:"):
            return span
    raise AssertionError("no workflow span above it")


async def test_a_team_run_is_one_connected_trace_with_agents_tasks_and_usage(
    traced_client: Client, exporter: InMemorySpanExporter, workflow_id: str, tmp_path: Path
) -> None:
    run_input = {
        "team": {
            "name": "traced-team",
            "agents": [writer(tmp_path), process("runner", "import sys; print(sys.stdin.read())")],
        },
        "tasks": [task("write", "writer"), task("run", "runner", "write")],
    }
    result = await traced_team_run(traced_client, workflow_id, run_input)
    assert result.success, result.error
    spans = list(exporter.get_finished_spans())
    by_id = {s.context.span_id: s for s in spans}

    assert len({s.context.trace_id for s in spans}) == 1
    roots = [s for s in spans if s.parent is None]
    assert [r.name for r in roots] == ["StartWorkflow:TeamRun"]
    assert all(s.parent.span_id in by_id for s in spans if s.parent is not None)

    (team,) = named(spans, "RunWorkflow:TeamRun")
    assert attrs(team)["oma.team"] == "traced-team"
    assert attrs(team)["oma.run_id"] == workflow_id
    assert attrs(team)["oma.status"] == "completed"
    runs = named(spans, "RunWorkflow:AgentRun")
    assert sorted((attrs(r)["oma.agent"], attrs(r)["oma.task_id"]) for r in runs) == [
        ("runner", "run"),
        ("writer", "write"),
    ]
    assert {run_of(r, by_id).name for r in runs} == {"RunWorkflow:TeamRun"}

    turns = named(spans, "RunActivity:llm_turn")
    assert len(turns) == 2
    usage = result.total_token_usage  # the process agent uses none
    assert usage.output_tokens > 0
    assert attrs(team)["oma.usage.output_tokens"] == usage.output_tokens
    assert sum(attrs(t)["gen_ai.usage.input_tokens"] for t in turns) == usage.input_tokens
    assert sum(attrs(t)["gen_ai.usage.output_tokens"] for t in turns) == usage.output_tokens
    assert all(attrs(t)["oma.cost_usd"] == 0.0 for t in turns)
    assert {(attrs(t)["oma.agent"], attrs(t)["oma.task_id"]) for t in turns} == {
        ("writer", "write")
    }
    assert {attrs(run_of(t, by_id))["oma.task_id"] for t in turns} == {"write"}

    (tool,) = named(spans, "RunActivity:tool_call")
    assert (attrs(tool)["gen_ai.tool.name"], attrs(tool)["oma.tool.is_error"]) == ("add", False)
    assert attrs(run_of(tool, by_id))["oma.task_id"] == "write"
    (proc,) = named(spans, "RunActivity:process_run")
    assert (attrs(proc)["oma.agent"], attrs(proc)["oma.process.exit_code"]) == ("runner", 0)
    assert attrs(run_of(proc, by_id))["oma.task_id"] == "run"

    # the recorded histories replay, with and without tracing, and replay exports nothing
    assert await assert_replays(traced_client, workflow_id) == 3
    exported = len(exporter.get_finished_spans())
    replayer = Replayer(workflows=[], plugins=[OmaPlugin(tracing=True)])
    for history in await histories_of(traced_client, workflow_id):
        await replayer.replay_workflow(history)
    assert len(exporter.get_finished_spans()) == exported


async def test_a_failed_task_makes_its_spans_errors_that_name_the_code(
    traced_client: Client, exporter: InMemorySpanExporter, workflow_id: str
) -> None:
    run_input = {
        "team": {"name": "crashing", "agents": [process("crash", "import sys; sys.exit(3)")]},
        "tasks": [task("boom", "crash")],
    }
    with pytest.raises(WorkflowFailureError):
        await traced_team_run(traced_client, workflow_id, run_input)
    spans = list(exporter.get_finished_spans())

    (team,) = named(spans, "RunWorkflow:TeamRun")
    (agent,) = named(spans, "RunWorkflow:AgentRun")
    assert team.status.status_code == agent.status.status_code == StatusCode.ERROR
    assert (attrs(team)["oma.status"], attrs(team)["oma.error_code"]) == ("failed", "TASK_FAILED")
    assert (attrs(agent)["oma.status"], attrs(agent)["oma.error_code"]) == (
        "failed",
        "PROCESS_FAILED",
    )
    assert await assert_replays(traced_client, workflow_id) == 2


def test_tracing_is_on_only_when_an_otlp_endpoint_is_set_and_not_disabled() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert tracing.enabled_by_env(endpoint)
    assert tracing.enabled_by_env({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x:4318"})
    assert not tracing.enabled_by_env({})
    assert not tracing.enabled_by_env({**endpoint, "OTEL_SDK_DISABLED": "true"})
    assert not tracing.enabled_by_env({**endpoint, "OTEL_TRACES_EXPORTER": "none"})


def loaded_after(code: str) -> list[str]:
    """The OpenTelemetry modules (and OMA's tracing ones) a fresh interpreter
    with no ``OTEL_*`` variable has loaded after running ``code``."""
    code += (
        "\nimport sys\nprint(sorted(m for m in sys.modules if 'opentelemetry' in m "
        "or m == 'oma.runtime.span_attributes'))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return list(eval(out.stdout))


def test_without_an_endpoint_the_cli_and_a_client_import_no_opentelemetry() -> None:
    code = (
        "import oma.cli.app\nfrom oma.worker.plugin import OmaPlugin, replayer\n"
        "OmaPlugin(); replayer()"
    )
    assert loaded_after(code) == []


def test_without_an_endpoint_a_worker_loads_neither_the_sdk_nor_the_interceptor() -> None:
    # (the ACP SDK imports the OpenTelemetry API itself, through logfire)
    code = (
        "from oma import worker\nfrom oma.worker.plugin import OmaPlugin\n"
        "OmaPlugin(worker.Activities(session_task_queue='q'))"
    )
    loaded = loaded_after(code)
    assert [m for m in loaded if "sdk" in m or "contrib" in m or m.startswith("oma.")] == []


AGENT_RUN_SCRIPT = """
import asyncio, sys
from oma.core.contracts.names import WorkflowName
from oma.runtime.connection import Connection
from oma.worker import build_worker

async def main(address, workflow_id):
    client = await Connection.local(address, "oma-test-otlp").connect()
    agent = {"name": "echo", "backend": {"kind": "process", "command": "cat"}}
    async with build_worker(client, "oma-test-otlp"):
        await client.execute_workflow(
            WorkflowName.AGENT_RUN, {"agent": agent, "input": "hello"}, id=workflow_id,
            task_queue="oma-test-otlp",
        )

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_with_an_otlp_endpoint_set_a_run_is_exported_there_by_the_time_the_process_exits(
    dev_server: DevServer, workflow_id: str
) -> None:
    collector = Collector()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.endpoint
    subprocess.run(
        [sys.executable, "-c", AGENT_RUN_SCRIPT, dev_server.address, workflow_id],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=90,
    )
    collector.server.shutdown()
    spans = collector.spans()
    names = {name for _, name, _ in spans}  # as an exporter receives them: the wire names bare
    assert {"StartWorkflow:AgentRun", "RunWorkflow:AgentRun", "RunActivity:process_run"} <= names
    assert {service for service, _, _ in spans} == {"oma"}
    (run,) = [a for _, name, a in spans if name == "RunWorkflow:AgentRun"]
    assert (run["oma.agent"].string_value, run["oma.status"].string_value) == ("echo", "completed")
