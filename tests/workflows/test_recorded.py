"""Recorded model turns (docs/fork.md): a fork with ``options.models``
``recorded`` answers each model turn whose request its source recorded with
the recorded answer, with the real ``anthropic`` SDK's local server stopped;
a changed request fails ``RECORDING_MISS`` naming where it differs."""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from oma import worker as oma_worker
from oma.activities.tools.custom import load_custom_tool
from oma.client.runs import start_team_run
from oma.core.schema.before_run import load_hook
from oma.core.schema.run_input import parse_team_run_input
from oma.runtime.dev_server import DevServer, is_listening
from oma.testing import recorded
from tests.support.anthropic_server import AnthropicServer
from tests.support.cli import OMA, run_cmd
from tests.support.paths import ROOT
from tests.support.recorded import QUEUE, own_api_and_worker, run_on_queue, team_input
from tests.support.runs import assert_replays, task, team_result, worker_activities

pytestmark = pytest.mark.e2e


async def test_a_fork_replays_recorded_turns_with_the_model_server_stopped(
    client: Client, workflow_id: str, dev_server: DevServer
) -> None:
    with AnthropicServer() as api:
        address = api.base_url.removeprefix("http://")
        activities = worker_activities(QUEUE, api.base_url)
        async with oma_worker.build_worker(client, QUEUE, activities):
            api.reply_text("alpha", input_tokens=11, output_tokens=3)
            api.reply_text("beta", input_tokens=13, output_tokens=4)
            source = await run_on_queue(client, workflow_id, team_input())
            assert source.success, source
            assert [t.output for t in source.tasks] == ["alpha", "beta"]
            assert len(api.requests) == 2
            execution = (await client.get_workflow_handle(workflow_id).describe()).run_id
            api.stop()
            assert not is_listening(address)
            forked = await run_on_queue(
                client,
                f"{workflow_id}-rec",
                {
                    "fork": {"run_id": workflow_id, "rerun": ["t1"]},
                    "options": {"models": "recorded"},
                },
            )
            assert forked.status == "completed", forked
            assert [(t.output, t.reused_from) for t in forked.tasks] == [
                ("alpha", None),
                ("beta", None),
            ]
            assert forked.total_token_usage.input_tokens == 11 + 13  # as recorded
            assert forked.total_cost_usd == 0.0  # nothing was spent
            missed = await run_on_queue(
                client,
                f"{workflow_id}-miss",
                {
                    "fork": {
                        "run_id": workflow_id,
                        "edit": {"t2": {"description": "do t2 otherwise"}},
                    },
                    "options": {"models": "recorded"},
                },
            )
    assert missed.status == "failed"
    failed = missed.task("t2")
    assert failed.error_code == "RECORDING_MISS"
    assert failed.error is not None
    assert (
        f"agent 'writer', task 't2', model turn 1: run {workflow_id} (Temporal run id "
        f"{execution}) recorded no turn with this request: message 1 (user) differs from the "
        "recording's"
    ) in failed.error
    await assert_replays(client, f"{workflow_id}-rec")
    await assert_replays(client, f"{workflow_id}-miss")


async def test_a_fork_of_a_fork_replays_the_turns_of_the_tasks_it_kept(
    client: Client, workflow_id: str, dev_server: DevServer
) -> None:
    async with own_api_and_worker(client) as api:
        api.reply_text("alpha")
        api.reply_text("beta")
        assert (await run_on_queue(client, workflow_id, team_input())).success
        api.stop()
        replayed = {"options": {"models": "recorded"}}
        first = await run_on_queue(
            client,
            f"{workflow_id}-f",
            {"fork": {"run_id": workflow_id, "rerun": ["t2"]}, **replayed},
        )
        assert first.status == "completed", first
        # t1 was kept by the first fork: its turn is in the source's AgentRun, not the fork's
        second = await run_on_queue(
            client,
            f"{workflow_id}-ff",
            {"fork": {"run_id": f"{workflow_id}-f", "rerun": ["t1"]}, **replayed},
        )
    assert second.status == "completed", second.task("t1").error
    assert [t.output for t in second.tasks] == ["alpha", "beta"]
    await assert_replays(client, f"{workflow_id}-ff")


