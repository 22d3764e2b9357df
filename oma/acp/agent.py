"""``TeamAgent``: the ACP agent side of ``oma acp``, one session per team run.

The methods the SDK's router calls by name (``acp.interfaces.Agent``); the
protocol's own names are kept (``session/new``, ``stopReason``). A session's
id is the workflow id of its ``TeamRun``: the first prompt starts the run,
a later prompt starts a new run of the same workflow id (a follow-up, which
reads the previous run's outcome: ``oma.acp.prompt``), so a
session and its runs are one workflow id in Temporal, and ``session/load``
of that id finds them from any process; ``session/fork`` makes a session
whose runs branch from this one's latest (``oma.acp.session_fork``).
The protocol's rules kept here: no
update before the ``session/new`` (or ``session/resume``) response, none
after a prompt's response; those sent after a response are started only
once it is queued (``_after_response``).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, update_agent_message_text, update_user_message_text
from acp.helpers import update_available_commands
from acp.schema import (
    AgentCapabilities,
    CloseSessionResponse,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionForkCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
)
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from oma.acp.commands import COMMANDS, parse, run_command
from oma.acp.follower import Follower, ended_as
from oma.acp.permission_requests import Rules
from oma.acp.prompt import (
    MEMO,
    MEMO_PROMPT_CHARS,
    follow_up_goal,
    goal_of,
    outcome_text,
    prompt_text,
    typed_prompt,
)
from oma.acp.retry import Refusal, busy, retry_of
from oma.acp.rpc_errors import oma_request_error, request_error
from oma.acp.session_fork import Branch, branch_of, fork_id
from oma.acp.team_file import SessionTeam, session_dir, session_team
from oma.acp.tool_calls import agent_kinds, stop_reason
from oma.core.contracts.names import QueryName, SignalName, WorkflowName
from oma.core.schema.approvals import Reviewer
from oma.core.schema.errors import (
    AcpAttachmentWriteError,
    AcpSessionBusyError,
    AcpSessionUnknownError,
    InputError,
    OMAError,
)
from oma.core.schema.limits import MAX_NAME_CHARS
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import checked_team_run_input
from oma.records.executions import executions_of

logger = logging.getLogger(__name__)

LISTED_RUNS = 500
"""The most ``TeamRun`` executions ``session/list`` reads (newest first)."""

LIST_PAGE = 50
"""Sessions per ``session/list`` page."""

REPLAYED_RUNS = 20
"""The most earlier runs of a session ``session/load`` replays (the latest ones)."""

CANCEL_GRACE = timedelta(seconds=10)
"""After ``session/cancel``'s abort, how long the run may take to settle
before it is cancelled through Temporal (``OMA_ACP_CANCEL_GRACE_S``, in
seconds, says otherwise)."""

CANCEL_DRAIN = timedelta(seconds=15)
"""After that cancellation, how long the prompt waits for the run to end
before it answers ``cancelled`` all the same (the run ends once a worker
carries the cancellation out)."""

LOAD_DRAW_S = 10.0
"""How long ``session/load`` waits for the run to be drawn before it answers."""

ENDED_RUN_DRAW_S = 10.0
"""How long a prompt waits for the follower of a reattached run that has
ended (``session/load``, ``session/resume``) to send its last updates before
it starts the next run (then the follower is stopped)."""

QUERY_TIMEOUT = timedelta(seconds=10)

Connect = Callable[[], Awaitable[tuple[Client, str]]]


@dataclass
class Session:
    """One editor session: a workflow id, its directory and team, and what
    runs for it on this connection."""

    id: str
    cwd: Path
    team: SessionTeam | None
    team_error: OMAError | None = None
    rules: Rules = field(default_factory=Rules)
    notes_told: bool = False
    turn: asyncio.Task[TeamRunResult | None] | None = None
    background: asyncio.Task[Any] | None = None
    cancelled: bool = False
    escalation: asyncio.Task[None] | None = None
    mcp_servers: list[Any] | None = None
    """The editor's MCP servers (``session/new``'s ``mcpServers``), for a
    team file read again (``/retry``)."""
    starting: bool = False
    """A prompt is starting the session's run (not followed yet)."""
    branch: Branch | None = None
    """A forked session's branch: the run its first run starts from."""

    def prompting(self) -> bool:
        """Whether a prompt turn is starting or following the run."""
        return self.starting or (self.turn is not None and not self.turn.done())

    async def stop(self) -> None:
        """Stop following (the run goes on)."""
        for task in (self.turn, self.background):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


