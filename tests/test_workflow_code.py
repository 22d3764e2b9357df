"""A worker reads and compiles its workflow code once, not for every run the
sandbox creates (``oma.runtime.workflow_code``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Replays one recorded AgentRun history four times, as a worker's sandbox
# creates a run for each, and prints how many times the files of the
# workflows package were compiled during the last three.
REPLAYS = """
import asyncio, importlib.machinery, json, sys
from pathlib import Path
from temporalio.client import WorkflowHistory
from oma.runtime import plugin

compiled = []
to_code = importlib.machinery.SourceFileLoader.source_to_code

def counting(self, data, path, **kwargs):
    if "/workflows/" in str(path):
        compiled.append(str(path))
    return to_code(self, data, path, **kwargs)

importlib.machinery.SourceFileLoader.source_to_code = counting

async def main():
    raw = json.loads(Path(sys.argv[1]).read_text())
    replayer = plugin.replayer()
    await replayer.replay_workflow(WorkflowHistory.from_json("agent-run", raw))
    compiled.clear()
    for _ in range(3):
        await replayer.replay_workflow(WorkflowHistory.from_json("agent-run", raw))
    print(len(compiled), sorted(set(compiled)))

asyncio.run(main())
"""


def test_replays_after_the_first_compile_no_workflow_code(tmp_path: Path) -> None:
    # no bytecode cache to read or write: every import would compile its source
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"),
    }
    history = ROOT / "tests" / "histories" / "agent_run_scripted.json"
    out = subprocess.run(
        [sys.executable, "-c", REPLAYS, str(history)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.split(" ", 1)[0] == "0", out.stdout + out.stderr
