"""``Agent``: one agent, run from Python without Temporal.

The API of structured agent input (``docs/structured-input.md``), in Python:

- ``run(input)``: a string is one user text message; a list is a complete
  ``list[LLMMessage]``. Fresh: no persistent history.
- ``stream(input)``: as ``run``, as events; the input is validated when
  ``stream()`` is called.
- ``prompt(input)``: a string, or the content blocks of one user turn;
  appends the turn and the answer to the persistent history.

The run is the one ``AgentRun`` runs (``oma.core.rules.agent_run.run_agent``): here
its ports call the adapters directly (``oma.agent.ports``) instead of the
``llm_turn``, ``process_run``, ``acp_prompt``, ``before_run`` and ``evaluate``
activities.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from oma.activities.providers import ModelProvider, default_providers
from oma.agent.ports import DirectBackend, DirectModel, DirectRunHooks, DirectTools
from oma.core.contracts.ports import AgentPorts
from oma.core.rules.agent_run import run_agent
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.agent_events import Done, StreamEvent
from oma.core.schema.before_run import BeforeRunHook, load_hook
from oma.core.schema.errors import OMAError
from oma.core.schema.message_guard import to_messages, validate_content_blocks
from oma.core.schema.messages import LLMMessage
from oma.core.schema.results import AgentRunResult
from oma.runtime.approval_callbacks import ApprovalCallback

ProgressCallback = Callable[[StreamEvent], Any]
"""Receives a copy of every event of a run; what it does cannot affect the run."""

logger = logging.getLogger(__name__)


class Agent:
    """One agent, configured by ``AgentConfig`` (or the same as a dict).

    ``before_run`` is a hook (a callable, or an import path) called with a
    copy of the effective input before every run (see ``oma.core.schema.before_run``);
    ``on_progress`` receives copies of the run's events; ``on_tool_call``
    reviews each tool call before it runs (an ``ApprovalCallback`` getting
    the call as a ``tool`` ``ApprovalRequest``: ``approve`` or ``reject``;
    without it, only consequential tools are refused). ``providers`` maps
    provider names to adapters (default: one of each provider of
    ``oma.activities.providers.ADAPTERS``, the Anthropic one reading
    ``ANTHROPIC_API_KEY``; each is built, and its SDK imported, by the first
    turn that names its provider).

    Invalid input raises ``InvalidMessageError`` (code ``INVALID_MESSAGE``)
    naming the bad field's path, before the hook, any provider or backend
    call, and any progress event. A failure of the run itself (a provider
    error, a failed process) is not raised: the result has ``status``
    ``failed``, ``error`` and ``error_code``, as a team task's result does.
    """

    def __init__(
        self,
        config: AgentConfig | Mapping[str, Any],
        *,
        before_run: BeforeRunHook | str | None = None,
        on_progress: ProgressCallback | None = None,
        providers: Mapping[str, ModelProvider] | None = None,
        on_tool_call: ApprovalCallback | None = None,
    ) -> None:
        self.config = (
            config if isinstance(config, AgentConfig) else AgentConfig.model_validate(config)
        )
        hook = before_run if before_run is not None else self.config.before_run
        self._hooks = DirectRunHooks(load_hook(hook) if isinstance(hook, str) else hook)
        self._on_progress = on_progress
        self._providers: Mapping[str, ModelProvider] | None = (
            dict(providers) if providers is not None else None
        )
        self._history: list[LLMMessage] = copy.deepcopy(self.config.history or [])
        self._backend = DirectBackend()  # its ACP sessions outlive a run: close() ends them
        self._run_key = f"agent:{self.config.name}:{uuid.uuid4().hex}"
        self._tools = DirectTools(self._run_key, on_tool_call)

    @property
    def is_external(self) -> bool:
        """Whether this agent runs a ``process`` or ``acp`` backend (text input only)."""
        return self.config.backend is not None

    async def run(self, input: str | Sequence[Any]) -> AgentRunResult:
        """Run once on ``input``: a string, or a complete message list.

        Fresh: neither reads nor updates the history ``prompt()`` keeps.
        Raises ``InvalidMessageError`` for invalid input (nothing runs).
        """
        messages, structured = self._checked_input(input)
        return await self._execute(messages, structured, on_event=None)

    def stream(self, input: str | Sequence[Any]) -> AsyncIterator[StreamEvent]:
        """Like ``run``, as an async iterator of events: ``agent_start``,
        ``text_delta``\\ s and ``tool_call``\\ s as they happen, then ``done``
        with the result.

        The input is validated here, when ``stream()`` is called, before the
        iterator starts: invalid input raises ``InvalidMessageError`` at once.
        """
        messages, structured = self._checked_input(input)
        return self._stream(messages, structured)

    async def prompt(self, input: str | Sequence[Any]) -> AgentRunResult:
        """One turn of a persistent conversation: ``input`` (a string, or the
        content blocks of one user turn) is appended to the history with the
        answer, when the run completes.

        LLM agents only keep history; ``AgentConfig.history`` seeds it.
        Invalid input raises ``InvalidMessageError`` and is not appended.
        """
        if isinstance(input, str):
            blocks, structured = to_messages(input)[0][0].content, False
        else:
            self.config.check_accepts_messages()
            blocks, structured = validate_content_blocks(input, history=self._history), True
        turn = LLMMessage(role="user", content=blocks)
        if self.is_external:
            return await self._execute([turn], structured, on_event=None)
        result = await self._execute([*copy.deepcopy(self._history), turn], structured, None)
        if result.status == "completed" and result.messages:
            self._history += [copy.deepcopy(turn), copy.deepcopy(result.messages[-1])]
        return result

    def get_history(self) -> list[LLMMessage]:
        """A deep copy of the persistent conversation ``prompt()`` keeps."""
        return copy.deepcopy(self._history)

    async def close(self) -> None:
        """End the ACP session and the MCP servers this agent opened, if any
        (their process trees with them)."""
        await self._backend.close()
        await self._tools.mcp_pool.close_all()

    def _checked_input(self, input: str | Sequence[Any]) -> tuple[list[LLMMessage], bool]:
        messages, structured = to_messages(input)
        if structured:
            self.config.check_accepts_messages()
        return messages, structured

    async def _stream(
        self, messages: list[LLMMessage], structured: bool
    ) -> AsyncIterator[StreamEvent]:
        queue: asyncio.Queue[StreamEvent | BaseException] = asyncio.Queue()
        run = asyncio.create_task(self._execute(messages, structured, on_event=queue.put_nowait))

        def forward_failure(task: asyncio.Task[AgentRunResult]) -> None:
            # a run that raises (a failing before_run hook or evaluator) sends
            # no Done: its error ends the iteration instead of a wait forever
            if not task.cancelled() and (error := task.exception()) is not None:
                queue.put_nowait(error)

        run.add_done_callback(forward_failure)
        try:
            while True:
                event = await queue.get()
                if isinstance(event, BaseException):
                    raise event
                yield event
                if isinstance(event, Done):
                    return
        finally:
            if not run.done():
                run.cancel()
            await asyncio.gather(run, return_exceptions=True)

    async def _execute(
        self,
        messages: list[LLMMessage],
        structured: bool,
        on_event: Callable[[StreamEvent], None] | None,
    ) -> AgentRunResult:
        emit = self._emitter(on_event)
        ports = AgentPorts(
            model=DirectModel(self._model_providers(), emit),
            tools=self._tools,
            backend=self._backend,
            hooks=self._hooks,
            on_event=emit,
        )
        result = AgentRunResult(agent=self.config.name, status="completed")
        try:
            await run_agent(
                self.config,
                messages,
                structured=structured,
                run_key=self._run_key,
                ports=ports,
                result=result,
            )
        except OMAError:
            # a failed run is a result; a failed before_run hook or evaluator
            # (the run never failed) is the caller's mistake, raised
            if result.status != "failed":
                raise
        emit(Done(result=result))
        return result

    def _model_providers(self) -> Mapping[str, ModelProvider]:
        if self._providers is None:
            self._providers = default_providers()
        return self._providers

    def _emitter(self, on_event: Callable[[StreamEvent], None] | None) -> Callable[[Any], None]:
        def emit(event: Any) -> None:
            if on_event is not None:
                on_event(event)
            if self._on_progress is not None:
                try:
                    self._on_progress(event.model_copy(deep=True))
                except Exception:  # a progress callback cannot affect the run
                    logger.exception("on_progress raised; the run goes on")

        return emit