class TeamAgent:
    """The agent (module docstring). ``team`` is ``--team``; ``connect``
    gives the Temporal client and task queue (started once, shared)."""

    def __init__(self, team: Path | None, connect: Connect) -> None:
        self.team = team
        self.connect = connect
        self.conn: Any = None
        self.sessions: dict[str, Session] = {}
        self.reviewer = Reviewer(id=_login())
        self.first_update_s: float | None = None
        self.settling: set[asyncio.Task[None]] = set()
        """Signals on their way to a run (``session/cancel``'s abort), which
        the process waits for before it ends (``settle``)."""

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # -- lifecycle ---------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **_: Any,
    ) -> InitializeResponse:
        if client_info is not None:
            editor = client_info.title or client_info.name
            shown = f"{self.reviewer.id} via {editor}"[:MAX_NAME_CHARS]
            self.reviewer = Reviewer(id=self.reviewer.id, display_name=shown)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=True, audio=False, embedded_context=True
                ),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities(),
                    fork=SessionForkCapabilities(),
                ),
            ),
            agent_info=Implementation(name="oma", title="OMA team", version=_version()),
        )

    async def authenticate(self, method_id: str, **_: Any) -> None:
        return None  # no methods offered: Temporal's own configuration authenticates

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> NewSessionResponse:
        with _as_rpc_error():
            where = session_dir(cwd)
            team = session_team(self.team, where, mcp_servers)
            await self.connect()  # a server that cannot be reached fails here, not mid-prompt
        name = team.raw["team"]["name"]
        session = Session(f"team-{name}-{uuid.uuid4().hex[:8]}", where, team)
        session.mcp_servers = mcp_servers
        self.sessions[session.id] = session
        self._after_response(self._offer_commands(session))
        return NewSessionResponse(session_id=session.id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> LoadSessionResponse:
        """Replay the session's earlier runs (each prompt and final message),
        draw its latest run as it stands, and go on streaming it."""
        with _as_rpc_error():
            session, client, execution = await self._attach(session_id, cwd, mcp_servers)
            await self._replay(client, session)
        follower = self._follower(client, session, execution)
        drawn = asyncio.Event()
        follower.drawn = drawn
        follower.asking.clear()  # permission prompts once the response is out
        session.background = asyncio.create_task(follower.follow())
        waits = [asyncio.ensure_future(drawn.wait()), session.background]
        # (a run no worker answers for is drawn once one does: answer meanwhile)
        await asyncio.wait(waits, timeout=LOAD_DRAW_S, return_when=asyncio.FIRST_COMPLETED)
        waits[0].cancel()
        self._after_response(self._start_asking(follower, session))
        return LoadSessionResponse()

    async def resume_session(
        self, session_id: str, cwd: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> ResumeSessionResponse:
        """Reattach without replaying: the run is drawn as it stands, after the response."""
        with _as_rpc_error():
            session, client, execution = await self._attach(session_id, cwd, mcp_servers)
        follower = self._follower(client, session, execution)

        async def follow() -> TeamRunResult | None:
            try:
                await self._offer_commands(session)
            except Exception:
                logger.exception("after a response")
                return None
            return await follower.follow()

        # (a task created now starts once the response is queued: _after_response;
        # it is the session's at once, so a prompt sent right after the response
        # finds it: _follower_done)
        session.background = asyncio.create_task(follow())
        return ResumeSessionResponse()

    async def fork_session(
        self, session_id: str, cwd: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> ForkSessionResponse:
        """A new session, ``<session id>-fork-<8 hex>``, whose runs branch from
        the latest run of ``session_id`` (``oma.acp.session_fork``):
        its first prompt is a follow-up of that run, its ``/retry`` a fork
        of it. Nothing starts until then."""
        with _as_rpc_error():
            where = session_dir(cwd)
            client, _queue = await self.connect()
            known = self.sessions.get(session_id)
            branch = await branch_of(
                client,
                session_id,
                opened=known is not None,
                branch=known.branch if known is not None else None,
            )
            try:
                team: SessionTeam | None = session_team(self.team, where, mcp_servers)
                error = None
            except OMAError as err:
                team, error = None, err  # (/retry of a run another client started needs none)
        session = Session(fork_id(session_id), where, team, error, mcp_servers=mcp_servers)
        session.branch = branch
        self.sessions[session.id] = session
        self._after_response(self._offer_commands(session))
        return ForkSessionResponse(session_id=session.id)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_: Any
    ) -> ListSessionsResponse:
        """The sessions whose runs ``oma acp`` started in ``cwd`` (every
        directory without one), latest first."""
        with _as_rpc_error():
            client, _queue = await self.connect()
            found: list[SessionInfo] = []
            seen: set[str] = set()
            async for wf in client.list_workflows(
                f"WorkflowType = '{WorkflowName.TEAM_RUN}'", limit=LISTED_RUNS
            ):
                if wf.id in seen:
                    continue
                with contextlib.suppress(Exception):
                    mine = (await wf.memo()).get(MEMO)
                    if not isinstance(mine, dict) or (cwd and mine.get("cwd") != cwd):
                        continue
                    seen.add(wf.id)
                    when = wf.close_time or wf.start_time
                    found.append(
                        SessionInfo(
                            session_id=wf.id,
                            cwd=str(mine.get("cwd") or ""),
                            title=str(mine.get("prompt") or "").splitlines()[0][:100]
                            if mine.get("prompt")
                            else None,
                            updated_at=when.isoformat(),
                        )
                    )
        start = int(cursor) if cursor and cursor.isdigit() else 0
        page = found[start : start + LIST_PAGE]
        more = str(start + LIST_PAGE) if start + LIST_PAGE < len(found) else None
        return ListSessionsResponse(sessions=page, next_cursor=more)

    async def close_session(self, session_id: str, **_: Any) -> CloseSessionResponse:
        """Detach: stop following, withdraw the prompts; the run goes on."""
        session = self.sessions.pop(session_id, None)
        if session is not None:
            await session.stop()
        return CloseSessionResponse()

    # -- a prompt turn ------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        """A command, or the goal of a new run (module docstring); the answer
        comes once the run ended and its last update is sent."""
        with _as_rpc_error():
            session = self._session(session_id)
            client, queue = await self.connect()
            text = prompt_text(prompt)
            command = parse(text)
            if command is not None and command[0] == "retry":
                return await self._retry(session, client, queue, command[1], text)
            if command is not None:
                said = await run_command(client, session.id, *command, self.reviewer)
                await self._send(session, update_agent_message_text(said + "\n"))
                return PromptResponse(stop_reason="end_turn")
            if session.prompting():
                raise _still_going(session)
            if session.team is None:
                assert session.team_error is not None
                raise session.team_error
            # busy from here (no await before): a second prompt sent at once is
            # refused as one while the run goes, and a cancel sent at once is
            # kept for the run once started
            session.starting, session.cancelled = True, False
            try:
                await self._follower_done(client, session)
                handle = await self._start(client, queue, session, session.team, prompt, text)
                self._follow(client, session, handle)
            finally:
                session.starting = False
        if session.team.notes and not session.notes_told:
            session.notes_told = True
            await self._send(
                session, update_agent_message_text("\n".join(session.team.notes) + "\n\n")
            )
        return await self._turn_end(session)

    async def _retry(
        self, session: Session, client: Client, queue: str, tasks: list[str], text: str
    ) -> PromptResponse:
        """``/retry [TASK ...]`` (``oma.acp.retry``): a fork of the
        session's latest run under its workflow id, followed as a prompt's
        run; a message and ``end_turn`` when it starts nothing."""
        from oma.client.fork import start_fork

        if session.prompting():
            return await self._say(session, busy(session.id).text)
        # busy from here, as a prompt's run (``prompt``)
        session.starting, session.cancelled = True, False
        try:
            try:
                await self._follower_done(client, session)
            except AcpSessionBusyError:
                return await self._say(session, busy(session.id).text)
            found = await retry_of(
                client,
                session.id,
                tasks,
                memo_key=MEMO,
                team_file=lambda: self._team_now(session),
                branch=session.branch,
            )
            if isinstance(found, Refusal):
                return await self._say(session, found.text)
            asked = found.source_memo.get("prompt") if found.source_memo else None
            prompt = str(asked or found.forked.input.get("goal") or "")
            memo = {
                MEMO: {
                    "cwd": str(session.cwd),
                    "prompt": prompt[:MEMO_PROMPT_CHARS],
                    "command": text.strip()[:MEMO_PROMPT_CHARS],
                }
            }
            try:
                handle = await start_fork(
                    client,
                    found.fork,
                    id=session.id,
                    task_queue=queue,
                    team=str(found.forked.input["team"]["name"]),
                    memo=memo,
                )
            except WorkflowAlreadyStartedError:
                return await self._say(session, busy(session.id, elsewhere=True).text)
            await self._send(session, update_agent_message_text(found.said()))
            self._follow(client, session, handle)
        finally:
            session.starting = False
        return await self._turn_end(session)

    async def _follower_done(self, client: Client, session: Session) -> None:
        """Before a prompt's run: the follower ``session/load`` or
        ``session/resume`` started (``session.background``) ends once its run
        has ended, after its last updates (waited for at most
        ``ENDED_RUN_DRAW_S``, then stopped), so that it neither counts as the
        run still going nor draws the next run. Raises
        ``AcpSessionBusyError`` while the session's run still goes."""
        follower = session.background
        if follower is None or follower.done():
            return
        described = await client.get_workflow_handle(session.id).describe(rpc_timeout=QUERY_TIMEOUT)
        if described.status == WorkflowExecutionStatus.RUNNING:
            raise _still_going(session)
        await asyncio.wait({follower}, timeout=ENDED_RUN_DRAW_S)
        if not follower.done():
            await session.stop()  # (no prompt turn is following: this stops the follower)

    def _follow(self, client: Client, session: Session, handle: Any) -> None:
        """Follow the run ``handle`` started (``session.turn``); a cancel that
        came while it started aborts it now."""
        follower = self._follower(client, session, handle.first_execution_run_id)
        session.turn = asyncio.create_task(follower.follow())
        if session.cancelled:
            self._abort_soon(session)

    async def _turn_end(self, session: Session) -> PromptResponse:
        """The turn's answer once its run ended: its stop reason."""
        assert session.turn is not None  # (``_follow`` set it)
        stopped = False
        try:
            result = await session.turn
        except asyncio.CancelledError:
            this = asyncio.current_task()
            if this is not None and this.cancelling():
                raise
            # the follower was stopped: session/close, or a cancel that did not settle
            result, stopped = None, True
        return PromptResponse(stop_reason=stop_reason(result, session.cancelled or stopped))

    def _team_now(self, session: Session) -> dict[str, Any]:
        """The session's team file as it is now (the session's team from now
        on). Raises what ``session_team`` raises."""
        session.team = session_team(self.team, session.cwd, session.mcp_servers)
        session.team_error = None
        return session.team.raw

    async def _say(self, session: Session, text: str) -> PromptResponse:
        await self._send(session, update_agent_message_text(text + "\n"))
        return PromptResponse(stop_reason="end_turn")

    async def _start(
        self,
        client: Client,
        queue: str,
        session: Session,
        team: SessionTeam,
        prompt: list[Any],
        text: str,
    ) -> Any:
        """Start the session's run of ``prompt``: its handle. The prompt's
        attachments are written once every check passed, just before the run
        starts, and removed when it is refused: a refused prompt leaves no
        file behind."""
        asked = goal_of(prompt, session.id, f"prompt-{uuid.uuid4().hex[:6]}")
        goal = asked.text
        previous = await self._previous(client, session)
        if previous is not None:
            goal = follow_up_goal(goal, *previous)
        run_input = checked_team_run_input(team.run_input(goal))
        memo = {MEMO: {"cwd": str(session.cwd), "prompt": (text or goal)[:MEMO_PROMPT_CHARS]}}
        from oma.client import start_team_run

        # (written before the start: the run may read them at once)
        try:
            asked.write(session.cwd)
        except OSError as err:
            raise AcpAttachmentWriteError(
                f"the prompt's attachments could not be written under {session.cwd} "
                f"(the run reads them there): {err}; no run was started"
            ) from None
        try:
            return await start_team_run(
                client, run_input, id=session.id, task_queue=queue, memo=memo
            )
        except WorkflowAlreadyStartedError:
            asked.remove(session.cwd)
            raise AcpSessionBusyError(
                f"a run of {session.id} is already going (started elsewhere): /status "
                "shows it, /abort ends it"
            ) from None
        except OMAError:
            asked.remove(session.cwd)  # (refused before anything started)
            raise

    async def cancel(self, session_id: str, **_: Any) -> None:
        """``session/cancel``: abort the run (drain); cancel it through Temporal
        if it does not settle within ``CANCEL_GRACE``. A cancel while the
        prompt still starts the run is kept: the run is aborted once started."""
        session = self.sessions.get(session_id)
        if session is None or not session.prompting():
            return
        session.cancelled = True
        if session.starting:
            return  # (``prompt`` aborts the run once it started)
        await asyncio.shield(self._abort_soon(session))

    def _abort_soon(self, session: Session) -> asyncio.Task[None]:
        """The abort of the session's run, in a task of its own, started before
        anything is awaited: an editor that cancels and quits at once ends the
        cancel's handler with the connection, and the abort still reaches the
        run (``settle``)."""
        abort = asyncio.create_task(self._abort(session))
        self.settling.add(abort)
        abort.add_done_callback(self.settling.discard)
        return abort

    async def _abort(self, session: Session) -> None:
        client, _queue = await self.connect()
        handle = client.get_workflow_handle(session.id)
        with contextlib.suppress(RPCError):
            await handle.signal(
                SignalName.ABORT,
                {"reason": "session/cancel from the editor"},
                rpc_timeout=QUERY_TIMEOUT,
            )
        session.escalation = asyncio.create_task(self._escalate(session, handle))

    async def settle(self) -> None:
        """Wait for the signals on their way to a run (``settling``), at most
        ``QUERY_TIMEOUT`` each: the connection has ended, the process is
        about to."""
        if self.settling:
            await asyncio.wait(set(self.settling), timeout=QUERY_TIMEOUT.total_seconds())

    async def _escalate(self, session: Session, handle: Any) -> None:
        turn = session.turn
        if turn is None:
            return
        await asyncio.wait({turn}, timeout=cancel_grace_s())
        if turn.done():
            return
        with contextlib.suppress(RPCError):
            await handle.cancel(rpc_timeout=QUERY_TIMEOUT)
        await asyncio.wait({turn}, timeout=CANCEL_DRAIN.total_seconds())
        if not turn.done():
            turn.cancel()

    # -- helpers ---------------------------------------------------------------

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise AcpSessionUnknownError(
                f"no session {session_id!r} on this connection: open it with session/new or "
                "session/load"
            )
        return session

    async def _attach(
        self, session_id: str, cwd: str, mcp_servers: list[Any] | None
    ) -> tuple[Session, Client, str | None]:
        """The session of the run ``session_id`` (and its latest execution's
        Temporal run id)."""
        where = session_dir(cwd)
        client, _queue = await self.connect()
        try:
            described = await client.get_workflow_handle(session_id).describe(
                rpc_timeout=QUERY_TIMEOUT
            )
        except RPCError as err:
            if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                raise AcpSessionUnknownError(
                    f"no team run {session_id!r} on this Temporal server (namespace "
                    f"{client.namespace!r}): a session exists once its first prompt started a run"
                ) from None
            raise
        if described.workflow_type != WorkflowName.TEAM_RUN:
            raise AcpSessionUnknownError(
                f"{session_id!r} is a {described.workflow_type}, not a TeamRun"
            )
        try:
            team: SessionTeam | None = session_team(self.team, where, mcp_servers)
            error = None
        except OMAError as err:
            team, error = None, err  # the run can be followed; a prompt will say this
        old = self.sessions.get(session_id)
        if old is not None:
            await old.stop()
        session = Session(session_id, where, team, error, mcp_servers=mcp_servers)
        if old is not None:
            session.rules = old.rules
        self.sessions[session_id] = session
        return session, client, described.run_id

    def _follower(self, client: Client, session: Session, temporal_run_id: str | None) -> Follower:
        raw = session.team.raw if session.team is not None else {}
        options = raw.get("options") or {}
        return Follower(
            client,
            self.conn,
            session.id,
            session.id,
            temporal_run_id,
            send=lambda update: self._send(session, update),
            reviewer=self.reviewer,
            rules=session.rules,
            kinds=agent_kinds(raw.get("team")),
            token_budget=options.get("max_token_budget"),
            # (a prompt's follower: no answer decides once its turn was cancelled)
            deciding=lambda: not session.cancelled,
        )

    async def _send(self, session: Session, update: Any) -> None:
        await self.conn.session_update(session_id=session.id, update=update)

    async def _offer_commands(self, session: Session) -> None:
        await self._send(session, update_available_commands(c.available() for c in COMMANDS))

    async def _start_asking(self, follower: Follower, session: Session) -> None:
        await self._offer_commands(session)
        follower.asking.set()

    def _after_response(self, work: Awaitable[None]) -> None:
        """Run ``work`` once the current request's response is queued: the
        handler returns and the SDK queues its response without yielding to
        the event loop, so a task created now starts after it."""

        async def later() -> None:
            try:
                await work
            except Exception:
                logger.exception("after a response")

        asyncio.get_running_loop().create_task(later())

    async def _previous(self, client: Client, session: Session) -> tuple[str, TeamRunResult] | None:
        """The previous run of the session: ``(its prompt, its result)``; ``None``
        before the first; before a forked session's first, the run it
        branches. Raises ``AcpSessionBusyError`` when it is still going."""
        handle = client.get_workflow_handle(session.id, result_type=TeamRunResult)
        try:
            described = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            if session.branch is None:
                return None
            branch = session.branch
            handle = client.get_workflow_handle(
                branch.workflow_id, run_id=branch.temporal_run_id, result_type=TeamRunResult
            )
            described = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
            if described.status == WorkflowExecutionStatus.RUNNING:
                raise AcpSessionBusyError(
                    f"the run this session was forked from ({branch.workflow_id}) is still "
                    "going: its outcome is what the first prompt builds on; wait for it, or "
                    "/retry to fork it as it stands"
                ) from None
        if described.status == WorkflowExecutionStatus.RUNNING:
            raise AcpSessionBusyError(
                f"a run of {session.id} is already going (started elsewhere): /status shows it"
            )
        previous_prompt = typed_prompt(await described.memo())
        result = await _ended_result(client, handle)
        return previous_prompt or (result.goal or ""), result

    async def _replay(self, client: Client, session: Session) -> None:
        """Send each run of the session, oldest first, as its prompt (a user
        message) and, but for the latest (which the follower draws), its
        final message."""
        runs: list[tuple[str, Any]] = []
        chained = ""
        if "'" in session.id or "\\" in session.id:
            return  # earlier runs not replayed: the latest is drawn all the same
        executions = await executions_of(client, session.id, limit=200)
        for wf in sorted(executions, key=lambda w: w.start_time):
            mine = (await wf.memo()).get(MEMO)
            typed = (mine.get("command") or mine.get("prompt")) if isinstance(mine, dict) else ""
            asked = str(typed or "") or chained
            if wf.status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
                chained = asked  # the same run goes on in the next execution
                continue
            chained = ""
            runs.append((asked, wf))
        runs = runs[-REPLAYED_RUNS:]
        for n, (asked, wf) in enumerate(runs):
            if asked:
                await self._send(session, update_user_message_text(asked))
            if n == len(runs) - 1:
                break
            handle = client.get_workflow_handle(
                session.id, run_id=wf.run_id, result_type=TeamRunResult
            )
            try:
                said = outcome_text(await _ended_result(client, handle))
            except Exception as err:
                said = f"(this run's result cannot be read: {err})"
            chunk = update_agent_message_text(said)
            chunk.message_id = f"{session.id}/{wf.run_id}/final"
            await self._send(session, chunk)


async def _ended_result(client: Client, handle: Any) -> TeamRunResult:
    """The result of the ended ``TeamRun`` execution ``handle``: what it
    returned, else its last ``state`` as it ended (``ended_as``: a run
    cancelled through Temporal, one that failed without a result), with the
    outputs it kept by reference read back. Raises what reading them raises
    (``CodecKeyMissingError``, ``RPCError``)."""
    from oma.client import read_outputs, team_run_result

    try:
        return await team_run_result(handle, client)
    except WorkflowFailureError as err:
        result: TeamRunResult = await handle.query(
            QueryName.STATE, result_type=TeamRunResult, rpc_timeout=QUERY_TIMEOUT
        )
        ended_as(result, err.cause)
        await read_outputs(client, result)
        return result


def _still_going(session: Session) -> AcpSessionBusyError:
    return AcpSessionBusyError(
        f"the session's run {session.id} is still going: wait for it, or end it "
        "with /abort (or cancel); /status shows it"
    )


def cancel_grace_s() -> float:
    """``CANCEL_GRACE``, or ``OMA_ACP_CANCEL_GRACE_S`` when it is a number of
    seconds from 0 to a day (else the default, logged)."""
    raw = os.environ.get("OMA_ACP_CANCEL_GRACE_S", "")
    try:
        value = float(raw) if raw else CANCEL_GRACE.total_seconds()
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86_400:
        logger.warning("OMA_ACP_CANCEL_GRACE_S=%r is not 0 to 86400 seconds: using 10", raw)
        return CANCEL_GRACE.total_seconds()
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("oma-temporal")
    except PackageNotFoundError:
        return "0"


def _login() -> str:
    try:
        return getpass.getuser() or "editor"
    except (KeyError, OSError):
        return "editor"


@contextlib.contextmanager
def _as_rpc_error() -> Any:
    """An ``OMAError`` as the JSON-RPC error the client reads: invalid params
    for the caller's input (resource not found for an unknown session), an
    internal error for the rest; ``data`` has its ``code`` and ``message``."""
    try:
        yield
    except OMAError as err:
        if isinstance(err, AcpSessionUnknownError):
            raise oma_request_error(RequestError.resource_not_found(), err) from None
        if isinstance(err, InputError):
            raise oma_request_error(RequestError.invalid_params(), err) from None
        raise oma_request_error(RequestError.internal_error(), err) from None
    except RPCError as err:
        data = {"code": "TEMPORAL_RPC", "message": str(err)}
        raise request_error(RequestError.internal_error(), f"Temporal: {err}", data) from None
