"""A real ACP agent as a team member: ``@zed-industries/claude-agent-acp`` (Zed's
ACP adapter for Claude Code, installed from npm into ``tests/npm`` by ``make
test``), with the local Anthropic Messages API server playing Claude.

The agent runs its real loop — the Claude Code CLI it spawns streams
``POST /v1/messages?beta=true``, runs its own ``Write`` tool, asks OMA for
permission over ACP — so these tests check what OMA's ACP client does with what
a production agent really sends: the tool-call and permission updates, the
``usage_update``, ``session/cancel`` mid-turn, and that the agent's whole
process tree dies with the run.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError

from oma import worker as oma_worker
from oma.core.contracts.names import WorkflowName
from tests.support.anthropic_server import AnthropicServer, Reply, TextReply, ToolUseReply
from tests.support.paths import TESTS
from tests.support.procs import alive
from tests.support.runs import TASK_QUEUE, agent_result, assert_replays, run_team, task

pytestmark = pytest.mark.usefixtures("worker")

NPM_DIR = TESTS / "npm"
AGENT_JS = NPM_DIR / "node_modules" / "@zed-industries" / "claude-agent-acp" / "dist" / "index.js"
WRITE_TOOL = "Write"
"""Claude Code's file-writing tool; its input is ``{file_path (absolute), content}``."""
SYSTEM_PROMPT = "You are the coder of a team."


@pytest.fixture(scope="module", autouse=True)
def _agent_installed() -> None:
    # Not a skip: without the agent these tests cannot say anything.
    assert shutil.which("node"), "node is not on PATH (claude-agent-acp needs Node 20+)"
    assert AGENT_JS.is_file(), (
        f"{AGENT_JS} is missing: run `make test` "
        "(or `npm ci --prefix tests/npm --no-audit --no-fund`)"
    )


@pytest.fixture
def model_api(anthropic_server: AnthropicServer) -> Iterator[AnthropicServer]:
    """The shared server, clean before and after (the responders here must not
    answer another test's requests)."""
    anthropic_server.reset()
    yield anthropic_server
    anthropic_server.reset()


# -- Claude, played by the local server -----------------------------------------


@dataclass
class PlayClaude:
    """A ``default_responder`` that plays Claude for the agent's main loop.

    A request whose tools include ``Write`` is the agent's loop: while its
    latest user turn has no ``tool_result``, Claude announces the file and
    calls ``Write`` on ``file_path``; once the result is back it answers
    ``done`` (or ``refused`` for an ``is_error`` result). ``slow_s`` makes
    the first answer a slow text reply instead (``slow_s`` seconds between SSE
    events), so that the turn stays in flight. Any other request (a side
    request such as a title) gets plain text. Every request is summarised in
    ``seen``.
    """

    file_path: Path
    content: str = "print('hello from Claude')\n"
    done: str = "Wrote hello.py."
    refused: str = "I could not write hello.py: permission was refused."
    slow_s: float = 0.0
    seen: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Reply:
        tools = {t.get("name"): t for t in body.get("tools") or []}
        last = _blocks(body["messages"][-1])
        results = [b for b in last if b.get("type") == "tool_result"]
        self.seen.append(
            {
                "stream": body.get("stream"),
                "tools": sorted(tools),
                "tool_results": results,
                "prompt": last[-1].get("text", ""),
            }
        )
        if WRITE_TOOL not in tools:
            return TextReply("Side reply.")
        if self.slow_s:
            return TextReply("Thinking it over " * 8, pieces=40, delay_s=self.slow_s)
        if results:
            refused = any(r.get("is_error") for r in results)
            # input_tokens is what the agent's usage_update reports (see below)
            return TextReply(self.refused if refused else self.done, input_tokens=2000)
        return ToolUseReply(
            WRITE_TOOL,
            {"file_path": str(self.file_path), "content": self.content},
            id="toolu_write_1",
            text="Writing hello.py.",
            input_tokens=1000,
        )


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


