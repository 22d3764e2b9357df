"""Forks (docs/fork.md) as the tests make them: process agents whose side
effects are counted in files, a five-task run for them, a goal run's plan,
and a fork run to its result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from temporalio.client import Client

from oma.core.schema.results import TeamRunResult
from tests.support.runs import start_team, task, team_result

COUNTED = r"""
import pathlib, re, sys
prompt = sys.stdin.read()
me = re.search(r"TASK=(\w+)", prompt).group(1)
with open("runs.log", "a") as log:
    log.write(me + "\n")
if me == "t4" and not pathlib.Path("ok").exists():
    sys.stderr.write("t4 needs the file ok\n")
    sys.exit(3)
seen = sorted(set(re.findall(r"done (t\d)", prompt)))
print(f"done {me} after {','.join(seen) or '-'}")
"""
"""A process agent: logs the task it runs to ``runs.log`` (in its ``cwd``),
fails task ``t4`` (exit 3) unless a file ``ok`` exists, and answers with the
upstream outputs its prompt held."""


def counted_agent(cwd: Path, name: str = "worker", **backend: Any) -> dict[str, Any]:
    """A ``COUNTED`` process agent ``name`` in ``cwd``."""
    return {
        "name": name,
        "backend": {
            "kind": "process",
            "command": "python3",
            "args": ["-c", COUNTED],
            "cwd": str(cwd),
            **backend,
        },
    }


def five_tasks(agent: str = "worker") -> list[dict[str, Any]]:
    """t1 -> (t2, t3) -> t4 -> t5."""

    def one(task_id: str, *deps: str) -> dict[str, Any]:
        return task(task_id, agent, *deps, description=f"TASK={task_id}")

    return [one("t1"), one("t2", "t1"), one("t3", "t1"), one("t4", "t2", "t3"), one("t5", "t4")]


def runs(cwd: Path) -> list[str]:
    """The tasks ``COUNTED`` agents ran in ``cwd``, in order."""
    log = cwd / "runs.log"
    return log.read_text().split() if log.exists() else []


async def fork(client: Client, fork_id: str, spec: dict[str, Any], **rest: Any) -> TeamRunResult:
    """The fork ``spec`` (with ``rest`` of the input) run to its result as ``fork_id``."""
    return await team_result(await start_team(client, fork_id, {"fork": spec, **rest}))


GOAL_PLAN = json.dumps(
    [
        {"title": "Research", "description": "find facts", "assignee": "researcher"},
        {
            "title": "Draft",
            "description": "draft it",
            "assignee": "writer",
            "depends_on": ["Research"],
        },
        {
            "title": "Polish",
            "description": "polish it",
            "assignee": "writer",
            "depends_on": ["Draft"],
        },
    ]
)
"""A coordinator's plan: Research by the ``researcher``, then Draft and Polish
by the ``writer``."""
