"""The Python API end to end, with scripted models: no API key needed.

    source .venv/bin/activate
    python examples/python_api.py

Runs one agent in this process, then a task list and a goal as Temporal
workflows. With nothing listening on TEMPORAL_ADDRESS (default
localhost:7233), ``OpenMultiAgent.embedded()`` starts the embedded dev server
(histories in .oma/temporal.db) and a worker in this process, as ``oma run``
does, and stops them at the end; with a server running (``oma dev``), it uses
that one and its worker. Replace ``"provider": "scripted"`` and the scripts
to run on Claude (``ANTHROPIC_API_KEY``).
"""

from __future__ import annotations

import asyncio
import json

from oma import Agent, OpenMultiAgent

HELPER = {
    "name": "helper",
    "provider": "scripted",
    "script": ["ACP: JSON-RPC between editors and coding agents."],
}

TEAM = {
    "name": "writers",
    "agents": [
        {
            "name": "writer",
            "provider": "scripted",
            "script": ["Durable execution: work survives crashes."],
        },
        {
            "name": "editor",
            "provider": "scripted",
            "script": ["Durable execution: work that survives a crash."],
        },
    ],
}

TASKS = [
    {
        "id": "draft",
        "title": "Draft",
        "description": "Draft a one-line brief.",
        "assignee": "writer",
    },
    {
        "id": "edit",
        "title": "Edit",
        "description": "Tighten the draft.",
        "assignee": "editor",
        "depends_on": ["draft"],
    },
]

# A goal run needs a coordinator: it plans the tasks (its first answer, a JSON
# task list) and synthesizes the result (its second). Without `coordinator=`
# it would run on the team's default model, and a scripted team has none that
# can plan: the run would fail with SCRIPT_EXHAUSTED.
COORDINATOR = {
    "provider": "scripted",
    "script": [
        json.dumps(
            [
                {
                    "title": "Draft",
                    "description": "Draft the brief.",
                    "assignee": "writer",
                    "depends_on": [],
                },
                {
                    "title": "Edit",
                    "description": "Edit the draft.",
                    "assignee": "editor",
                    "depends_on": ["Draft"],
                },
            ]
        ),
        "Durable execution means a run's progress is recorded, so it survives crashes.",
    ],
}


async def main() -> None:
    # outside Temporal: the same agent loop, model calls made directly
    agent = Agent(HELPER)
    print("agent:", (await agent.run("Summarize ACP in one line.")).output)

    # on Temporal: TeamRun workflows on the `oma` task queue; the plan
    # approval is answered in this process
    async with OpenMultiAgent.embedded(on_plan_ready=lambda request: "approve") as oma:
        result = await oma.run_tasks(TEAM, TASKS)
        print("tasks:", result.status, "-", result.task("edit").output)

        result = await oma.run_team(
            TEAM,
            "A one-line brief on durable execution",
            coordinator=COORDINATOR,
            options={"approvals": {"plan": True}},
        )
        print("goal:", result.status, "-", result.final_output)
        print("approved:", [d.request_id for d in result.approval_decisions])


if __name__ == "__main__":
    asyncio.run(main())