class ClaudeAgent:
    """claude-agent-acp as a team member, confined to ``tmp_path``: its HOME and
    Claude config under ``home/``, its working directory ``project/``."""

    def __init__(self, tmp_path: Path, server: AnthropicServer) -> None:
        self.home = tmp_path / "home"
        self.project = tmp_path / "project"
        self.home.mkdir()
        self.project.mkdir()
        self.server = server

    def config(self, name: str, permission: str) -> dict[str, Any]:
        return {
            "name": name,
            "system_prompt": SYSTEM_PROMPT,
            "backend": {
                "kind": "acp",
                "command": "node",
                "args": [str(AGENT_JS)],
                "cwd": str(self.project),
                "permission": permission,
                "env": {
                    "ANTHROPIC_BASE_URL": self.server.base_url,
                    "ANTHROPIC_API_KEY": "sk-ant-test-dummy",
                    "HOME": str(self.home),
                    "CLAUDE_CONFIG_DIR": str(self.home / ".claude"),
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    # As root, claude-agent-acp 0.23.1 passes the CLI
                    # --allow-dangerously-skip-permissions when IS_SANDBOX is
                    # merely set (e.g. "yes"), but the CLI then exits unless it
                    # is exactly "1": session/new fails with "Query closed
                    # before response received". "1" satisfies both.
                    "IS_SANDBOX": "1",
                },
            },
        }

    def pids(self) -> list[int]:
        """Every live process of the agent's tree (the ACP adapter and the
        Claude Code CLI it spawns): the processes whose environment has this
        agent's HOME."""
        marker = f"\0HOME={self.home}\0".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:  # gone, or not ours
                continue
            if marker in b"\0" + environ and alive(int(entry.name)):
                pids.append(int(entry.name))
        return pids


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


