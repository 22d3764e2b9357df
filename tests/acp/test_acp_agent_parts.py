"""`oma acp`'s parts that need no server: the session's team and what the
editor adds to it, a prompt as a goal, and what the editor is shown of a
run's state."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, get_args

import pytest
from acp import image_block, resource_block, text_block
from acp.schema import (
    AudioContentBlock,
    EnvVariable,
    HttpHeader,
    HttpMcpServer,
    McpServerStdio,
    SseMcpServer,
    TextResourceContents,
)

from oma.acp.prompt import ended_words, follow_up_goal, goal_of
from oma.acp.team_file import find_team_file, session_team
from oma.acp.tool_calls import RunPlan, agent_kinds, stop_reason
from oma.core.rules.task_graph import skip_reason
from oma.core.schema.errors import (
    InvalidMessageError,
    InvalidRunInputError,
    TeamFileNotFoundError,
)
from oma.core.schema.results import TeamRunResult, TeamRunStatus
from oma.core.schema.run_input import checked_team_run_input
from oma.core.schema.task import ReusedFrom, TaskState, TaskStatus

TEAM = {
    "team": {
        "name": "t",
        "agents": [
            {"name": "coder", "provider": "scripted", "script": ["ok"], "tools": ["file_write"]},
            {"name": "scout", "provider": "scripted", "script": ["ok"], "cwd": "sub"},
            {"name": "runner", "backend": {"kind": "process", "command": "true", "input": "none"}},
        ],
    }
}


def test_the_team_is_looked_for_in_the_sessions_directory(tmp_path: Path) -> None:
    with pytest.raises(TeamFileNotFoundError) as missing:
        find_team_file(None, tmp_path)
    assert f"{tmp_path / 'oma.json'} or {tmp_path / '.oma' / 'team.json'}" in missing.value.message
    (tmp_path / ".oma").mkdir()
    (tmp_path / ".oma" / "team.json").write_text("{}")
    assert find_team_file(None, tmp_path) == tmp_path / ".oma" / "team.json"
    (tmp_path / "oma.json").write_text("{}")
    assert find_team_file(None, tmp_path) == tmp_path / "oma.json"
    assert find_team_file(tmp_path / "x.json", tmp_path) == tmp_path / "x.json"


def test_a_team_file_with_a_goal_is_refused(tmp_path: Path) -> None:
    (tmp_path / "oma.json").write_text(json.dumps({**TEAM, "goal": "x"}))
    with pytest.raises(InvalidRunInputError) as refused:
        session_team(None, tmp_path, [])
    assert "a team file has no 'goal'" in refused.value.message


def test_a_team_file_error_names_its_code_once(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(TEAM))
    bad["team"]["agents"][0]["provider"] = "nobody"
    (tmp_path / "oma.json").write_text(json.dumps(bad))
    with pytest.raises(InvalidRunInputError) as refused:
        session_team(None, tmp_path, [])
    assert refused.value.message.startswith(
        f"{tmp_path / 'oma.json'}: invalid TeamRun input: team.agents[0].provider: "
    )
    assert str(refused.value).count("INVALID_RUN_INPUT") == 1, str(refused.value)


def test_the_editor_adds_its_directory_and_its_mcp_servers(tmp_path: Path) -> None:
    (tmp_path / "oma.json").write_text(json.dumps(TEAM))
    offered = [
        McpServerStdio(
            name="My Files",
            command="files-mcp",
            args=["--root", "."],
            env=[EnvVariable(name="LEVEL", value="2")],
        ),
        HttpMcpServer(type="http", name="docs", url="http://127.0.0.1:9/mcp", headers=[]),
        HttpMcpServer(
            type="http",
            name="secret",
            url="http://127.0.0.1:9/mcp",
            headers=[HttpHeader(name="Authorization", value="Bearer x")],
        ),
        SseMcpServer(type="sse", name="old", url="http://127.0.0.1:9/sse", headers=[]),
    ]
    team = session_team(None, tmp_path, offered)
    coder, scout, runner = team.raw["team"]["agents"]
    assert coder["cwd"] == str(tmp_path) and scout["cwd"] == str(tmp_path / "sub")
    assert runner["backend"]["cwd"] == str(tmp_path) and "mcp_servers" not in runner
    assert (
        coder["mcp_servers"]
        == scout["mcp_servers"]
        == [
            {
                "name": "My_Files",
                "command": "files-mcp",
                "args": ["--root", "."],
                "env": {"LEVEL": "2"},
            },
            {"name": "docs", "url": "http://127.0.0.1:9/mcp"},
        ]
    )
    assert [n.split(":")[0] for n in team.notes] == [
        "MCP server 'secret' left out",
        "MCP server 'old' left out",
    ]
    assert "credentials" in team.notes[0]
    run = checked_team_run_input(team.run_input("do it"))  # what a prompt starts
    assert [s.name for s in run.team.agents[0].mcp_servers or []] == ["My_Files", "docs"]


def test_a_prompt_becomes_a_goal_with_its_resources_and_attachments(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n"
    blocks = [
        text_block("Fix it"),
        resource_block(TextResourceContents(uri="file:///a.py", text="x = 1")),
        image_block(base64.b64encode(png).decode(), "image/png"),
    ]
    goal = goal_of(blocks, "team-t-1", "p")
    path = ".oma/attachments/team-t-1/p-1.png"
    assert goal.text == (
        'Fix it\n<resource uri="file:///a.py">\nx = 1\n</resource>\n\n'
        f"[image attached: {path} (image/png, 8 bytes)]"
    )
    assert not (tmp_path / ".oma").exists()  # written once the run starts
    goal.write(tmp_path)
    assert (tmp_path / path).read_bytes() == png
    goal.remove(tmp_path)
    assert not (tmp_path / path).exists()


@pytest.mark.parametrize(
    ("blocks", "says"),
    [
        ([text_block("  ")], "the prompt is empty"),
        ([AudioContentBlock(type="audio", data="AA==", mime_type="audio/wav")], "audio block"),
        ([image_block("not base64!", "image/png")], "not base64"),
        # (a refused prompt's images were written before the refusal)
        ([image_block("AA==", "image/png")] * 21, "at most 20 images"),
        ([image_block("AA==", "image/png"), image_block("!", "image/png")], "not base64"),
        (
            [
                image_block("AA==", "image/png"),
                AudioContentBlock(type="audio", data="AA==", mime_type="audio/wav"),
            ],
            "audio block",
        ),
    ],
)
def test_a_prompt_it_cannot_take_is_refused(blocks: list[Any], says: str) -> None:
    with pytest.raises(InvalidMessageError) as refused:
        goal_of(blocks, "s", "p")
    assert says in refused.value.message


def test_agent_kinds() -> None:
    assert agent_kinds(TEAM["team"]) == {"coder": "edit", "scout": "think", "runner": "execute"}


def state(*tasks: TaskState, **fields: Any) -> TeamRunResult:
    return TeamRunResult(success=False, status="running", tasks=list(tasks), **fields)


def test_the_run_plan_sends_only_what_changed() -> None:
    shown = RunPlan()
    kinds = agent_kinds(TEAM["team"])
    task = TaskState(id="t1", title="Write", assignee="coder", status=TaskStatus.PENDING)
    [start] = shown.tool_call_updates(task, kinds)
    assert (start.tool_call_id, start.title, start.kind, start.status) == (
        "t1",
        "Write (coder)",
        "edit",
        "pending",
    )
    assert shown.tool_call_updates(task, kinds) == []
    task.status = TaskStatus.IN_PROGRESS
    [running] = shown.tool_call_updates(task, kinds, "line 1")
    assert (running.status, running.title, running.content[0].content.text) == (
        "in_progress",
        None,
        "line 1",
    )
    assert shown.tool_call_updates(task, kinds) == []  # no new line: the last one stays
    task.status, task.output = TaskStatus.COMPLETED, "all done"
    [done] = shown.tool_call_updates(task, kinds)
    assert (done.status, done.content[0].content.text) == ("completed", "all done")
    skipped = TaskState(id="t2", title="Next", status=TaskStatus.SKIPPED, error="t1 failed")
    [call] = shown.tool_call_updates(skipped, kinds)
    assert (call.status, call.content[0].content.text) == ("failed", "skipped: t1 failed")
    [plan] = shown.plan_update(state(task, skipped))
    assert [(e.content, e.status) for e in plan.entries] == [
        ("Write · coder", "completed"),
        ("Next (skipped)", "completed"),
    ]
    assert shown.plan_update(state(task, skipped)) == []


def test_a_skipped_tasks_tool_call_says_skipped_once() -> None:
    failed = TaskState(id="t1", title="Build", status=TaskStatus.FAILED, error="boom")
    skipped = TaskState(
        id="t2", title="Ship", status=TaskStatus.SKIPPED, error=skip_reason(failed, "")
    )
    [call] = RunPlan().tool_call_updates(skipped, {})
    assert call.content[0].content.text == "skipped: dependency 't1' (Build) failed"


def test_a_task_a_fork_kept_says_it_was_reused() -> None:
    shown = RunPlan()
    kept = TaskState(
        id="t1",
        title="Write",
        assignee="coder",
        status=TaskStatus.COMPLETED,
        output_ref="team-x/t1",
        output_bytes=8,
        reused_from=ReusedFrom(run_id="team-x", task_id="t1"),
    )
    [call] = shown.tool_call_updates(kept, agent_kinds(TEAM["team"]))
    assert (call.status, call.content[0].content.text) == (
        "completed",
        "(reused from run team-x, task t1: not run again)\n\n"
        "(the output, 8 bytes, is in the result of team-x/t1)",
    )
    kept.output, kept.output_ref = "all done", None  # read back once the run ended
    [update] = shown.tool_call_updates(kept, agent_kinds(TEAM["team"]))
    assert update.content[0].content.text.endswith("not run again)\n\nall done")
    [plan] = shown.plan_update(state(kept))
    assert [(e.content, e.status) for e in plan.entries] == [
        ("Write · coder (reused)", "completed")
    ]


@pytest.mark.parametrize(
    ("status", "code", "cancelled", "reason"),
    [
        ("completed", None, False, "end_turn"),
        ("failed", "TASK_FAILED", False, "end_turn"),
        ("rejected", "APPROVAL_REJECTED", False, "refusal"),
        ("failed", "BUDGET_EXCEEDED", False, "max_tokens"),
        ("failed", "COST_BUDGET_EXCEEDED", False, "max_tokens"),
        ("failed", "RUN_TIMEOUT", False, "max_turn_requests"),
        ("cancelled", "ABORTED", False, "cancelled"),
        ("completed", None, True, "cancelled"),
    ],
)
def test_the_stop_reason_says_how_the_run_ended(
    status: str, code: str | None, cancelled: bool, reason: str
) -> None:
    result = TeamRunResult(success=status == "completed", status=status, tasks=[], error_code=code)  # type: ignore[arg-type]
    assert stop_reason(result, cancelled) == reason


def test_how_a_run_ended_reads_as_english_for_every_status() -> None:
    words = {status: ended_words(status) for status in get_args(TeamRunStatus)}
    assert words == {
        "running": "stopped",
        "planned": "was only planned",
        "completed": "completed",
        "failed": "failed",
        "rejected": "was rejected",
        "cancelled": "was cancelled",
    }
    previous = TeamRunResult(
        success=False, status="failed", tasks=[], error="over", error_code="BUDGET_EXCEEDED"
    )
    assert "That run failed. Its outcome:\n\nBUDGET_EXCEEDED: over\n\n" in follow_up_goal(
        "Go on", "Build it", previous
    )


def test_a_line_the_sdk_cannot_take_is_dropped_or_made_a_message() -> None:
    from oma.acp.stdio import checked_line

    request = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}\n'
    assert checked_line(request) == request
    for junk in (b"[1]\n", b"null\n", b'"x"\n', b"{oops\n", b"\n", b'{"id": {}, "result": 1}\n'):
        assert checked_line(junk) is None, junk
    # a response whose error is not an object (the SDK read it with .get and crashed)
    fixed = checked_line(b'{"jsonrpc": "2.0", "id": 0, "error": "boom"}\n')
    assert fixed is not None and json.loads(fixed) == {
        "jsonrpc": "2.0",
        "id": 0,
        "error": {"code": -32603, "message": "boom"},
    }


def test_a_line_too_long_is_refused_by_the_id_its_first_bytes_name() -> None:
    from oma.acp.stdio import TooLong, refusal

    def answer(head: bytes) -> Any:
        line = refusal(TooLong(60_000_000, head))
        return None if line is None else json.loads(line)

    refused = answer(b'{"jsonrpc": "2.0", "id": "p-7", "method": "session/prompt", "params": {"pro')
    assert refused["id"] == "p-7" and refused["error"]["code"] == -32600
    assert refused["error"]["data"]["code"] == "ACP_MESSAGE_TOO_LARGE"
    assert "is 60000000 bytes" in refused["error"]["data"]["message"]
    assert answer(b' {"id":12,"method":"x"')["id"] == 12
    for nameless in (
        b'{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s", "x": "AAA',
        b'{"params": {"id": 3, "data": "AAAA',  # an id in params is not the request's
        b'{"id": true, "method": "x"}',
        b"[1, 2",
        b"\xff\xfe not json",
    ):
        assert answer(nameless) is None, nameless