async def test_oma_fork_models_recorded_with_fallback_calls_the_provider_on_a_miss(
    client: Client, workflow_id: str, dev_server: DevServer
) -> None:
    async with own_api_and_worker(client) as api:
        api.reply_text("alpha")
        api.reply_text("beta")
        assert (await run_on_queue(client, workflow_id, team_input())).success
        api.reset()
        api.reply_text("gamma")
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_server.address, "OMA_TASK_QUEUE": QUEUE}
        proc = await run_cmd(
            OMA,
            "fork",
            workflow_id,
            "--no-worker",
            "--json",
            "--models",
            "recorded",
            "--on-miss",
            "fallback",
            "--set",
            "t2.description=do t2 otherwise",
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert [t["output"] for t in result["tasks"]] == ["alpha", "gamma"]
        assert len(api.requests) == 1  # only the miss went to the provider


def tool_team(tool: str) -> dict[str, Any]:
    agent = {"name": "writer", "provider": "anthropic", "system_prompt": "Be brief."}
    return {
        "team": {"name": "rec", "agents": [{**agent, "tools": [tool]}]},
        "tasks": [task("t1", "writer")],
    }


def write_module(path: Path, source: str) -> None:
    """Write the module ``path`` and have the next worker load it anew, as a
    restarted worker process would (a process imports a custom tool once)."""
    path.write_text(source)
    sys.modules.pop(path.stem, None)
    importlib.invalidate_caches()
    load_hook.cache_clear()
    load_custom_tool.cache_clear()


async def test_a_custom_tool_whose_schema_and_docstring_changed_misses_naming_the_tool(
    client: Client, workflow_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    module = tmp_path / "rec_changed_tool.py"
    write_module(
        module,
        'def lookup(key: str) -> str:\n    """Look a key up."""\n    return key.upper()\n',
    )
    async with own_api_and_worker(client) as api:
        api.reply_tool_use("lookup", {"key": "a"})
        api.reply_text("A it is")
        source = await run_on_queue(client, workflow_id, tool_team("rec_changed_tool:lookup"))
        assert source.success, source
    # the same import path: two more parameters and another docstring; a new worker
    write_module(
        module,
        "def lookup(key: str, table: str = 'main', exact: bool = True) -> str:\n"
        '    """Look a key up in a table, exactly or by its prefix."""\n'
        "    return key.upper()\n",
    )
    async with own_api_and_worker(client) as api:
        api.stop()
        forked = await run_on_queue(
            client,
            f"{workflow_id}-f",
            {"fork": {"run_id": workflow_id, "rerun": ["t1"]}, "options": {"models": "recorded"}},
        )
    failed = forked.task("t1")
    assert (forked.status, failed.error_code) == ("failed", "RECORDING_MISS")
    assert failed.error is not None
    assert "agent 'writer', task 't1', model turn 1: run " in failed.error
    assert failed.error.endswith(
        "recorded no turn with this request: the tools differ: 'lookup' changed (its "
        "description or input schema)"
    ), failed.error
    await assert_replays(client, f"{workflow_id}-f")


async def test_a_changed_tool_result_misses_naming_the_tool_result_message(
    client: Client, workflow_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    write_module(
        tmp_path / "rec_reading_tool.py",
        "from pathlib import Path\n\n\n"
        "def lookup(key: str) -> str:\n"
        '    """Look a key up."""\n'
        "    return (Path(__file__).parent / 'value.txt').read_text()\n",
    )
    value = tmp_path / "value.txt"
    value.write_text("one")
    async with own_api_and_worker(client) as api:
        api.reply_tool_use("lookup", {"key": "a"})
        api.reply_text("it is one")
        source = await run_on_queue(client, workflow_id, tool_team("rec_reading_tool:lookup"))
        assert source.success, source
        api.stop()
        value.write_text("two")
        forked = await run_on_queue(
            client,
            f"{workflow_id}-f",
            {"fork": {"run_id": workflow_id, "rerun": ["t1"]}, "options": {"models": "recorded"}},
        )
    failed = forked.task("t1")
    assert (forked.status, failed.error_code) == ("failed", "RECORDING_MISS")
    assert failed.error is not None
    assert "agent 'writer', task 't1', model turn 2: run " in failed.error
    assert failed.error.endswith(
        "recorded no turn with this request: message 3 (user: tool result of 'lookup') "
        "differs from the recording's"
    ), failed.error
    await assert_replays(client, f"{workflow_id}-f")


async def test_a_fork_replays_the_turns_of_the_execution_it_read_on_one_worker(
    client: Client, workflow_id: str
) -> None:
    one_task = {
        "team": team_input()["team"],
        "tasks": [task("t1", "writer")],
    }
    replayed = {"options": {"models": "recorded"}}

    async def fork_output(name: str, execution: str | None = None) -> str | None:
        source = {"run_id": workflow_id, "rerun": ["t1"]}
        if execution is not None:
            source["temporal_run_id"] = execution
        forked = await run_on_queue(client, f"{workflow_id}-{name}", {"fork": source, **replayed})
        assert forked.status == "completed", forked.task("t1").error
        await assert_replays(client, f"{workflow_id}-{name}")
        return forked.task("t1").output

    async with own_api_and_worker(client) as api:
        api.reply_text("first")
        assert (await run_on_queue(client, workflow_id, one_task)).success
        first = (await client.get_workflow_handle(workflow_id).describe()).run_id
        assert await fork_output("a") == "first"  # this worker has read the first's turns
        api.reply_text("second")
        assert (await run_on_queue(client, workflow_id, one_task)).success  # the same workflow id
        api.stop()
        assert await fork_output("b") == "second"  # the latest execution's turns
        assert await fork_output("c", first) == "first"  # the first's, named by its run id
        assert await fork_output("d") == "second"


async def test_a_run_under_its_recordings_workflow_id_replays_the_execution_before_it(
    client: Client, workflow_id: str
) -> None:
    one_task = {"team": team_input()["team"], "tasks": [task("t1", "writer")]}
    async with own_api_and_worker(client) as api:
        api.reply_text("first")
        assert (await run_on_queue(client, workflow_id, one_task)).success
        api.stop()
        # a daily job: the same workflow id, replaying yesterday's turns
        again = parse_team_run_input({**one_task, "options": {"models": {"from": workflow_id}}})
        handle = await start_team_run(client, again, id=workflow_id, task_queue=QUEUE)
        result = await team_result(handle)
    assert result.status == "completed", result.task("t1").error
    assert result.task("t1").output == "first"
    await assert_replays(client, workflow_id)


async def test_a_recording_of_the_older_digest_form_misses_a_turn_that_offers_tools() -> None:
    # examples/recorded/brief was recorded before digests held the tools sent:
    # its turns offer none, which that form says, and replay (the example's
    # own test); a turn that offers a tool cannot be told from a changed one
    run_input = json.loads((ROOT / "examples" / "recorded" / "brief-run.json").read_text())
    run_input["team"]["agents"][1]["tools"] = ["tests.support.tools:add"]
    async with recorded(ROOT / "examples" / "recorded" / "brief") as oma:
        result = await oma.run_tasks(run_input["team"], run_input["tasks"])
    write = result.task("write")
    assert (result.task("research").status, write.error_code) == ("completed", "RECORDING_MISS")
    assert (write.error or "").endswith(
        "recorded no turn with this request: the recording's turns digest their tools in an "
        "older form (a custom tool by its import path, not the description and input schema "
        "the model was sent), which cannot tell whether they changed: record the run again"
    ), write.error


async def test_the_example_regression_test_runs_offline_without_a_key() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = await run_cmd(
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "examples/test_recorded_team.py",
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
