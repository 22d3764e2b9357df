"""`oma acp`: a team run driven by an editor over the Agent Client Protocol.

A real `oma acp` process, driven by the ACP Python SDK's client side, against
the session's dev server and worker, with scripted models: the order and
content of every update, approvals as permission prompts, a kill mid-run
and `session/load`, `session/cancel`, and bad input."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block

from oma.runtime.dev_server import DevServer
from tests._acp_editor import Editor, editor_with, write_team
from tests._procs import alive

pytestmark = pytest.mark.usefixtures("worker")

PLAN = [
    {
        "title": "Write notes",
        "description": "Write notes.md saying hello.",
        "assignee": "writer",
        "depends_on": [],
    },
    {
        "title": "Review",
        "description": "Review the notes.",
        "assignee": "reviewer",
        "depends_on": ["Write notes"],
    },
]
FINAL = "The notes are written and reviewed: LGTM."


def team(
    approvals: dict[str, Any] | None = None, writer_script: list[Any] | None = None
) -> dict[str, Any]:
    """A goal team: a writer with file_write, a reviewer, a scripted coordinator."""
    write = {
        "type": "tool_use",
        "id": "tu-1",
        "name": "file_write",
        "input": {"path": "notes.md", "content": "hello\n"},
    }
    return {
        "team": {
            "name": "notes",
            "agents": [
                {
                    "name": "writer",
                    "provider": "scripted",
                    "tools": ["file_write"],
                    "script": writer_script or [[write], "Wrote notes.md."],
                },
                {"name": "reviewer", "provider": "scripted", "script": ["LGTM"]},
            ],
        },
        "coordinator": {
            "provider": "scripted",
            "script": [f"```json\n{json.dumps(PLAN)}\n```", FINAL],
        },
        "options": {
            "approvals": approvals
            if approvals is not None
            else {"plan": True, "tools": ["file_write"]}
        },
    }


def statuses(editor: Editor, call_id: str) -> list[str]:
    """The statuses a tool call went through, in order (its start's first)."""
    return [
        u["status"] for u in editor.updates() if u.get("toolCallId") == call_id and u.get("status")
    ]


def last_index(kinds: list[str], prefix: str) -> int:
    return max(i for i, k in enumerate(kinds) if k.startswith(prefix))


def first_index(kinds: list[str], prefix: str) -> int:
    return min(i for i, k in enumerate(kinds) if k.startswith(prefix))


async def test_a_goal_run_streams_its_plan_tasks_approvals_and_answer(
    dev_server: DevServer, tmp_path: Path
) -> None:
    team_file = write_team(tmp_path / "team.json", team())
    async with editor_with(dev_server, tmp_path, "--team", str(team_file)) as editor:
        new = await editor.conn.new_session(cwd=str(tmp_path))
        sid = new.session_id
        assert sid.startswith("team-notes-")
        answer = await editor.conn.prompt(session_id=sid, prompt=[text_block("Write the notes")])
        answered_at = len(editor.wire)
        await asyncio.sleep(1.0)  # nothing may come after the response

    assert answer.stop_reason == "end_turn"
    assert (tmp_path / "notes.md").read_text() == "hello\n"
    kinds = editor.kinds()
    assert len(editor.wire) == answered_at, kinds[answered_at - 1 :]
    # initialize's response, session/new's response, then the commands offered
    assert kinds[:3] == ["response", "response", "available_commands_update::"]
    commands = editor.updates()[0]["availableCommands"]
    assert [c["name"] for c in commands] == ["status", "abort", "approve", "reject"]
    assert kinds[-1] == "response"
    # the plan's thought, the plan, the cards, the plan's approval, in that order
    thought = next(u for u in editor.updates() if u["sessionUpdate"] == "agent_thought_chunk")
    assert thought["content"]["text"].startswith("The coordinator planned 2 tasks:\n1. Write notes")
    assert first_index(kinds, "agent_thought_chunk") < first_index(kinds, "plan")
    assert first_index(kinds, "plan") < first_index(kinds, "tool_call:t1:pending")
    assert first_index(kinds, "tool_call:approval:plan") < first_index(
        kinds, "permission:approval:plan"
    )
    assert first_index(kinds, "permission:approval:plan") < first_index(
        kinds, "tool_call_update:t1:in_progress"
    )
    tool_request = "approval:tool-t1-1"
    assert first_index(kinds, f"permission:{tool_request}") < first_index(
        kinds, "tool_call_update:t1:completed"
    )
    # every card's statuses go forward, and end where the run ended
    assert statuses(editor, "t1") == ["pending", "in_progress", "completed"]
    assert statuses(editor, "t2")[0] == "pending" and statuses(editor, "t2")[-1] == "completed"
    assert statuses(editor, "approval:plan") == ["pending", "completed"]
    assert statuses(editor, tool_request) == ["pending", "completed"]
    # the permission prompts: the options, the plan's content, the tool's input
    plan_prompt, tool_prompt = editor.permissions()
    assert [o["kind"] for o in plan_prompt["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    assert plan_prompt["toolCall"]["title"] == "Approve the plan (2 tasks)"
    assert "1. Write notes (writer)\n2. Review (reviewer) (after t1)" in json.dumps(
        plan_prompt["toolCall"]["content"]
    ).replace("\\n", "\n")
    assert tool_prompt["toolCall"]["rawInput"]["input"] == {
        "path": "notes.md",
        "content": "hello\n",
    }
    assert tool_prompt["toolCall"]["kind"] == "edit"
    # the cards' output, the last plan, the usage, the final message
    done = [
        u
        for u in editor.updates()
        if u.get("toolCallId") == "t1" and u.get("status") == "completed"
    ]
    assert done[-1]["content"][0]["content"]["text"] == "Wrote notes.md."
    plans = [u for u in editor.updates() if u["sessionUpdate"] == "plan"]
    assert [(e["content"], e["status"]) for e in plans[-1]["entries"]] == [
        ("Write notes · writer", "completed"),
        ("Review · reviewer", "completed"),
    ]
    usage = [u for u in editor.updates() if u["sessionUpdate"] == "usage_update"]
    assert usage and usage[-1]["cost"]["currency"] == "USD" and usage[-1]["used"] > 0
    final = [u for u in editor.updates() if u["sessionUpdate"] == "agent_message_chunk"]
    assert final[-1]["content"]["text"] == FINAL
    assert final[-1]["messageId"] == f"{sid}/{final[-1]['messageId'].split('/')[1]}/final"
    assert kinds[-2].startswith("agent_message_chunk")
