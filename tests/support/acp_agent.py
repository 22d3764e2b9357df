"""A scriptable ACP agent for tests, built on the SDK's agent side (``acp.run_agent``).

Run as ``python tests/support/acp_agent.py [SCRIPT.json]``; without a path the script
is the JSON in ``ACP_TEST_SCRIPT`` (none: every turn ends at once with
``end_turn``). The script::

    {
      "load_session": false,      # advertise agentCapabilities.loadSession
      "protocol_version": 1,      # answered in initialize
      "load_fails": false,        # answer session/load with a JSON-RPC error
      "ignore_sigterm": false,    # SIGTERM does not end it (SIGKILL must)
      "spawn_child": false,       # start a grandchild that sleeps (and shares ignore_sigterm)
      "turns": [                  # one per session/prompt, in order; then end_turn
        {"steps": [STEP, ...], "stop_reason": "end_turn"}
      ]
    }

Steps, run in order; before each one a cancelled turn ends with ``cancelled``:

- ``{"text": "...", "message_id"?: "..."}``: an ``agent_message_chunk`` with
  exactly that text, and that ``messageId`` when given (none when not);
- ``{"tool_call": {"id", "title", "kind"?, "status"?, "raw_input"?}}``;
- ``{"tool_call_update": {"id", "title"?, "status"?, "raw_output"?, "text"?}}``;
- ``{"usage": 100, "size"?: 200000, "cost"?: 0.05, "currency"?: "USD"}``: a
  ``usage_update`` (with ``cost: {amount, currency}`` when ``cost`` is given);
  ``"usage": null`` sends ``used: null`` (not valid ACP);
- ``{"raw_update": {...}}``: sent as the ``update`` of a ``session/update`` as is;
- ``{"permission": {"title"?, "kind"?, "tool_call_id"?, "options": ["allow_once", ...],
  "write_file"?: path}}``: a ``session/request_permission`` whose options have
  ids ``opt_<kind>``; an approving answer writes ``approved`` to ``write_file``.
  An answer that comes after a cancel ends the turn with ``cancelled``;
- ``{"client_call": "read_text_file" | "write_text_file" | "create_terminal", "params": {...}}``:
  calls that client method and logs the JSON-RPC error code it got;
- ``{"sleep": 0.5, "ignore_cancel": false}``: waits, ending early on ``session/cancel``
  unless ``ignore_cancel``;
- ``{"exit": 3}``: the process exits at once with that status.

Logs, for the tests to read: ``ACP_TEST_SPAWN_LOG`` gets a line ``agent <pid>``
per process start (``child <pid>`` for the grandchild); ``ACP_TEST_EVENT_LOG``
gets one JSON object per line: ``start`` (pid, cwd), the raw params of
``initialize`` / ``session/new`` / ``session/load``, ``prompt`` (session id and
the exact text), ``cancel``, ``turn_end`` (session id and the stop reason the
turn answered with), ``permission`` (outcome and option id) and
``client_call`` (method and error code).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


def _start_fast() -> None:
    # Importing the SDK builds ~900 pydantic models (~1.1 s), most of the time
    # spent reading field docstrings from the source. Tests start many agents,
    # so skip the docstrings and build each validator on first use. Only
    # startup time changes; a pydantic without these internals just starts slowly.
    with contextlib.suppress(ImportError, AttributeError, KeyError):
        from pydantic._internal import _config, _fields

        _config.config_defaults["defer_build"] = True
        _fields.extract_docstrings_from_cls = lambda cls, use_inspect=False: {}  # type: ignore[attr-defined]


_start_fast()

from acp import (  # noqa: E402
    PROTOCOL_VERSION,
    RequestError,
    run_agent,
    start_tool_call,
    text_block,
    update_agent_message,
    update_tool_call,
)
from acp.connection import StreamEvent  # noqa: E402
from acp.schema import (  # noqa: E402
    AgentCapabilities,
    AllowedOutcome,
    ContentToolCallContent,
    Cost,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
    UsageUpdate,
)

_LOGGED_METHODS = ("initialize", "session/new", "session/load")


def _log_event(event: str, **fields: Any) -> None:
    path = os.environ.get("ACP_TEST_EVENT_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"event": event, "pid": os.getpid(), **fields}) + "\n")


def _log_spawn(role: str, pid: int) -> None:
    path = os.environ.get("ACP_TEST_SPAWN_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{role} {pid}\n")


def _observe(event: StreamEvent) -> None:
    method = event.message.get("method")
    if event.direction.value == "incoming" and method in _LOGGED_METHODS:
        _log_event(method, params=event.message.get("params"))


class ScriptedAgent:
    """Answers the ACP agent methods as the script says."""

    def __init__(self, script: dict[str, Any]) -> None:
        self.script = script
        self.conn: Any = None
        self.turns_taken = 0
        self.sessions = 0
        self.cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=self.script.get("protocol_version", PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=self.script.get("load_session", False)
            ),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        self.sessions += 1
        return NewSessionResponse(session_id=f"sess-{os.getpid()}-{self.sessions}")

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        if self.script.get("load_fails"):
            raise RequestError.resource_not_found(session_id)
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        _log_event("cancel", session_id=session_id)
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        _log_event("prompt", session_id=session_id, text=text)
        turns = self.script.get("turns", [])
        turn = turns[self.turns_taken] if self.turns_taken < len(turns) else {}
        self.turns_taken += 1
        cancelled = self.cancelled.setdefault(session_id, asyncio.Event())
        cancelled.clear()
        for step in turn.get("steps", []):
            if cancelled.is_set():
                break
            await self._run_step(session_id, step, cancelled)
        stop_reason = "cancelled" if cancelled.is_set() else turn.get("stop_reason", "end_turn")
        _log_event("turn_end", session_id=session_id, stop_reason=stop_reason)
        return PromptResponse(stop_reason=stop_reason)

    async def _run_step(
        self, session_id: str, step: dict[str, Any], cancelled: asyncio.Event
    ) -> None:
        if "text" in step:
            chunk = update_agent_message(text_block(step["text"]))
            chunk.message_id = step.get("message_id")
            await self.conn.session_update(session_id, chunk)
        elif "tool_call" in step:
            call = step["tool_call"]
            await self.conn.session_update(
                session_id,
                start_tool_call(
                    call["id"],
                    call["title"],
                    kind=call.get("kind"),
                    status=call.get("status"),
                    raw_input=call.get("raw_input"),
                ),
            )
        elif "tool_call_update" in step:
            call = step["tool_call_update"]
            content = None
            if "text" in call:
                content = [ContentToolCallContent(type="content", content=text_block(call["text"]))]
            await self.conn.session_update(
                session_id,
                update_tool_call(
                    call["id"],
                    title=call.get("title"),
                    status=call.get("status"),
                    raw_output=call.get("raw_output"),
                    content=content,
                ),
            )
        elif "usage" in step:
            size = step.get("size", 200_000)
            if step["usage"] is None:
                await self._send_raw_update(
                    session_id, {"sessionUpdate": "usage_update", "used": None, "size": size}
                )
            else:
                cost = (
                    Cost(amount=step["cost"], currency=step.get("currency", "USD"))
                    if "cost" in step
                    else None
                )
                update = UsageUpdate(
                    session_update="usage_update", used=step["usage"], size=size, cost=cost
                )
                await self.conn.session_update(session_id, update)
        elif "raw_update" in step:
            await self._send_raw_update(session_id, step["raw_update"])
        elif "permission" in step:
            await self._ask_permission(session_id, step["permission"], cancelled)
        elif "client_call" in step:
            await self._call_client(session_id, step["client_call"], step.get("params", {}))
        elif "sleep" in step:
            if step.get("ignore_cancel"):
                await asyncio.sleep(step["sleep"])
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(cancelled.wait(), timeout=step["sleep"])
        elif "exit" in step:
            os._exit(step["exit"])

    async def _send_raw_update(self, session_id: str, update: dict[str, Any]) -> None:
        # Not valid ACP, so not expressible with the SDK's models: sent on the
        # SDK's JSON-RPC connection underneath.
        await self.conn._conn.send_notification(
            "session/update", {"sessionId": session_id, "update": update}
        )

    async def _ask_permission(
        self, session_id: str, ask: dict[str, Any], cancelled: asyncio.Event
    ) -> None:
        options = [
            PermissionOption(option_id=f"opt_{kind}", name=kind, kind=kind)
            for kind in ask["options"]
        ]
        tool_call = ToolCallUpdate(
            tool_call_id=ask.get("tool_call_id", "perm-1"),
            title=ask.get("title"),
            kind=ask.get("kind"),
        )
        response = await self.conn.request_permission(
            session_id=session_id, tool_call=tool_call, options=options
        )
        outcome = response.outcome
        option_id = outcome.option_id if isinstance(outcome, AllowedOutcome) else None
        _log_event("permission", outcome=outcome.outcome, option_id=option_id)
        if option_id in ("opt_allow_once", "opt_allow_always") and ask.get("write_file"):
            Path(ask["write_file"]).write_text("approved\n")

    async def _call_client(self, session_id: str, method: str, params: dict[str, Any]) -> None:
        try:
            await getattr(self.conn, method)(session_id=session_id, **params)
        except RequestError as err:
            _log_event("client_call", method=method, error_code=err.code)
        else:
            _log_event("client_call", method=method, error_code=None)


def _load_script() -> dict[str, Any]:
    if len(sys.argv) > 1:
        return json.loads(Path(sys.argv[1]).read_text())  # type: ignore[no-any-return]
    return json.loads(os.environ.get("ACP_TEST_SCRIPT") or "{}")  # type: ignore[no-any-return]


def main() -> None:
    script = _load_script()
    if script.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _log_spawn("agent", os.getpid())
    _log_event("start", cwd=os.getcwd())
    if script.get("spawn_child"):
        # Inherits the SIGTERM disposition, and stays in this process group.
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        _log_spawn("child", child.pid)
    agent: Any = ScriptedAgent(script)  # duck-typed, as the SDK's router resolves methods by name
    asyncio.run(run_agent(agent, observers=[_observe]))


if __name__ == "__main__":
    main()