async def wait_until_gone(agent: ClaudeAgent, timeout_s: float) -> list[int]:
    """Wait up to ``timeout_s`` for the agent's tree to end; returns the survivors."""
    deadline = time.monotonic() + timeout_s
    while (left := agent.pids()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return left


def one_task_run(agent: dict[str, Any]) -> dict[str, Any]:
    return {
        "team": {"name": "claude-team", "agents": [agent]},
        "tasks": [task("code", "coder", description="Write hello.py that prints a greeting.")],
    }


def assert_write_tool_schema(seen: list[dict[str, Any]], server: AnthropicServer) -> None:
    """The agent streamed, and offered ``Write`` with the input PlayClaude sends."""
    main = [r for r in server.requests if WRITE_TOOL in {t["name"] for t in r.body["tools"]}]
    assert main and all(r.path == "/v1/messages?beta=true" for r in main)
    assert all(s["stream"] is True for s in seen)
    [write] = [t for t in main[0].body["tools"] if t["name"] == WRITE_TOOL]
    schema = write["input_schema"]
    assert sorted(schema["required"]) == ["content", "file_path"], schema


# -- the tests ------------------------------------------------------------------


async def test_claude_writes_a_file_after_oma_approves_its_permission_request(
    client: Client, workflow_id: str, tmp_path: Path, model_api: AnthropicServer
) -> None:
    claude = ClaudeAgent(tmp_path, model_api)
    target = claude.project / "hello.py"
    model_api.default_responder = play = PlayClaude(target)

    result = await run_team(
        client, workflow_id, one_task_run(claude.config("coder", "auto-approve"))
    )

    assert result.success, [t.error for t in result.tasks]
    assert target.read_text() == play.content
    code = await agent_result(client, workflow_id, "code")
    assert code.stop_reason == "end_turn"
    # both assistant messages of the turn, chunks joined as sent: this adapter
    # version puts no messageId on its chunks, so OMA sees no message boundary
    assert code.output == "Writing hello.py." + play.done
    [perm] = code.permission_requests
    assert perm.model_dump() == {
        "tool_call_id": "toolu_write_1",
        "title": "Write hello.py",
        "kind": "edit",
        "option_kinds": ["allow_always", "allow_once", "reject_once"],
        "outcome": "selected",
        "option_id": "allow",  # allow_once: auto-approve grants the least
        "approved": True,
    }
    [call] = code.tool_calls
    assert (call.id, call.name, call.status) == ("toolu_write_1", "Write hello.py", "completed")
    assert call.input["rawInput"] == {"file_path": str(target), "content": play.content}
    # The agent's usage_update: used = the last assistant message's usage as
    # message_start reported it (input 2000 + output 1 + cache 0 + 0).
    assert code.token_usage.model_dump(include={"input_tokens", "output_tokens"}) == {
        "input_tokens": 2001,
        "output_tokens": 0,
    }
    # OMA's prompt (system prompt first) reached Claude as the user's message
    [first, second] = [s for s in play.seen if WRITE_TOOL in s["tools"]]
    [result_block] = second["tool_results"]
    assert (first["tool_results"], result_block.get("is_error", False)) == ([], False)
    assert first["prompt"].startswith(f"{SYSTEM_PROMPT}\n\n# Task: Code")
    assert_write_tool_schema(play.seen, model_api)
    assert await wait_until_gone(claude, 2.0) == []
    await assert_replays(client, workflow_id)


async def test_claude_reports_it_could_not_write_when_oma_rejects_the_permission(
    client: Client, workflow_id: str, tmp_path: Path, model_api: AnthropicServer
) -> None:
    claude = ClaudeAgent(tmp_path, model_api)
    target = claude.project / "hello.py"
    model_api.default_responder = play = PlayClaude(target)

    result = await run_team(client, workflow_id, one_task_run(claude.config("coder", "reject")))

    assert result.success, [t.error for t in result.tasks]
    assert not target.exists()
    code = await agent_result(client, workflow_id, "code")
    assert (code.status, code.stop_reason) == ("completed", "end_turn")
    assert code.output == "Writing hello.py." + play.refused
    [perm] = code.permission_requests
    assert (perm.tool_call_id, perm.outcome, perm.option_id, perm.approved) == (
        "toolu_write_1",
        "selected",
        "reject",
        False,
    )
    [call] = code.tool_calls
    assert (call.status, call.output) == ("failed", "User refused permission to run tool")
    # Claude saw the refusal as an error result of its tool call
    [_, second] = [s for s in play.seen if WRITE_TOOL in s["tools"]]
    [refusal] = second["tool_results"]
    assert (refusal["is_error"], refusal["content"]) == (
        True,
        "User refused permission to run tool",
    )
    assert await wait_until_gone(claude, 2.0) == []
    await assert_replays(client, workflow_id)


async def test_cancelling_a_run_mid_prompt_ends_claude_and_its_whole_process_tree(
    client: Client,
    workflow_id: str,
    tmp_path: Path,
    model_api: AnthropicServer,
    worker: oma_worker.OmaWorker,
) -> None:
    claude = ClaudeAgent(tmp_path, model_api)
    # ~20 s of streaming: the turn is still in flight when the run is cancelled
    model_api.default_responder = PlayClaude(claude.project / "hello.py", slow_s=0.5)
    handle = await client.start_workflow(
        WorkflowName.TEAM_RUN,
        one_task_run(claude.config("coder", "auto-approve")),
        id=workflow_id,
        task_queue=TASK_QUEUE,
    )
    deadline = time.monotonic() + 15
    while not model_api.requests and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert model_api.requests, "the agent never called the model"
    pids = claude.pids()
    # the ACP adapter and the Claude Code CLI it spawned, both running
    commands = [cmdline(pid) for pid in pids]
    assert any(str(AGENT_JS) in c for c in commands), commands
    # the CLI renames itself (process.title): its cmdline reads "claude"
    assert any(c.startswith("claude") for c in commands), commands

    cancelled_at = time.monotonic()
    await handle.cancel()
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    assert isinstance(info.value.cause, CancelledError)
    survivors = await wait_until_gone(claude, 3.0)
    assert survivors == [], [cmdline(pid) for pid in survivors]
    assert time.monotonic() - cancelled_at < 8
    assert len(worker.activities.acp_pool) == 0
    await assert_replays(client, workflow_id)
