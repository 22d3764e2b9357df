"""One ACP agent: its subprocess, OMA's client connection to it, and one session.

OMA takes the ACP client role (external-agents.md, "ACP backend"). The
protocol steps and their spec sections (agentclientprotocol.com/protocol):

- "Initialization": ``initialize`` with ``protocolVersion`` 1 and empty
  ``clientCapabilities`` — no ``fs``, no ``terminal``, so the agent works on
  files itself, within ``cwd``;
- "Session Setup": ``session/new`` with the absolute ``cwd`` and no MCP
  servers, or ``session/load`` of an earlier session when the agent
  advertises ``loadSession``;
- "Prompt Turn": one ``session/prompt`` per turn, ``session/update``
  notifications collected until its response (see ``_turn``);
- "Tool Calls: Requesting Permission": ``session/request_permission``,
  answered by ``PermissionGate``; every other method the agent calls
  (``fs/*``, ``terminal/*``) gets JSON-RPC "method not found";
- "Cancellation": ``session/cancel``, with open permission requests answered
  ``cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import logging
from typing import Any, TypeVar

from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.connection import Connection
from acp.schema import (
    CancelNotification,
    Cost,
    InitializeResponse,
    LoadSessionRequest,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionNotification,
    UsageUpdate,
)
from acp.utils import serialize_params
from pydantic import BaseModel, ValidationError

from oma.activities.acp._process import (
    CANCEL_GRACE_S,
    KILL_GRACE_S,
    AgentProcess,
    resolve_cwd,
)
from oma.activities.acp._turn import ProgressCallback, Turn, TurnResult
from oma.activities.acp.permissions import (
    PermissionGate,
    PermissionQuestion,
    answer,
    permission_record,
)
from oma.core.rules.redact import redact
from oma.core.schema.backends import AcpBackendConfig
from oma.core.schema.errors import AcpAgentExitedError, AcpError, AcpProtocolError, AcpSpawnError
from oma.core.schema.usage import MAX_TURN_COST_USD

HANDSHAKE_TIMEOUT_S = 60.0
"""Seconds an agent has to answer ``initialize`` and open its session. A
command that is not an ACP agent (a CLI started without its ACP flag) would
otherwise be waited on for the whole activity timeout."""


_EXIT_WAIT_S = 1.0
_METHOD_NOT_FOUND = -32601
_AUTH_REQUIRED = -32000

logger = logging.getLogger(__name__)
_Model = TypeVar("_Model", bound=BaseModel)


def _client_info() -> dict[str, str]:
    try:
        version = importlib.metadata.version("oma-temporal")
    except importlib.metadata.PackageNotFoundError:
        version = "0.0.0"
    return {"name": "oma-temporal", "title": "OMA on Temporal", "version": version}


CLIENT_INFO = _client_info()
"""``clientInfo`` sent in ``initialize``."""


class PromptTurn:
    """One ``session/prompt`` in flight, started by ``AcpSession.start_prompt``.

    The request runs in its own task: when the caller awaiting ``result()`` is
    cancelled the turn goes on, so that ``cancel()`` can end it cooperatively
    and still collect what it produced.
    """

    def __init__(self, session: AcpSession, state: Turn, task: asyncio.Task[TurnResult]) -> None:
        self._session = session
        self.state = state
        self.task = task

    async def result(self) -> TurnResult:
        """Wait for the prompt response. Raises the ``AcpError`` of a failed turn."""
        return await asyncio.shield(self.task)

    async def cancel(self) -> TurnResult | None:
        """End this turn as ``AcpSession.cancel`` does. Returns its result —
        also when it had ended already — or ``None`` when it failed or did not
        end within the grace period (the process tree is then killed)."""
        return await self._session._cancel_turn(self)


class AcpSession:
    """An ACP agent subprocess, the client connection to it, and one session.

    Open with ``await AcpSession.open(...)``; then ``prompt()`` once per turn
    (one turn at a time: a second ``prompt()`` waits for the first), and
    ``close()`` at the end. ``session_id`` is the agent's session id;
    ``loaded_session`` is ``True`` when the session was restored with
    ``session/load``.

    The connection's handler tasks carry the context of the activity that
    opened the session, which may be long finished, so nothing here calls
    ``temporalio.activity`` functions: progress reaches the activity through
    the ``on_progress`` callback only.
    """

    def __init__(
        self,
        *,
        agent: str,
        process: AgentProcess,
        gate: PermissionGate,
        system_prompt: str,
        cancel_grace_s: float,
        kill_grace_s: float,
    ) -> None:
        self.agent = agent
        self.session_id = ""
        self.loaded_session = False
        self._process = process
        self._gate = gate
        self._pending_system_prompt = system_prompt
        self._cancel_grace_s = cancel_grace_s
        self._kill_grace_s = kill_grace_s
        assert process.proc.stdin is not None and process.proc.stdout is not None
        self._conn = Connection(self._handle, process.proc.stdin, process.proc.stdout)
        self._turn: Turn | None = None
        self._current: PromptTurn | None = None
        self._turn_lock = asyncio.Lock()
        self._last_used: int | None = None
        self._last_cost: Cost | None = None
        self._broken = False
        self._closing: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls,
        backend: AcpBackendConfig,
        *,
        agent: str,
        system_prompt: str = "",
        resume_session_id: str | None = None,
        cancel_grace_s: float = CANCEL_GRACE_S,
        kill_grace_s: float = KILL_GRACE_S,
        handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
    ) -> AcpSession:
        """Spawn the agent (see ``AgentProcess.spawn``), ``initialize`` it and open a session.

        With ``resume_session_id``, and an agent whose ``initialize`` answer has
        ``agentCapabilities.loadSession``, the session is loaded with
        ``session/load``; if the agent answers that with an error, a new
        session is opened instead. ``system_prompt`` is prepended to the first
        prompt of a new session; a loaded session already has it in its history.

        Raises ``AcpSpawnError`` (command or cwd missing, the process ended
        before answering, or it did not answer ``initialize`` and
        ``session/new`` within ``handshake_timeout_s``), ``AcpProtocolError``
        (a JSON-RPC error, a malformed answer, a protocol version other than
        1), ``InvalidRunInputError`` (a permission policy that cannot work on
        this worker, before spawning).
        On any error or cancellation the process tree is killed.
        """
        gate = PermissionGate(backend.permission)
        process = await AgentProcess.spawn(backend, agent)
        session = cls(
            agent=agent,
            process=process,
            gate=gate,
            system_prompt=system_prompt,
            cancel_grace_s=cancel_grace_s,
            kill_grace_s=kill_grace_s,
        )
        try:
            await asyncio.wait_for(
                session._start(resolve_cwd(backend), resume_session_id), handshake_timeout_s
            )
        except TimeoutError:
            await session.close()
            raise AcpSpawnError(
                session._not_an_agent(f"did not answer within {handshake_timeout_s:g} s")
            ) from None
        except BaseException:
            await session.close()
            raise
        return session

    @property
    def pid(self) -> int:
        """Process id of the agent (in a process group that dies with the worker)."""
        return self._process.pid

    @property
    def alive(self) -> bool:
        """Whether the session can take another turn: not closed, process running."""
        return self._closing is None and not self._broken and self._process.running

    async def prompt(self, text: str, on_progress: ProgressCallback | None = None) -> TurnResult:
        """Run one prompt turn: ``start_prompt(...)`` and wait for its result.

        If the caller is cancelled the turn goes on; ``cancel()`` ends it.
        Raises ``AcpAgentExitedError`` when the process died (or the session
        was closed) during the turn, ``AcpProtocolError`` when the agent
        answered ``session/prompt`` with an error or without a ``stopReason``.
        """
        turn = await self.start_prompt(text, on_progress)
        return await turn.result()

    async def start_prompt(
        self, text: str, on_progress: ProgressCallback | None = None
    ) -> PromptTurn:
        """Send one ``session/prompt`` with ``text`` as a single text content block.

        The first prompt of a new session is ``system_prompt + "\\n\\n" + text``
        (ACP has no system prompt field). ``on_progress`` is called with each
        ``agent_message_chunk`` text as it arrives. Waits for a turn still in
        flight to end first. Raises ``AcpAgentExitedError`` when the session
        cannot take a turn any more.
        """
        async with self._turn_lock:
            if self._current is not None and not self._current.task.done():
                await asyncio.wait({self._current.task})
            if not self.alive:
                raise AcpAgentExitedError(
                    f"agent {self.agent!r}: the session is closed or its process has ended"
                )
            if self._pending_system_prompt:
                text = f"{self._pending_system_prompt}\n\n{text}"
                self._pending_system_prompt = ""
            state = Turn(on_progress)
            state.unpriced = self._unpriced()
            self._turn = state
            task = asyncio.create_task(self._run_turn(state, text), name=f"acp-prompt-{self.agent}")
            self._current = PromptTurn(self, state, task)
            return self._current

    async def cancel(self) -> TurnResult | None:
        """Cancel the turn in flight (ACP "Cancellation").

        Sends the ``session/cancel`` notification, answers every open (and
        every later) permission request of the turn with outcome
        ``cancelled``, and waits up to ``cancel_grace_s`` seconds for the
        prompt response. Returns the turn's result — normally partial output
        with stop reason ``cancelled`` — and the process stays up for the next
        turn. If the agent does not end the turn in time its process tree is
        killed, the session is closed, and ``None`` is returned; ``None`` too
        when no turn is in flight.
        """
        if self._current is None or self._current.task.done():
            return None
        return await self._cancel_turn(self._current)

    async def close(self) -> None:
        """End the session: SIGTERM the agent's process group, SIGKILL it after
        ``kill_grace_s`` seconds, and close the connection. A turn in flight
        fails with ``AcpAgentExitedError``. Idempotent; safe to call concurrently."""
        if self._closing is None:
            self._closing = asyncio.create_task(self._shutdown(), name=f"acp-close-{self.agent}")
        await asyncio.shield(self._closing)

    async def kill(self) -> None:
        """``close()`` without a grace period: the agent's process group gets
        SIGKILL at once (a turn in flight fails with ``AcpAgentExitedError``).
        A close already under way keeps its own grace period."""
        self._kill_grace_s = 0.0
        await self.close()

    # -- protocol steps ------------------------------------------------------

    async def _start(self, cwd: str, resume_session_id: str | None) -> None:
        init = await self._request_model(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                # Written out: serialize_params would drop a default-valued
                # clientCapabilities, and an explicit {} says we offer nothing.
                "clientCapabilities": {},
                "clientInfo": CLIENT_INFO,
            },
            InitializeResponse,
        )
        if init.protocol_version != PROTOCOL_VERSION:
            raise AcpProtocolError(
                f"agent {self.agent!r} speaks ACP protocol version {init.protocol_version}; "
                f"OMA speaks version {PROTOCOL_VERSION}"
            )
        capabilities = init.agent_capabilities
        if (
            resume_session_id
            and capabilities is not None
            and capabilities.load_session
            and await self._load(cwd, resume_session_id)
        ):
            return
        new = await self._request_model(
            "session/new",
            serialize_params(NewSessionRequest(cwd=cwd, mcp_servers=[])),
            NewSessionResponse,
        )
        self.session_id = new.session_id

    async def _load(self, cwd: str, session_id: str) -> bool:
        # Set before the request: the agent replays the history as
        # session/update notifications of this session while it loads.
        self.session_id = session_id
        params = serialize_params(
            LoadSessionRequest(cwd=cwd, session_id=session_id, mcp_servers=[])
        )
        try:
            await self._request("session/load", params)
        except AcpProtocolError as err:
            logger.warning("%s; opening a new session instead", err)
            self.session_id = ""
            self._last_used = self._last_cost = None
            return False
        self.loaded_session = True
        self._pending_system_prompt = ""
        return True

    async def _run_turn(self, state: Turn, text: str) -> TurnResult:
        params = serialize_params(
            PromptRequest(session_id=self.session_id, prompt=[text_block(text)])
        )
        try:
            result = await self._request("session/prompt", params, during_turn=True)
        finally:
            # Updates after the response belong to no turn.
            if self._turn is state:
                self._turn = None
        stop_reason = result.get("stopReason") if isinstance(result, dict) else None
        if not isinstance(stop_reason, str) or not stop_reason:
            raise AcpProtocolError(
                f"agent {self.agent!r} answered session/prompt without a stopReason: "
                f"{redact(json.dumps(result))[:500]}"
            )
        return state.result(stop_reason)

    async def _cancel_turn(self, turn: PromptTurn) -> TurnResult | None:
        task = turn.task
        if not task.done():
            turn.state.cancel_requested.set()
            with contextlib.suppress(ConnectionError):
                await self._conn.send_notification(
                    "session/cancel",
                    serialize_params(CancelNotification(session_id=self.session_id)),
                )
            await asyncio.wait({task}, timeout=self._cancel_grace_s)
            if not task.done():
                logger.warning(
                    "agent %r did not end its turn within %.1f s of session/cancel; killing it",
                    self.agent,
                    self._cancel_grace_s,
                )
                await self.close()
                await asyncio.wait({task})
        if task.cancelled() or task.exception() is not None:
            return None
        return task.result()

    async def _shutdown(self) -> None:
        # Kill first: a sender blocked writing to an agent that no longer
        # reads then fails at once instead of holding up the close.
        await self._process.kill(self._kill_grace_s)
        await self._conn.close()

    # -- the client side: what the agent sends us --------------------------

    async def _handle(self, method: str, params: Any, is_notification: bool) -> Any:
        # The client's only handlers (external-agents.md, "Current limits"):
        # OMA advertises no fs/terminal capability, so serves none of them.
        if is_notification:
            if method == "session/update":
                self._on_session_update(params)
            return None
        if method == "session/request_permission":
            return await self._on_request_permission(params)
        raise RequestError.method_not_found(method)

    def _on_session_update(self, params: Any) -> None:
        # Synchronous on purpose: the connection runs each notification in its
        # own task, and only a handler that never awaits keeps them in order.
        try:
            notification = SessionNotification.model_validate(params)
        except ValidationError:
            # A kind this SDK does not know, or a shape OMA cannot read
            # (e.g. usage_update with used: null): not fatal, ignored.
            logger.debug("ignoring session/update: %s", redact(json.dumps(params))[:200])
            return
        if notification.session_id != self.session_id:
            return
        update, turn = notification.update, self._turn
        if isinstance(update, UsageUpdate):
            increment = self._read_usage(update.used)
            cost = self._read_cost(update.cost)
            if turn is not None:
                turn.input_tokens += increment
                turn.cost_usd += cost
                turn.unpriced = self._unpriced()
        elif turn is not None:
            turn.add(update)

    def _read_usage(self, used: int) -> int:
        # usage_update.used is the context size, cumulative over the session
        # (external-agents.md, "ACP token accounting caveat"): a turn is charged
        # the growth. A drop (the agent compacted its context) counts zero and
        # becomes the new baseline.
        previous, self._last_used = self._last_used, used
        return max(0, used - (previous or 0))

    def _read_cost(self, cost: Cost | None) -> float:
        # usage_update.cost is cumulative over the session too: a turn is
        # charged its growth, in US dollars (another currency is not priced)
        if cost is None:
            return 0.0
        if not 0 <= cost.amount <= MAX_TURN_COST_USD:  # NaN and infinities too
            logger.debug("ignoring usage_update.cost %r: not a cost", cost.amount)
            return 0.0
        previous, self._last_cost = self._last_cost, cost
        if cost.currency != "USD":
            return 0.0
        before = previous.amount if previous is not None and previous.currency == "USD" else 0.0
        return max(0.0, cost.amount - before)

    def _unpriced(self) -> str | None:
        """Why this session's cost is unknown, if it is."""
        if self._last_cost is None:
            return f"ACP agent {self.agent!r} (it reports no usage_update.cost)"
        if self._last_cost.currency != "USD":
            return f"ACP agent {self.agent!r} (its cost is in {self._last_cost.currency})"
        return None

    async def _on_request_permission(self, params: Any) -> RequestPermissionResponse:
        request = RequestPermissionRequest.model_validate(params)
        turn = self._turn
        tool_call = request.tool_call
        # The request may name only the tool call reported earlier in the turn.
        known = turn.tool_call(tool_call.tool_call_id) if turn is not None else None
        question = PermissionQuestion(
            title=tool_call.title or (known.name if known is not None else ""),
            kind=tool_call.kind or (known.input.get("kind") if known is not None else None),
            option_kinds=tuple(option.kind for option in request.options),
        )
        response, option = answer(request.options, await self._decide(turn, question))
        if turn is not None:
            turn.permission_requests.append(
                permission_record(tool_call.tool_call_id, question, option)
            )
        return response

    async def _decide(self, turn: Turn | None, question: PermissionQuestion) -> bool | None:
        """The gate's decision, or ``None`` (answer ``cancelled``) when the turn
        is cancelled before the gate decides — or was already, or is over."""
        if turn is None or turn.cancel_requested.is_set():
            return None
        decision = asyncio.ensure_future(self._gate.approves(question))
        cancelled = asyncio.ensure_future(turn.cancel_requested.wait())
        try:
            await asyncio.wait({decision, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            decision.cancel()
            cancelled.cancel()
        if turn.cancel_requested.is_set() or decision.cancelled():
            return None
        return decision.result()

    # -- requests and their errors --------------------------------------------

    async def _request_model(
        self, method: str, params: dict[str, Any], model: type[_Model]
    ) -> _Model:
        result = await self._request(method, params)
        try:
            return model.model_validate(result)
        except ValidationError as err:
            raise AcpProtocolError(
                f"agent {self.agent!r} answered {method} with a malformed result: "
                f"{redact(str(err))[:500]}"
            ) from err

    async def _request(
        self, method: str, params: dict[str, Any], *, during_turn: bool = False
    ) -> Any:
        try:
            return await self._conn.send_request(method, params)
        except RequestError as err:
            raise self._protocol_error(method, err) from err
        except ConnectionError as err:
            self._broken = True
            raise await self._exited_error(method, during_turn) from err

    def _not_an_agent(self, what: str) -> str:
        message = (
            f"agent {self.agent!r}: command {self._process.command!r} {what}; is it an ACP "
            "agent? (some CLIs need a flag, e.g. `gemini --acp`)"
        )
        stderr = self._process.stderr_tail()
        return message + (f"\nstderr (redacted):\n{stderr}" if stderr else "")

    def _protocol_error(self, method: str, err: RequestError) -> AcpProtocolError:
        detail = f"JSON-RPC error {err.code} {str(err)!r}"
        if method == "initialize" and err.code == _METHOD_NOT_FOUND:
            detail += " (is this command an ACP agent?)"
        if err.data is not None:
            detail += f" {json.dumps(err.data, default=str)[:500]}"
        if err.code == _AUTH_REQUIRED:
            detail += (
                " (authentication required: give the agent its credentials in the "
                "worker's environment or backend.env)"
            )
        return AcpProtocolError(
            redact(f"agent {self.agent!r} answered {method} with {detail}"), rpc_code=err.code
        )

    async def _exited_error(self, method: str, during_turn: bool) -> AcpError:
        command = self._process.command
        if self._closing is not None:
            what = f"the session was closed while {method} was in flight"
        else:
            status = await self._process.exit_status(_EXIT_WAIT_S)
            what = f"command {command!r} ended ({status}) before answering {method}"
        message = f"agent {self.agent!r}: {what}"
        stderr = self._process.stderr_tail()
        if stderr:
            message += f"\nstderr (redacted):\n{stderr}"
        if during_turn:
            return AcpAgentExitedError(message)
        return AcpSpawnError(message)
