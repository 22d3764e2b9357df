"""`oma acp`: a team run driven by an editor over the Agent Client Protocol.

A real `oma acp` process, driven by the ACP Python SDK's client side, against
the session's dev server and worker, with scripted models: the order and
content of every update, approvals as permission prompts, a kill mid-run
and `session/load`, `session/cancel`, and bad input."""

from __future__ import annotations

import asyncio
import base64
import getpass
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, image_block, text_block

from oma.acp.tool_calls import TOOL_CALL_OUTPUT_CHARS
from oma.core.contracts.names import QueryName
from oma.core.schema.limits import cut_text
from oma.runtime.dev_server import DevServer
from tests.support.acp_editor import (
    FINAL,
    OMA,
    PLAN,
    Editor,
    allow_once,
    editor_with,
    notes_team,
    oma_env,
    write_team,
)
from tests.support.procs import alive

pytestmark = pytest.mark.usefixtures("worker")


def statuses(editor: Editor, call_id: str) -> list[str]:
    """The statuses a tool call went through, in order (its start's first)."""
    return [
        u["status"] for u in editor.updates() if u.get("toolCallId") == call_id and u.get("status")
    ]


def tool_call_texts(editor: Editor, call_id: str) -> list[tuple[str, str]]:
    """The text of each update of a tool call that gave its content, with the
    call's status then: ``(status, text)``, in order."""
    status, texts = "", []
    for u in editor.updates():
        if u.get("toolCallId") != call_id:
            continue
        status = u.get("status") or status
        if u.get("content"):
            texts.append((status, u["content"][0]["content"]["text"]))
    return texts


def last_index(kinds: list[str], prefix: str) -> int:
    return max(i for i, k in enumerate(kinds) if k.startswith(prefix))


def first_index(kinds: list[str], prefix: str) -> int:
    return min(i for i, k in enumerate(kinds) if k.startswith(prefix))


async def test_a_goal_run_streams_its_plan_tasks_approvals_and_answer(
    dev_server: DevServer, tmp_path: Path
) -> None:
    team_file = write_team(tmp_path / "team.json", notes_team())
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
    assert [c["name"] for c in commands] == ["status", "abort", "approve", "reject", "retry"]
    assert kinds[-1] == "response"
    # the plan's thought, the plan, the tool calls, the plan's approval, in that order
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
    # every tool call's statuses go forward, and end where the run ended
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
    # the tool calls' output, the last plan, the usage, the final message
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


class Pending:
    """Permission answers the test gives when it chooses (``release``)."""

    def __init__(self) -> None:
        self.asked: dict[str, asyncio.Future[str | None]] = {}

    def __call__(self, call: Any) -> asyncio.Future[str | None]:
        return self.asked.setdefault(call.tool_call_id, asyncio.get_running_loop().create_future())

    def release(self, call_id: str, option: str | None) -> None:
        self.asked[call_id].set_result(option)


