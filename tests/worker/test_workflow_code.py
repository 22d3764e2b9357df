"""A worker loads its workflow code once, not for every run the sandbox
creates: passed through the sandbox (``oma.worker.plugin.sandboxed``), or,
in a strict sandbox, compiled once (``oma.worker.workflow_code``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from temporalio.client import Client

from oma import worker as oma_worker
from oma.core.schema.limits import MAX_CONCURRENCY
from oma.worker.plugin import CACHED_WORKFLOWS
from tests.support.paths import HISTORIES, ROOT

# Replays one recorded AgentRun history four times, as a worker's sandbox
# creates a run for each, and prints how many times the files of the
# workflows package were compiled, and executed, during the last three; then
# leaves with os._exit, as `oma` does (oma.cli.app.main): the SDK's Rust core
# can abort the interpreter's teardown (SIGABRT, temporalio/sdk-python#300).
REPLAYS = """
import asyncio, importlib.machinery, json, os, sys
from pathlib import Path
from temporalio.client import WorkflowHistory
from oma.worker import plugin

compiled, executed = [], []
to_code = importlib.machinery.SourceFileLoader.source_to_code
exec_module = importlib.machinery.SourceFileLoader.exec_module

def counting(self, data, path, **kwargs):
    if "/workflows/" in str(path):
        compiled.append(str(path))
    return to_code(self, data, path, **kwargs)

def executing(self, module):
    if "/workflows/" in str(module.__file__):
        executed.append(module.__name__)
    return exec_module(self, module)

importlib.machinery.SourceFileLoader.source_to_code = counting
importlib.machinery.SourceFileLoader.exec_module = executing

async def main():
    raw = json.loads(Path(sys.argv[1]).read_text())
    replayer = plugin.replayer(strict_sandbox=sys.argv[2] == "strict")
    await replayer.replay_workflow(WorkflowHistory.from_json("agent-run", raw))
    compiled.clear(), executed.clear()
    for _ in range(3):
        await replayer.replay_workflow(WorkflowHistory.from_json("agent-run", raw))
    print(len(compiled), len(executed), sorted(set(compiled)))

asyncio.run(main())
sys.stdout.flush()
os._exit(0)
"""


def replays(tmp_path: Path, sandbox: str) -> tuple[int, int]:
    """Compiles and executions of workflow modules over three replays (``REPLAYS``)."""
    # no bytecode cache to read or write: every import would compile its source
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"),
    }
    history = HISTORIES / "agent_run_scripted.json"
    out = subprocess.run(
        [sys.executable, "-c", REPLAYS, str(history), sandbox],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    compiled, executed, _ = out.stdout.split(" ", 2)
    return int(compiled), int(executed)


def test_a_worker_runs_its_workflow_modules_loaded_once(tmp_path: Path) -> None:
    # the sandbox passes oma through: no run imports a module of it again
    assert replays(tmp_path, "default") == (0, 0)


def test_a_strict_sandbox_executes_them_anew_for_each_run_compiled_once(tmp_path: Path) -> None:
    compiled, executed = replays(tmp_path, "strict")
    assert compiled == 0
    assert executed >= 3  # agent_run.py and its helpers, for each of the three runs


async def test_a_worker_caches_a_run_at_full_concurrency_and_its_parents(client: Client) -> None:
    # a cache of MAX_CONCURRENCY runs pushed a fan-out's TeamRun out under its
    # own AgentRuns: each of its workflow tasks then replayed its whole history
    assert CACHED_WORKFLOWS > MAX_CONCURRENCY
    default = oma_worker.build_worker(client, "cache-default")
    larger = oma_worker.build_worker(client, "cache-larger", max_cached_workflows=5_000)
    assert [w.config(active_config=True)["max_cached_workflows"] for w in default.workers] == [
        CACHED_WORKFLOWS
    ] * 2
    assert larger.workers[0].config(active_config=True)["max_cached_workflows"] == 5_000
