"""The demo's "coder" over the Agent Client Protocol: an ACP agent for the
``acp`` backend, built on the agent side of the ``agent-client-protocol`` SDK.

The same work as ``coder.py`` (which the ``process`` backend runs), as an ACP
agent does it: OMA starts it, sends ``initialize`` and opens a session in the
backend's ``cwd`` (``session/new``); each task is one ``session/prompt`` turn,
in which it

1. says what it is about to do (an ``agent_message_chunk``);
2. reports a ``tool_call`` of kind ``edit``, asks for permission to write
   ``slugify.py`` and ``test_slugify.py`` (``session/request_permission``) and,
   allowed, writes them into the session's directory;
3. reports a ``tool_call`` of kind ``execute``, asks for permission to run the
   test and, allowed, runs it with the same interpreter, the test's output in
   the ``tool_call_update``;
4. reports what the turn used (a ``usage_update``: the context in tokens, a
   cost of $0 in USD, since no model ran), says how the test went under a new
   ``messageId``, and ends the turn with stopReason ``end_turn``.

A refused permission is not an error: the agent says what it did not do and
ends its turn. A stand-in for a real coding agent (Claude Code, Gemini CLI,
Codex): it ignores what the prompt asks. Run it as OMA does::

    oma run examples/acp-team-scripted.json

(venv active: it needs the SDK, a dependency of OMA). ACP names are kept as
the protocol spells them; the schema is ``acp.schema``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    Cost,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
    UsageUpdate,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coder import SLUGIFY_PY, TEST_SLUGIFY_PY  # the same files as coder.py

FILES = {"slugify.py": SLUGIFY_PY, "test_slugify.py": TEST_SLUGIFY_PY}

CONTEXT_WINDOW = 200_000
"""What ``usage_update.size`` reports, in tokens."""


class AcpCoder:
    """The agent's side of the protocol: the methods the SDK's router calls
    by name (``acp.interfaces.Agent``), one session per ``session/new``."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.cwd: dict[str, Path] = {}
        self.used: dict[str, int] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="oma-example-acp-coder", version="1.0.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = f"coder-{uuid.uuid4().hex[:8]}"
        self.cwd[session_id] = Path(cwd)
        self.used[session_id] = 0
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """``session/cancel``: every step of a turn is short, so the turn ends
        on its own; nothing to stop."""

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        workdir = self.cwd[session_id]
        await self._say(session_id, "Writing slugify.py and its test, then running the test.")

        title = f"Write {', '.join(FILES)}"
        if not await self._allowed(session_id, "write", title, "edit"):
            await self._say(session_id, "Not written: permission to edit was refused.")
            return await self._end(session_id, text)
        for name, source in FILES.items():
            (workdir / name).write_text(source, encoding="utf-8")
        await self._tool_done(session_id, "write", f"wrote {', '.join(FILES)} in {workdir}")

        if not await self._allowed(session_id, "test", "python3 test_slugify.py", "execute"):
            await self._say(session_id, "Wrote the files; the test was not run (refused).")
            return await self._end(session_id, text)
        test = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-B", "test_slugify.py"],  # -B: no __pycache__ left behind
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=60,
        )
        report = (test.stdout + test.stderr).strip()
        failed = "failed" if test.returncode else "completed"
        await self._tool_done(session_id, "test", report, status=failed)
        outcome = report if test.returncode == 0 else f"the test failed:\n{report}"
        await self._say(session_id, f"Done: slugify.py and test_slugify.py; {outcome}.")
        return await self._end(session_id, text)

    # -- the updates of a turn -------------------------------------------------

    async def _say(self, session_id: str, text: str) -> None:
        # each message its own messageId: OMA joins a turn's messages with a blank line
        chunk = update_agent_message(text_block(text))
        chunk.message_id = uuid.uuid4().hex
        await self.conn.session_update(session_id, chunk)

    async def _allowed(self, session_id: str, call_id: str, title: str, kind: str) -> bool:
        """Report the tool call, then ask to run it; whether the client allowed it."""
        await self.conn.session_update(
            session_id,
            start_tool_call(call_id, title, kind=kind, status="pending"),  # type: ignore[arg-type]
        )
        options = [
            PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
            PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ]
        response = await self.conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id=call_id, title=title, kind=kind),  # type: ignore[arg-type]
            options=options,
        )
        allowed = isinstance(response.outcome, AllowedOutcome) and (
            response.outcome.option_id == "allow"
        )
        status = "in_progress" if allowed else "failed"
        await self.conn.session_update(session_id, update_tool_call(call_id, status=status))
        return allowed

    async def _tool_done(
        self, session_id: str, call_id: str, output: str, status: str = "completed"
    ) -> None:
        await self.conn.session_update(
            session_id,
            update_tool_call(
                call_id,
                status=status,  # type: ignore[arg-type]
                content=[tool_content(text_block(output))],
                raw_output={"output": output},
            ),
        )

    async def _end(self, session_id: str, prompt_text: str) -> PromptResponse:
        # usage_update.used is the session's context so far (cumulative), in
        # tokens; here a rough count of the words it was sent
        self.used[session_id] += len(prompt_text.split())
        await self.conn.session_update(
            session_id,
            UsageUpdate(
                session_update="usage_update",
                used=self.used[session_id],
                size=CONTEXT_WINDOW,
                cost=Cost(amount=0.0, currency="USD"),
            ),
        )
        return PromptResponse(stop_reason="end_turn")


def main() -> None:
    asyncio.run(run_agent(AcpCoder()))


if __name__ == "__main__":
    main()