async def test_a_killed_oma_acp_loses_nothing_and_session_load_picks_the_run_up(
    dev_server: DevServer, tmp_path: Path
) -> None:
    team_file = write_team(tmp_path / "team.json", notes_team())
    held = Pending()
    async with editor_with(dev_server, tmp_path, "--team", str(team_file), answer=held) as first:
        sid, turn = await prompting(first, tmp_path)
        await first.wait_for(lambda: first.permissions(), "the plan's permission prompt")
        pid = first.process.pid
        os.kill(pid, signal.SIGKILL)
        await first.process.wait()
        assert not alive(pid)
        with pytest.raises(Exception):  # noqa: B017 (the connection's own error: the agent is gone)
            await asyncio.wait_for(turn, 10)

    async with editor_with(dev_server, tmp_path, "--team", str(team_file)) as second:
        await second.conn.load_session(cwd=str(tmp_path), session_id=sid)
        loaded_at = len(second.wire)
        final = await second.wait_for(
            lambda: [u for u in second.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"],
            "the final message",
        )
        kinds = second.kinds()

    # before load's response: the prompt, the plan and the tool calls as they stand
    loaded_at = max(i for i, k in enumerate(kinds[:loaded_at]) if k == "response") + 1
    replay = kinds[:loaded_at]
    assert replay[1:].index("user_message_chunk::") < replay.index("plan::")
    assert "tool_call:t1:pending" in replay and "tool_call:t2:pending" in replay
    assert not any(k.startswith(("permission", "tool_call:approval")) for k in replay)
    # after it: the open approval asked again (its tool call first), then the rest of the run
    after = kinds[loaded_at:]
    assert after.index("tool_call:approval:plan:pending") < after.index("permission:approval:plan")
    assert after.count("permission:approval:plan") == 1
    assert "permission:approval:tool-t1-1" in kinds[loaded_at:]
    assert statuses(second, "t1")[-1] == "completed" and statuses(second, "t2")[-1] == "completed"
    assert final[-1]["content"]["text"] == FINAL
    assert (tmp_path / "notes.md").read_text() == "hello\n"
    user = next(u for u in second.updates(sid) if u["sessionUpdate"] == "user_message_chunk")
    assert user["content"]["text"] == "Write the notes"


async def test_session_cancel_aborts_the_run_and_the_prompt_ends_cancelled(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    team_file = write_team(tmp_path / "team.json", notes_team())
    held = Pending()
    async with editor_with(dev_server, tmp_path, "--team", str(team_file), answer=held) as editor:
        sid, turn = await prompting(editor, tmp_path)
        await editor.wait_for(lambda: editor.permissions(), "the plan's permission prompt")
        await editor.conn.cancel(session_id=sid)
        held.release("approval:plan", None)  # what a client answers a prompt once it cancelled
        answer = await asyncio.wait_for(turn, 30)
    assert answer.stop_reason == "cancelled"
    state = await client.get_workflow_handle(sid).query(QueryName.STATE)
    assert state["status"] == "cancelled" and state["error_code"] == "ABORTED"
    assert said(editor, sid) == [f"The run was cancelled (ABORTED): {state['error']}"]
    assert statuses(editor, "approval:plan") == ["pending", "failed"]
    assert not (tmp_path / "notes.md").exists()


async def test_a_cancel_sent_as_the_editor_quits_still_aborts_the_run(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    team_file = write_team(tmp_path / "team.json", notes_team())
    held = Pending()
    async with editor_with(dev_server, tmp_path, "--team", str(team_file), answer=held) as editor:
        sid, turn = await prompting(editor, tmp_path)
        await editor.wait_for(lambda: editor.permissions(), "the plan's permission prompt")
        # the editor quits right after its stop button: the open
        # prompt answered cancelled, the cancel, and the end of input at once
        [asked] = [m for m in editor.wire if m.get("method") == "session/request_permission"]
        answered = {
            "jsonrpc": "2.0",
            "id": asked["id"],
            "result": {"outcome": {"outcome": "cancelled"}},
        }
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        editor.process.stdin.write(
            b"".join(json.dumps(m).encode() + b"\n" for m in (answered, cancel))
        )
        editor.process.stdin.close()
        assert await asyncio.wait_for(editor.process.wait(), 30) == 0
        turn.cancel()
    handle = client.get_workflow_handle(sid)
    for _ in range(100):
        state = await handle.query(QueryName.STATE)
        if state["status"] != "running":
            break
        await asyncio.sleep(0.1)
    assert (state["status"], state["error_code"]) == ("cancelled", "ABORTED")


async def test_an_allow_that_comes_after_the_cancel_starts_nothing(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    # the stop button, then an "allow" the editor sent after it: the
    # decision raced the abort, and the task ran in about half the tries;
    # eight sessions at once, so that the race, if it is there, is seen
    team_file = write_team(tmp_path / "team.json", notes_team(approvals={"dispatch": ["writer"]}))
    cwds = [tmp_path / f"s{n}" for n in range(8)]
    async with editor_with(
        dev_server, tmp_path, "--team", str(team_file), answer=Pending()
    ) as editor:
        sessions = []
        for cwd in cwds:
            cwd.mkdir()
            sessions.append(await prompting(editor, cwd))
        sids = [sid for sid, _ in sessions]
        asked = await editor.wait_for(
            lambda: len(editor.permissions()) == len(sids) and editor.permissions(),
            "every session's dispatch prompt",
        )
        requests = {
            m["params"]["sessionId"]: m["id"]
            for m in editor.wire
            if m.get("method") == "session/request_permission"
        }
        for sid in sids:
            cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
            allow = {
                "jsonrpc": "2.0",
                "id": requests[sid],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
            }
            editor.process.stdin.write(
                b"".join(json.dumps(m).encode() + b"\n" for m in (cancel, allow))
            )
        answers = await asyncio.wait_for(asyncio.gather(*(turn for _, turn in sessions)), 60)
    assert {p["toolCall"]["toolCallId"] for p in asked} == {"t1"}
    assert [a.stop_reason for a in answers] == ["cancelled"] * len(sids)
    for sid, cwd in zip(sids, cwds, strict=True):
        state = await client.get_workflow_handle(sid).query(QueryName.STATE)
        assert (state["status"], state["error_code"]) == ("cancelled", "ABORTED")
        assert state["tasks"][0]["status"] == "skipped"
        assert not (cwd / "notes.md").exists()
        assert state["approval_decisions"] == []  # the late allow was not sent


async def test_a_cancel_sent_with_the_prompt_aborts_the_run_once_it_started(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    # a cancel that came while the prompt still started the run was dropped:
    # the run went on to its end
    team_file = write_team(tmp_path / "team.json", notes_team())
    async with editor_with(
        dev_server, tmp_path, "--team", str(team_file), answer=Pending()
    ) as editor:
        sid = (await editor.conn.new_session(cwd=str(tmp_path))).session_id
        prompt = {
            "jsonrpc": "2.0",
            "id": 1000,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "Write the notes"}]},
        }
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        both = b"".join(json.dumps(m).encode() + b"\n" for m in (prompt, cancel))
        editor.process.stdin.write(both)  # the stop button right after Enter
        [answer] = await editor.wait_for(
            lambda: [m for m in editor.wire if m.get("id") == 1000 and "method" not in m],
            "the prompt's answer",
        )
    assert answer["result"]["stopReason"] == "cancelled"
    state = await client.get_workflow_handle(sid).query(QueryName.STATE)
    assert (state["status"], state["error_code"]) == ("cancelled", "ABORTED")


async def test_prompts_sent_together_start_one_run(dev_server: DevServer, tmp_path: Path) -> None:
    team_file = write_team(tmp_path / "team.json", notes_team(approvals={}))
    async with editor_with(dev_server, tmp_path, "--team", str(team_file)) as editor:
        sid = (await editor.conn.new_session(cwd=str(tmp_path))).session_id
        answers = await asyncio.gather(
            *(editor.conn.prompt(session_id=sid, prompt=[text_block(f"Go {n}")]) for n in range(3)),
            return_exceptions=True,
        )
    [ran] = [a for a in answers if not isinstance(a, Exception)]
    assert ran.stop_reason == "end_turn"
    refused = [a for a in answers if isinstance(a, RequestError)]
    assert len(refused) == 2
    # (not "started elsewhere": it was this session's own prompt)
    assert all(r.data["code"] == "ACP_SESSION_BUSY" for r in refused)
    assert all("the session's run" in str(r) and "is still going" in str(r) for r in refused)


async def test_a_rejected_dispatch_ends_the_prompt_refused_saying_so_once(
    dev_server: DevServer, tmp_path: Path
) -> None:
    team_file = write_team(tmp_path / "team.json", notes_team(approvals={"dispatch": "all"}))

    def reject_the_review(call: Any) -> str:
        return "reject_once" if call.tool_call_id == "t2" else "allow_once"

    async with editor_with(
        dev_server, tmp_path, "--team", str(team_file), answer=reject_the_review
    ) as editor:
        sid = (await editor.conn.new_session(cwd=str(tmp_path))).session_id
        answer = await editor.conn.prompt(session_id=sid, prompt=[text_block("Write the notes")])
    assert answer.stop_reason == "refusal"
    assert [p["toolCall"]["toolCallId"] for p in editor.permissions()] == ["t1", "t2"]
    assert statuses(editor, "t2")[-1] == "failed"
    [final] = [u for u in editor.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
    # (the error was said twice: once as how the run ended, once as its outcome)
    assert final["content"]["text"] == (
        f"The run was rejected (APPROVAL_REJECTED): rejected: dispatch-t2 by {getpass.getuser()}"
    )


async def test_a_plan_that_fails_ends_the_turn_saying_the_run_failed(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    # a run that failed INVALID_PLAN (no valid plan after the correction
    # turn) has no result: the editor was told the run was cancelled,
    # with stopReason cancelled, and the next prompt's context said so too
    config = notes_team(approvals={})
    config["coordinator"]["script"] = ["No plan, sorry.", "Still no plan."] * 2
    team_file = write_team(tmp_path / "team.json", config)
    async with editor_with(dev_server, tmp_path, "--team", str(team_file)) as editor:
        sid = (await editor.conn.new_session(cwd=str(tmp_path))).session_id
        first = await editor.conn.prompt(session_id=sid, prompt=[text_block("Write the notes")])
        told = said(editor, sid)
        again = await editor.conn.prompt(session_id=sid, prompt=[text_block("Try again")])
    async with editor_with(dev_server, tmp_path, "--team", str(team_file)) as loaded:
        await loaded.conn.load_session(cwd=str(tmp_path), session_id=sid)
        await loaded.wait_for(lambda: said(loaded, sid)[1:], "both runs' answers")
        replayed = said(loaded, sid)
    assert (first.stop_reason, again.stop_reason) == ("end_turn", "end_turn")
    # session/load replays the first run's outcome, and draws the second as it ended
    assert replayed[0].startswith("INVALID_PLAN: the coordinator's plan is invalid"), replayed
    assert replayed[1].startswith("The run failed (INVALID_PLAN): "), replayed
    assert len(told) == 1
    assert told[0].startswith(
        "The run failed (INVALID_PLAN): the coordinator's plan is invalid after one "
        "correction turn: "
    ), told
    state = await client.get_workflow_handle(sid).query(QueryName.STATE)
    assert (
        "That run failed. Its outcome:\n\nINVALID_PLAN: the coordinator's plan" in (state["goal"])
    )


async def test_a_dispatch_decided_elsewhere_is_withdrawn_and_its_tool_call_says_who_decided(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    # the withdrawn editor's tool call went on saying "waiting for approval"
    # while the task ran: nothing said who had decided
    from oma.client.approvals import pending, send_decision
    from oma.core.schema.approvals import Reviewer

    config = notes_team(approvals={"dispatch": ["writer"], "tools": ["file_write"]})
    team_file = write_team(tmp_path / "team.json", config)
    held = Pending()
    async with editor_with(dev_server, tmp_path, "--team", str(team_file), answer=held) as editor:
        sid, turn = await prompting(editor, tmp_path)
        [asked] = await editor.wait_for(lambda: editor.permissions(), "the dispatch's prompt")
        handle = client.get_workflow_handle(sid)
        [request] = await pending(handle)
        bob = Reviewer(id="bob", display_name="bob via Zed")
        await send_decision(handle, request, "approve", bob, None)
        [withdrawn] = await editor.wait_for(
            lambda: [m for m in editor.wire if m.get("method") == "$/cancel_request"],
            "the dispatch's prompt withdrawn",
        )
        await editor.wait_for(lambda: editor.permissions()[1:], "the writer's tool call asked")
        shown = tool_call_texts(editor, "t1")
        held.release("approval:tool-t1-1", "allow_once")
        answer = await asyncio.wait_for(turn, 30)
    assert asked["toolCall"]["toolCallId"] == "t1"
    asked_id = next(m["id"] for m in editor.wire if m.get("method") == "session/request_permission")
    assert withdrawn["params"] == {"requestId": asked_id}
    assert shown[0] == ("pending", "waiting for approval")
    assert "approved by bob via Zed" in [text for _, text in shown[1:]], shown
    assert answer.stop_reason == "end_turn"
    assert statuses(editor, "t1")[-1] == "completed"


async def test_a_follow_up_prompt_runs_again_with_the_previous_outcome_and_sessions_list(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    (tmp_path / "oma.json").write_text(json.dumps(notes_team(approvals={})))  # found in the cwd
    image = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really").decode()
    async with editor_with(dev_server, tmp_path) as editor:
        sid = (await editor.conn.new_session(cwd=str(tmp_path))).session_id
        first = await editor.conn.prompt(session_id=sid, prompt=[text_block("Write the notes")])
        second = await editor.conn.prompt(
            session_id=sid,
            prompt=[text_block("Now add a title"), image_block(image, "image/png")],
        )
        await editor.conn.prompt(session_id=sid, prompt=[text_block("/status")])
        listed = await editor.conn.list_sessions(cwd=str(tmp_path))
        elsewhere = await editor.conn.list_sessions(cwd=str(tmp_path / "elsewhere"))
    assert (first.stop_reason, second.stop_reason) == ("end_turn", "end_turn")
    state = await client.get_workflow_handle(sid).query(QueryName.STATE)
    attached = tmp_path / ".oma" / "attachments" / sid
    [png] = list(attached.iterdir())
    assert png.read_bytes() == b"\x89PNG\r\n\x1a\nnot really"
    assert state["goal"] == (
        "Earlier in this session the team was asked:\n\nWrite the notes\n\n"
        f"That run completed. Its outcome:\n\n{FINAL}\n\n"
        "Now, building on that:\n\n"
        f"Now add a title\n[image attached: {png.relative_to(tmp_path)} (image/png, 18 bytes)]"
    )
    assert [(s.session_id, s.cwd, s.title) for s in listed.sessions] == [
        (sid, str(tmp_path), "Now add a title")
    ]
    # /status: the goal as typed, not the follow-up's context before it
    assert said(editor, sid)[-1].splitlines()[:2] == [
        f"Run {sid}: completed (Temporal: completed)",
        "Goal: Now add a title",
    ]
    assert elsewhere.sessions == []


async def test_bad_input_is_a_clear_error_and_the_agent_goes_on(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    bad = notes_team()
    bad["team"]["agents"][0]["provider"] = "nobody"
    bad_file = write_team(tmp_path / "bad.json", bad)
    run_file = write_team(tmp_path / "run.json", {**bad, "goal": "x"})
    ran = subprocess.run(
        [OMA, "run", str(run_file)], capture_output=True, text=True, check=False, timeout=60
    )
    said_by_oma_run = ran.stderr.strip().removeprefix(f"error: {run_file}: ")
    assert said_by_oma_run.startswith("INVALID_RUN_INPUT: invalid TeamRun input: ")
    empty = tmp_path / "empty"
    empty.mkdir()
    good = write_team(tmp_path / "team.json", notes_team())
    held = Pending()
    async with editor_with(dev_server, tmp_path, "--team", str(bad_file)) as editor:
        with pytest.raises(RequestError) as invalid:
            await editor.conn.new_session(cwd=str(tmp_path))
    assert invalid.value.code == -32602
    assert invalid.value.data["code"] == "INVALID_RUN_INPUT"
    # oma run's message after the file's path; the code named once
    message = said_by_oma_run.removeprefix("INVALID_RUN_INPUT: ")
    assert invalid.value.data["message"] == f"{bad_file}: {message}"
    assert str(invalid.value) == f"INVALID_RUN_INPUT: {bad_file}: {message}"

    async with editor_with(dev_server, empty) as editor:
        with pytest.raises(RequestError) as missing:
            await editor.conn.new_session(cwd=str(empty))
        with pytest.raises(RequestError) as unknown:
            await editor.conn.load_session(cwd=str(empty), session_id="team-nobody-0")
        with pytest.raises(RequestError) as unopened:
            await editor.conn.prompt(session_id="team-nobody-0", prompt=[text_block("hi")])
    assert missing.value.data["code"] == "TEAM_FILE_NOT_FOUND"
    assert str(empty / "oma.json") in str(missing.value)
    assert (unknown.value.code, unknown.value.data["code"]) == (-32002, "ACP_SESSION_UNKNOWN")
    assert unopened.value.data["code"] == "ACP_SESSION_UNKNOWN"

    async with editor_with(dev_server, tmp_path, "--team", str(good), answer=held) as editor:
        sid, turn = await prompting(editor, tmp_path)
        await editor.wait_for(lambda: editor.permissions(), "the plan's permission prompt")
        with pytest.raises(RequestError) as busy:
            await editor.conn.prompt(session_id=sid, prompt=[text_block("something else")])
        status = await editor.conn.prompt(session_id=sid, prompt=[text_block("/status")])
        said = [u for u in editor.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
        aborted = await editor.conn.prompt(session_id=sid, prompt=[text_block("/abort enough")])
        held.release("approval:plan", None)
        answer = await asyncio.wait_for(turn, 30)
    assert busy.value.data["code"] == "ACP_SESSION_BUSY"
    assert status.stop_reason == aborted.stop_reason == "end_turn"
    assert said[-1]["content"]["text"].startswith(f"Run {sid}: running (Temporal: running)\n")
    assert "Waiting for approval: plan (plan)" in said[-1]["content"]["text"]
    assert answer.stop_reason == "cancelled"
    state = await client.get_workflow_handle(sid).query(QueryName.STATE)
    assert (state["status"], state["error"]) == ("cancelled", "aborted: enough")


async def test_lines_that_are_not_json_rpc_messages_leave_the_agent_serving(
    dev_server: DevServer, tmp_path: Path
) -> None:
    # JSON that is not a message ended the SDK's receive loop: an array or a
    # string crashed the process, a `null` was taken for the end of input
    junk = [
        b"[1, 2, 3]",
        b'"a string"',
        b"5",
        b"null",
        b'{"jsonrpc": "2.0", "id": [1], "result": 1}',
        b'{"jsonrpc": "2.0", "id": 1, "method": null}',
        b"not json at all",
    ]
    proc = await asyncio.create_subprocess_exec(
        OMA,
        "acp",
        env=oma_env(dev_server),
        cwd=tmp_path,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    initialize = {"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": 1}}
    answers = []
    for n, line in enumerate(junk):
        proc.stdin.write(line + b"\n" + json.dumps({**initialize, "id": n}).encode() + b"\n")
        await proc.stdin.drain()
        answers.append(json.loads(await asyncio.wait_for(proc.stdout.readline(), 30)))
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    stderr = (await proc.stderr.read()).decode()
    assert [a["id"] for a in answers] == list(range(len(junk)))
    assert all(a["result"]["agentCapabilities"]["loadSession"] for a in answers)
    assert stderr.count("dropped a line from the client") == len(junk), stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set size so far (``VmHWM``), in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    [line] = [line for line in status.splitlines() if line.startswith("VmHWM:")]
    return int(line.split()[1])


async def test_a_line_over_the_message_limit_is_refused_and_the_memory_stays_bounded(
    dev_server: DevServer, tmp_path: Path
) -> None:
    # a prompt of 200 MiB (ten 20 MiB images, base64) in one line: read and
    # let go of in chunks, answered with an error naming the limit; the
    # agent serves the next request
    from oma.acp.stdio import MAX_MESSAGE_BYTES

    proc = await asyncio.create_subprocess_exec(
        OMA,
        "acp",
        env=oma_env(dev_server),
        cwd=tmp_path,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=1024 * 1024,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    initialize = {"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": 1}}
    try:
        proc.stdin.write(json.dumps({**initialize, "id": 1}).encode() + b"\n")
        await proc.stdin.drain()
        assert json.loads(await asyncio.wait_for(proc.stdout.readline(), 30))["id"] == 1
        before = peak_rss_kib(proc.pid)
        image = {"type": "image", "mimeType": "image/png", "data": "A" * (20 * 1024 * 1024)}
        head = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/prompt",
                "params": {"sessionId": "s", "prompt": [image] * 10},
            }
        ).encode()
        size = len(head) + 1
        assert size > 4 * MAX_MESSAGE_BYTES
        for start in range(0, len(head), 1024 * 1024):
            proc.stdin.write(head[start : start + 1024 * 1024])
            await proc.stdin.drain()
        del head
        proc.stdin.write(b"\n" + json.dumps({**initialize, "id": 3}).encode() + b"\n")
        await proc.stdin.drain()
        refused = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        served = json.loads(await asyncio.wait_for(proc.stdout.readline(), 30))
        grown_kib = peak_rss_kib(proc.pid) - before
    finally:
        if proc.returncode is None:
            proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    stderr = (await proc.stderr.read()).decode()
    assert refused["id"] == 2 and refused["error"]["code"] == -32600, refused
    assert refused["error"]["data"]["code"] == "ACP_MESSAGE_TOO_LARGE"
    assert f"{size} bytes" in refused["error"]["message"]
    assert f"at most {MAX_MESSAGE_BYTES} bytes" in refused["error"]["message"]
    assert served["id"] == 3 and served["result"]["agentCapabilities"]["loadSession"]
    # the first MAX_MESSAGE_BYTES of the line are held until it is past them
    # (before the limit: 600 MiB, three times the line)
    limit_kib = MAX_MESSAGE_BYTES // 1024
    assert grown_kib < limit_kib + 16 * 1024, f"the peak RSS grew by {grown_kib} KiB"
    assert "Traceback" not in stderr, stderr[-3000:]


async def test_a_session_cwd_that_is_not_an_existing_absolute_directory_is_refused(
    dev_server: DevServer, tmp_path: Path
) -> None:
    team_file = write_team(tmp_path / "team.json", notes_team(approvals={}))
    missing = tmp_path / "no" / "such" / "dir"
    async with editor_with(dev_server, tmp_path, "--team", str(team_file)) as editor:
        refused = {}
        for cwd in (str(missing), "relative/dir", "", str(team_file)):
            with pytest.raises(RequestError) as err:
                await editor.conn.new_session(cwd=cwd)
            refused[cwd] = err.value
        with pytest.raises(RequestError) as loading:
            await editor.conn.load_session(cwd=str(missing), session_id="team-notes-0")
    assert {(e.code, e.data["code"]) for e in refused.values()} == {
        (-32602, "ACP_SESSION_CWD_INVALID")
    }
    assert str(refused[str(missing)]).endswith(f"{missing} does not exist: the team works there")
    assert "is not an absolute path" in str(refused["relative/dir"])
    assert "is not a directory" in str(refused[str(team_file)])
    assert loading.value.data["code"] == "ACP_SESSION_CWD_INVALID"
    assert not (tmp_path / "no").exists()


async def refused_with_an_image(
    dev_server: DevServer, tmp_path: Path, text: str
) -> tuple[RequestError, list[str]]:
    """A prompt of ``text`` and an image that ``oma acp`` refuses: its error,
    and what the agent says to ``/status`` after it (the session goes on)."""
    team_file = write_team(tmp_path / "team.json", notes_team(approvals={}))
    image = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really").decode()
    async with editor_with(dev_server, tmp_path, "--team", str(team_file)) as editor:
        sid = (await editor.conn.new_session(cwd=str(tmp_path))).session_id
        with pytest.raises(RequestError) as err:
            await editor.conn.prompt(
                session_id=sid, prompt=[text_block(text), image_block(image, "image/png")]
            )
        status = await editor.conn.prompt(session_id=sid, prompt=[text_block("/status")])
    assert status.stop_reason == "end_turn"
    return err.value, said(editor, sid)


async def test_a_prompt_whose_goal_is_too_large_for_a_run_is_refused_naming_its_limit(
    dev_server: DevServer, tmp_path: Path
) -> None:
    # a goal of 1.5 MB: a goal run holds it three times; the run once took
    # it and failed at its end (RUN_STATE_TOO_LARGE), its state past what a
    # query answers. The prompt's image is not written: a refused prompt
    # leaves nothing behind (it once was, before the goal's size was checked)
    err, told = await refused_with_an_image(dev_server, tmp_path, "x" * 1_500_000)
    assert err.code == -32602
    assert err.data["code"] == "INVALID_RUN_INPUT"
    assert "this run's goal may be at most" in err.data["message"]
    assert not (tmp_path / ".oma" / "attachments").exists()
    assert told[-1].startswith("No run in this session yet")


async def test_a_prompt_whose_attachments_cannot_be_written_says_so_and_starts_nothing(
    dev_server: DevServer, tmp_path: Path
) -> None:
    # a file where the attachments' directory goes (as a full disk or a
    # permission would, even for root): a named error, not an internal one
    (tmp_path / ".oma").write_text("a file, not a directory")
    err, told = await refused_with_an_image(dev_server, tmp_path, "look")
    assert err.data["code"] == "ACP_ATTACHMENT_WRITE_FAILED"
    assert f"could not be written under {tmp_path}" in err.data["message"]
    assert "no run was started" in err.data["message"]
    assert told[-1].startswith("No run in this session yet")


async def test_a_run_holding_more_than_the_payload_limit_is_still_shown_and_asks(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    # nine process tasks print 250 000 bytes each (under a task's 256 KiB):
    # while the run goes on, its state holds every output whole, past
    # Temporal's payload limit; its state query answers with outputs kept by
    # reference, so /status answers, the editor sees every task complete
    # with its output (read back), and the writer's tool call still asks.
    # One printer lingers after its output until the test saw its tool call in
    # progress, as a busy machine shows every printer: there its tool call holds
    # its latest line (a heartbeat's), not its output (the test once took
    # that line for an output cut wrong, and failed on a loaded machine)
    printed = 250_000
    plan = [
        {"title": f"Print {n}", "description": "Print.", "assignee": "printer", "depends_on": []}
        for n in range(9)
    ] + [{**PLAN[0], "depends_on": []}]
    config = notes_team(approvals={"tools": ["file_write"]})
    config["coordinator"]["script"][0] = f"```json\n{json.dumps(plan)}\n```"
    printer = (
        f"import os, sys, time; sys.stdout.write('x' * {printed}); sys.stdout.flush()\n"
        "try:\n    os.close(os.open('lingers', os.O_CREAT | os.O_EXCL))\n"
        "except FileExistsError:\n    sys.exit()\n"
        "for _ in range(1200):\n"
        "    if os.path.exists('go'):\n        break\n"
        "    time.sleep(0.05)\n"
    )
    config["team"]["agents"].append(
        {
            "name": "printer",
            "backend": {
                "kind": "process",
                "command": sys.executable,
                "args": ["-c", printer],
                "input": "none",
            },
        }
    )
    team_file = write_team(tmp_path / "team.json", config)
    held = Pending()
    printers = [f"t{n}" for n in range(1, 10)]
    async with editor_with(dev_server, tmp_path, "--team", str(team_file), answer=held) as editor:
        sid, turn = await prompting(editor, tmp_path)
        await editor.wait_for(
            lambda: any(
                s == "in_progress" for t in printers for s, _ in tool_call_texts(editor, t)
            ),
            "a printer's tool call in progress, with its latest line",
            60,
        )
        (tmp_path / "go").touch()
        await editor.wait_for(
            lambda: all(statuses(editor, t)[-1:] == ["completed"] for t in printers),
            "every printer's tool call completed",
            60,
        )
        [asked] = await editor.wait_for(
            lambda: editor.permissions(), "the tool's permission prompt"
        )
        answer = await asyncio.wait_for(client.get_workflow_handle(sid).query(QueryName.STATE), 10)
        status = await editor.conn.prompt(session_id=sid, prompt=[text_block("/status")])
        told = said(editor, sid)[-1]
        held.release(asked["toolCall"]["toolCallId"], "allow_once")
        done = await asyncio.wait_for(turn, 60)
    assert any(t.get("output_bytes") == printed for t in answer["tasks"])  # kept by reference
    assert status.stop_reason == done.stop_reason == "end_turn"
    assert told.startswith(f"Run {sid}: running (Temporal: running)\n"), told
    for n, t in enumerate(printers):
        assert f"\n- {t} Print {n} · printer: completed\n" in told
    assert "\n- t10 Write notes · writer: in_progress\n" in told
    assert asked["toolCall"]["title"] == "writer: file_write in task t10"
    # each printer's tool call shows, while it runs, its latest line (at most the
    # 200 characters of a heartbeat), then its output (cut to a tool call's
    # length), never a reference
    shown = [u for u in editor.updates(sid) if u.get("toolCallId") in printers and u.get("content")]
    assert shown and "is in the result of" not in json.dumps(shown)
    whole = cut_text("x" * printed, TOOL_CALL_OUTPUT_CHARS)
    for t in printers:
        texts = tool_call_texts(editor, t)
        assert texts[-1] == ("completed", whole)
        assert {text for status, text in texts if status == "completed"} == {whole}
        lines = [text for status, text in texts if status != "completed"]
        assert all(0 < len(line) <= 200 and line == "x" * len(line) for line in lines), lines
    assert any(
        status == "in_progress" for t in printers for status, _ in tool_call_texts(editor, t)
    )
    assert said(editor, sid)[-1] == FINAL
    assert (tmp_path / "notes.md").read_text() == "hello\n"


async def test_a_client_that_cannot_ask_is_told_to_approve_with_a_command(
    dev_server: DevServer, tmp_path: Path
) -> None:
    team_file = write_team(tmp_path / "team.json", notes_team(approvals={"plan": True}))

    def cannot_ask(call: Any) -> str:
        raise RequestError.method_not_found("session/request_permission")

    async with editor_with(dev_server, tmp_path, "--team", str(team_file), answer=cannot_ask) as ed:
        sid, turn = await prompting(ed, tmp_path)
        told = await ed.wait_for(lambda: said(ed, sid), "the approval's message")
        approved = await ed.conn.prompt(session_id=sid, prompt=[text_block("/approve looks good")])
        answer = await asyncio.wait_for(turn, 30)
    assert told[0] == (
        "Approval needed: Approve the plan (2 tasks) (plan). This editor cannot ask; answer "
        "with /approve plan or /reject plan.\n"
    )
    assert approved.stop_reason == answer.stop_reason == "end_turn"
    messages = said(ed, sid)
    assert messages[1].startswith("Recorded: plan approved by ")
    assert messages[1].endswith(": looks good.\n")
    assert messages[-1] == FINAL


async def test_an_answer_that_is_not_an_option_decides_nothing(
    dev_server: DevServer, tmp_path: Path
) -> None:
    # an option id the prompt did not offer was taken for a rejection
    team_file = write_team(tmp_path / "team.json", notes_team(approvals={"plan": True}))
    async with editor_with(
        dev_server, tmp_path, "--team", str(team_file), answer=lambda call: "allow_everything"
    ) as ed:
        sid, turn = await prompting(ed, tmp_path)
        told = await ed.wait_for(lambda: said(ed, sid), "the approval's message")
        approved = await ed.conn.prompt(session_id=sid, prompt=[text_block("/approve")])
        answer = await asyncio.wait_for(turn, 30)
    assert told[0] == (
        "Approval needed: Approve the plan (2 tasks) (plan). The editor's answer "
        "'allow_everything' was not one of the options; answer with /approve plan or "
        "/reject plan.\n"
    )
    assert approved.stop_reason == answer.stop_reason == "end_turn"
    assert statuses(ed, "approval:plan") == ["pending", "completed"]


async def test_session_close_leaves_the_run_going_and_session_resume_takes_it_up(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    team_file = write_team(tmp_path / "team.json", notes_team())
    held = Pending()
    async with editor_with(dev_server, tmp_path, "--team", str(team_file), answer=held) as editor:
        sid, turn = await prompting(editor, tmp_path)
        await editor.wait_for(lambda: editor.permissions(), "the plan's permission prompt")
        await editor.conn.close_session(session_id=sid)
        closed = await asyncio.wait_for(turn, 10)
        described = await client.get_workflow_handle(sid).describe()
        closed_at = len(editor.wire)
        editor.answer = allow_once
        await editor.conn.resume_session(cwd=str(tmp_path), session_id=sid)
        final = await editor.wait_for(
            lambda: [u for u in editor.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"],
            "the final message",
        )
    assert closed.stop_reason == "cancelled"
    assert described.status.name == "RUNNING"  # closing the session left the run alone
    after = editor.kinds()[closed_at:]
    assert after[0] == "response" and after[1] == "available_commands_update::"
    assert "user_message_chunk::" not in after  # resume replays nothing
    assert after.count("permission:approval:plan") == 1
    assert final[-1]["content"]["text"] == FINAL


async def test_a_cancel_that_does_not_settle_cancels_the_run_through_temporal(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    sleeper = {
        "name": "sleeper",
        "backend": {
            "kind": "process",
            "command": sys.executable,
            "args": [
                "-c",
                "import os, time; open('pid', 'w').write(str(os.getpid())); time.sleep(60)",
            ],
            "input": "none",
        },
    }
    plan = [{"title": "Sleep", "description": "sleep", "assignee": "sleeper", "depends_on": []}]
    slow = {
        "team": {"name": "slow", "agents": [sleeper]},
        "coordinator": {
            "provider": "scripted",
            "script": [f"```json\n{json.dumps(plan)}\n```", "x"],
        },
    }
    team_file = write_team(tmp_path / "team.json", slow)
    env = oma_env(dev_server, OMA_ACP_CANCEL_GRACE_S="1")
    async with editor_with(dev_server, tmp_path, "--team", str(team_file), env=env) as editor:
        sid, turn = await prompting(editor, tmp_path, "Sleep")
        await editor.wait_for(
            lambda: (tmp_path / "pid").is_file() and (tmp_path / "pid").read_text(), "the sleeper"
        )
        pid = int((tmp_path / "pid").read_text())
        started = asyncio.get_running_loop().time()
        await editor.conn.cancel(session_id=sid)
        answer = await asyncio.wait_for(turn, 30)
        took = asyncio.get_running_loop().time() - started
    assert answer.stop_reason == "cancelled"
    assert took < 15  # the abort's drain would wait the sleeper's 60 s out
    assert not alive(pid)
    described = await client.get_workflow_handle(sid).describe()
    assert described.status.name == "CANCELED"
    assert statuses(editor, "t1")[-1] == "failed"


# -- /retry: a fork of the session's latest run ------------------------------------------

COUNTED = r"""
import pathlib, re, sys
me = re.search(r"TASK=(\w+)", sys.stdin.read()).group(1)
with open("runs.log", "a") as log:
    log.write(me + "\n")
if me == "build" and not pathlib.Path("ok").exists():
    sys.stderr.write("build needs the file ok\n")
    sys.exit(3)
print(f"done {me}")
"""
"""A process agent: logs the task it runs to ``runs.log`` in the session's
directory, and fails ``build`` (exit 3) unless a file ``ok`` is there."""

BUILD_PLAN = [
    {"title": "Prepare", "description": "TASK=prepare", "assignee": "worker", "depends_on": []},
    {
        "title": "Build",
        "description": "TASK=build",
        "assignee": "worker",
        "depends_on": ["Prepare"],
    },
    {"title": "Ship", "description": "TASK=ship", "assignee": "shipper", "depends_on": ["Build"]},
    {"title": "Docs", "description": "TASK=docs", "assignee": "worker", "depends_on": []},
]
"""t1 -> t2 (build, fails without ``ok``) -> t3 (ship, a dispatch approval); t4 alone."""


def build_team() -> dict[str, Any]:
    def counted(name: str) -> dict[str, Any]:
        return {
            "name": name,
            "backend": {"kind": "process", "command": sys.executable, "args": ["-c", COUNTED]},
        }

    return {
        "team": {"name": "build", "agents": [counted("worker"), counted("shipper")]},
        "coordinator": {
            "provider": "scripted",
            "script": [f"```json\n{json.dumps(BUILD_PLAN)}\n```", FINAL],
        },
        "options": {"approvals": {"dispatch": ["shipper"]}},
    }


def runs_log(cwd: Path) -> list[str]:
    log = cwd / "runs.log"
    return sorted(log.read_text().split()) if log.exists() else []


async def prompting(
    editor: Editor, cwd: Path, text: str = "Write the notes"
) -> tuple[str, asyncio.Future[Any]]:
    """A new session in ``cwd`` and its prompt ``text`` on its way: the
    session id and the prompt's answer to come."""
    sid = (await editor.conn.new_session(cwd=str(cwd))).session_id
    turn = asyncio.ensure_future(editor.conn.prompt(session_id=sid, prompt=[text_block(text)]))
    return sid, turn


def said(editor: Editor, sid: str) -> list[str]:
    return [
        u["content"]["text"]
        for u in editor.updates(sid)
        if u["sessionUpdate"] == "agent_message_chunk"
    ]


async def test_retry_runs_the_failed_task_and_its_dependents_again_and_keeps_the_rest(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    team_file = write_team(tmp_path / "team.json", build_team())
    held = Pending()
    async with editor_with(dev_server, tmp_path, "--team", str(team_file), answer=held) as editor:
        sid = (await editor.conn.new_session(cwd=str(tmp_path))).session_id
        first = await editor.conn.prompt(session_id=sid, prompt=[text_block("Build it")])
        skipped_call = tool_call_texts(editor, "t3")[-1]
        failed = await client.get_workflow_handle(sid).describe()
        assert runs_log(tmp_path) == ["build", "docs", "prepare"]
        (tmp_path / "ok").touch()
        retried_at = len(editor.wire)
        turn = asyncio.ensure_future(
            editor.conn.prompt(session_id=sid, prompt=[text_block("/retry t2")])
        )
        await editor.wait_for(lambda: editor.permissions(), "the dispatch's permission prompt")
        busy = await editor.conn.prompt(session_id=sid, prompt=[text_block("/retry")])
        busy_said = said(editor, sid)[-1]
        held.release(editor.permissions()[0]["toolCall"]["toolCallId"], "allow_once")
        retried = await asyncio.wait_for(turn, 60)
        retry_kinds = editor.kinds()[retried_at:]
        retry_updates = [
            m["params"]["update"]
            for m in editor.wire[retried_at:]
            if m.get("method") == "session/update"
        ]
        after_retry = runs_log(tmp_path)
        # and again, from the retry: only ship runs
        editor.answer = allow_once
        again = await editor.conn.prompt(session_id=sid, prompt=[text_block("/retry t3")])
    async with editor_with(dev_server, tmp_path, "--team", str(team_file)) as loaded:
        await loaded.conn.load_session(cwd=str(tmp_path), session_id=sid)
        await loaded.wait_for(lambda: said(loaded, sid), "the latest run's answer")

    assert (first.stop_reason, busy.stop_reason) == ("end_turn", "end_turn")
    assert skipped_call == ("failed", "skipped: dependency 't2' (Build) failed")
    assert busy_said.startswith(f"/retry: ACP_SESSION_BUSY: the session's run {sid} is still going")
    assert (retried.stop_reason, again.stop_reason) == ("end_turn", "end_turn")
    # build and ship ran again, prepare and docs did not
    assert after_retry == ["build", "build", "docs", "prepare", "ship"]
    assert runs_log(tmp_path) == ["build", "build", "docs", "prepare", "ship", "ship"]
    # the retry is a new run of the session's workflow id, a fork of the failed one
    state = await client.get_workflow_handle(sid).query(QueryName.STATE)
    assert state["status"] == "completed" and state["forked_from"] == sid
    retry_run = await client.get_workflow_handle(sid).describe()
    assert retry_run.run_id != failed.run_id
    # the retry's turn: what it keeps, the plan with the kept tasks, tool calls,
    # the approval, the answer
    texts = [
        u["content"]["text"] for u in retry_updates if u["sessionUpdate"] == "agent_message_chunk"
    ]
    assert texts[0] == "Retrying t2, t3; keeping t1, t4.\n\n"
    assert texts[-1] == FINAL
    plans = [u for u in retry_updates if u["sessionUpdate"] == "plan"]
    first_plan = [(e["content"], e["status"]) for e in plans[0]["entries"]]
    assert first_plan[0] == ("Prepare · worker (reused)", "completed")
    assert first_plan[2:] == [
        ("Ship · shipper", "pending"),
        ("Docs · worker (reused)", "completed"),
    ]
    assert [(e["content"], e["status"]) for e in plans[-1]["entries"]] == [
        ("Prepare · worker (reused)", "completed"),
        ("Build · worker", "completed"),
        ("Ship · shipper", "completed"),
        ("Docs · worker (reused)", "completed"),
    ]
    kept = next(u for u in retry_updates if u.get("toolCallId") == "t1")
    assert kept["status"] == "completed"
    assert kept["content"][0]["content"]["text"].startswith(
        f"(reused from run {sid}, task t1: not run again)"
    )
    t2 = [u for u in retry_updates if u.get("toolCallId") == "t2" and u.get("status")]
    assert t2[-1]["status"] == "completed"  # (how fast it ran decides which states were drawn)
    assert t2[-1]["content"][0]["content"]["text"] == "done build\n"
    assert retry_kinds.index("tool_call:t3:pending") < retry_kinds.index(
        f"permission:{editor.permissions()[0]['toolCall']['toolCallId']}"
    )
    assert retry_kinds[-1] == "response" and retry_kinds[-2].startswith("agent_message_chunk")
    # session/load replays each turn as it was typed
    typed = [
        u["content"]["text"]
        for u in loaded.updates(sid)
        if u["sessionUpdate"] == "user_message_chunk"
    ]
    assert typed == ["Build it", "/retry t2", "/retry t3"]


async def test_retry_refuses_with_a_message_and_starts_nothing(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    team_file = write_team(tmp_path / "team.json", build_team())
    async with editor_with(dev_server, tmp_path, "--team", str(team_file)) as editor:
        sid = (await editor.conn.new_session(cwd=str(tmp_path))).session_id
        none_yet = await editor.conn.prompt(session_id=sid, prompt=[text_block("/retry")])
        none_yet_said = said(editor, sid)[-1]
        await editor.conn.prompt(session_id=sid, prompt=[text_block("Build it")])
        ran = await client.get_workflow_handle(sid).describe()
        unknown = await editor.conn.prompt(session_id=sid, prompt=[text_block("/retry t22")])
        unknown_said = said(editor, sid)[-1]
        bad = build_team()
        bad["team"]["agents"][1]["name"] = "deployer"  # t3's agent is gone
        write_team(team_file, bad)
        (tmp_path / "ok").touch()
        missing = await editor.conn.prompt(session_id=sid, prompt=[text_block("/retry")])
        missing_said = said(editor, sid)[-1]
    assert none_yet.stop_reason == unknown.stop_reason == missing.stop_reason == "end_turn"
    assert none_yet_said == f"No run in this session yet ({sid}): send a goal first.\n"
    assert unknown_said == (
        f"/retry: INVALID_FORK: run '{sid}' has no task 't22' (did you mean 't2'?); its tasks: "
        "t1, t2, t3, t4\n"
    )
    assert missing_said.startswith(
        "/retry: INVALID_FORK: task 't3' runs again on agent 'shipper', which the fork's team "
        "does not have"
    )
    # nothing started: the session's latest run is still the one that ran
    assert (await client.get_workflow_handle(sid).describe()).run_id == ran.run_id
    assert runs_log(tmp_path) == ["build", "docs", "prepare"]


# -- session/fork: a session that branches another's latest run ---------------------------


async def test_session_fork_branches_the_latest_run_into_a_session_of_its_own(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    team_file = write_team(tmp_path / "team.json", notes_team(approvals={}))
    async with editor_with(dev_server, tmp_path, "--team", str(team_file)) as editor:
        sid = (await editor.conn.new_session(cwd=str(tmp_path))).session_id
        with pytest.raises(RequestError) as no_run:
            await editor.conn.fork_session(cwd=str(tmp_path), session_id=sid)
        await editor.conn.prompt(session_id=sid, prompt=[text_block("Write the notes")])
        forked_run = await client.get_workflow_handle(sid).describe()
        fid = (await editor.conn.fork_session(cwd=str(tmp_path), session_id=sid)).session_id
        # the session forked goes on with a run of its own; the fork branches where it was
        await editor.conn.prompt(session_id=sid, prompt=[text_block("Add a date")])
        forked = await editor.conn.prompt(session_id=fid, prompt=[text_block("Add a title")])
        with pytest.raises(RequestError) as unknown:
            await editor.conn.fork_session(cwd=str(tmp_path), session_id="team-nobody-0")
    capabilities = editor.wire[0]["result"]["agentCapabilities"]["sessionCapabilities"]
    assert capabilities["fork"] == {}
    assert fid.startswith(f"{sid}-fork-") and len(fid) == len(sid) + len("-fork-") + 8
    assert forked.stop_reason == "end_turn"
    assert said(editor, fid) == [FINAL]
    state = await client.get_workflow_handle(fid).query(QueryName.STATE)
    assert state["goal"] == (
        "Earlier in this session the team was asked:\n\nWrite the notes\n\n"
        f"That run completed. Its outcome:\n\n{FINAL}\n\n"
        "Now, building on that:\n\nAdd a title"
    )
    # the session forked kept its runs: the one forked, then its own follow-up
    runs = [wf async for wf in client.list_workflows(f"WorkflowId = '{sid}'")]
    assert forked_run.run_id in {wf.run_id for wf in runs} and len(runs) == 2
    assert (no_run.value.code, no_run.value.data["code"]) == (-32602, "ACP_SESSION_NO_RUN")
    assert no_run.value.data["message"] == (
        f"session {sid!r} has no run yet: a fork branches the session's latest run; prompt "
        "the session first, or open a new session"
    )
    assert (unknown.value.code, unknown.value.data["code"]) == (-32002, "ACP_SESSION_UNKNOWN")
    assert "no team run 'team-nobody-0' on this Temporal server" in unknown.value.data["message"]


async def test_retry_in_a_forked_session_forks_the_run_it_branches(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    team_file = write_team(tmp_path / "team.json", build_team())
    async with editor_with(dev_server, tmp_path, "--team", str(team_file)) as editor:
        sid = (await editor.conn.new_session(cwd=str(tmp_path))).session_id
        await editor.conn.prompt(session_id=sid, prompt=[text_block("Build it")])
        failed = await client.get_workflow_handle(sid).describe()
        fid = (await editor.conn.fork_session(cwd=str(tmp_path), session_id=sid)).session_id
        (tmp_path / "ok").touch()
        retried = await editor.conn.prompt(session_id=fid, prompt=[text_block("/retry")])
    assert retried.stop_reason == "end_turn"
    assert said(editor, fid)[0] == "Retrying t2, t3; keeping t1, t4.\n\n"
    assert said(editor, fid)[-1] == FINAL
    assert runs_log(tmp_path) == ["build", "build", "docs", "prepare", "ship"]
    # the fork is a TeamRun of the forked session's id, forked from the session's run
    state = await client.get_workflow_handle(fid).query(QueryName.STATE)
    assert (state["status"], state["forked_from"]) == ("completed", sid)
    kept = state["tasks"][0]["reused_from"]
    assert (kept["run_id"], kept["task_id"]) == (sid, "t1")
    assert kept["temporal_run_id"] == failed.run_id  # the execution the fork pinned
    # the session forked is untouched
    source = await client.get_workflow_handle(sid).describe()
    assert (source.run_id, source.status.name) == (failed.run_id, "FAILED")


async def test_retry_in_a_fork_of_a_run_still_going_keeps_what_has_settled(
    dev_server: DevServer, tmp_path: Path, client: Any
) -> None:
    asked: list[str] = []

    def hold_the_first(call: Any) -> Any:
        # the source's ship waits for its approval; the fork's is allowed
        asked.append(call.tool_call_id)
        return asyncio.get_running_loop().create_future() if len(asked) == 1 else "allow_once"

    (tmp_path / "ok").touch()
    team_file = write_team(tmp_path / "team.json", build_team())
    async with editor_with(
        dev_server, tmp_path, "--team", str(team_file), answer=hold_the_first
    ) as editor:
        sid, turn = await prompting(editor, tmp_path, "Build it")
        await editor.wait_for(
            lambda: editor.permissions() and statuses(editor, "t4")[-1:] == ["completed"],
            "the ship's dispatch prompt, and the docs done",
        )
        fid = (await editor.conn.fork_session(cwd=str(tmp_path), session_id=sid)).session_id
        retried = await editor.conn.prompt(session_id=fid, prompt=[text_block("/retry")])
        await editor.conn.cancel(session_id=sid)
        stopped = await asyncio.wait_for(turn, 30)
    assert (retried.stop_reason, stopped.stop_reason) == ("end_turn", "cancelled")
    assert said(editor, fid)[0] == "Retrying t3; keeping t1, t2, t4.\n\n"
    assert asked == ["t3", "t3"]
    assert runs_log(tmp_path) == ["build", "docs", "prepare", "ship"]  # ship: in the fork only
    state = await client.get_workflow_handle(fid).query(QueryName.STATE)
    assert (state["status"], state["forked_from"]) == ("completed", sid)
    assert [t["reused_from"] is not None for t in state["tasks"]] == [True, True, False, True]
