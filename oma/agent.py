"""``Agent``: one agent, run from Python without Temporal.

The API table of ``shared/reference/structured-input.md``, in Python:

- ``run(input)``: a string is one user text message; a list is a complete
  ``list[LLMMessage]``. Fresh: no persistent history.
- ``stream(input)``: as ``run``, as events; the input is validated when
  ``stream()`` is called.
- ``prompt(input)``: a string, or the content blocks of one user turn;
  appends the turn and the answer to the persistent history.

The model loop is the one ``AgentRun`` runs (``oma.core.agent_loop``): here its
turns call the provider adapter directly instead of the ``llm_turn``
activity, and external agents call the ``process_run`` / ``acp_prompt``
activity functions directly.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import logging
import random
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from temporalio.exceptions import ApplicationError

from oma.core.agent_config import AgentConfig
from oma.core.agent_loop import run_model_loop
from oma.core.before_run import BeforeRunContext, BeforeRunHook, apply_before_run, load_hook
from oma.core.errors import OMAError
from oma.core.evaluation import EvaluationRecord, evaluate, is_sampled, load_evaluator, not_sampled
from oma.core.llm import LlmTurnInput, LlmTurnOutput
from oma.core.message_guard import latest_user_prompt, to_messages, validate_content_blocks
from oma.core.messages import LLMMessage
from oma.core.results import AgentRunResult
from oma.core.stream import Done, StreamEvent, agent_start

ProgressCallback = Callable[[StreamEvent], Any]
"""Receives a copy of every event of a run; what it does cannot affect the run."""

logger = logging.getLogger(__name__)


class Agent:
    """One agent, configured by ``AgentConfig`` (or the same as a dict).

    ``before_run`` is a hook (a callable, or an import path) called with a
    copy of the effective input before every run (see ``oma.core.before_run``);
    ``on_progress`` receives copies of the run's events. ``providers`` maps
    provider names to adapters (default: the Anthropic adapter, reading
    ``ANTHROPIC_API_KEY``, and the scripted one).

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
        providers: Mapping[str, Any] | None = None,
    ) -> None:
        self.config = (
            config if isinstance(config, AgentConfig) else AgentConfig.model_validate(config)
        )
        hook = before_run if before_run is not None else self.config.before_run
        self._before_run = load_hook(hook) if isinstance(hook, str) else hook
        self._on_progress = on_progress
        self._providers = dict(providers) if providers is not None else None
        self._history: list[LLMMessage] = copy.deepcopy(self.config.history or [])
        self._acp: Any = None  # the ACP activities and their session pool, on first use
        self._run_key = f"agent:{self.config.name}:{uuid.uuid4().hex}"

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
        """End the ACP session this agent opened, if any (its process tree with it)."""
        if self._acp is not None:
            await self._acp.pool.close_all()

    def _checked_input(self, input: str | Sequence[Any]) -> tuple[list[LLMMessage], bool]:
        messages, structured = to_messages(input)
        if structured:
            self.config.check_accepts_messages()
        return messages, structured

    async def _stream(
        self, messages: list[LLMMessage], structured: bool
    ) -> AsyncIterator[StreamEvent]:
        queue: asyncio.Queue[StreamEvent] = asyncio.Queue()
        run = asyncio.create_task(self._execute(messages, structured, on_event=queue.put_nowait))
        try:
            while True:
                event = await queue.get()
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
        messages = await self._apply_hook(messages)
        emit = self._emitter(on_event)
        prompt = None if structured else latest_user_prompt(messages)
        start = agent_start(self.config.name, prompt, messages if structured else None)
        emit(start)
        result = AgentRunResult(agent=self.config.name, status="completed")
        try:
            if self.config.backend is None:
                await run_model_loop(self.config, messages, self._model_call(emit), result)
            elif self.config.backend.kind == "process":
                await self._run_process(latest_user_prompt(messages), result)
            else:
                await self._run_acp(latest_user_prompt(messages), result)
        except OMAError as err:
            result.status, result.error, result.error_code = "failed", err.message, err.code
        except ApplicationError as err:
            result.status, result.error, result.error_code = "failed", err.message, err.type
        if result.status == "completed":
            result.evaluation = await self._evaluate(start.payload, result.output)
        emit(Done(result=result))
        return result

    async def _evaluate(self, run_input: dict[str, Any], output: str) -> EvaluationRecord | None:
        config = self.config.evaluation
        if config is None:
            return None
        if not is_sampled(config.sample_rate, random.random()):
            return not_sampled(config)
        return await evaluate(config, load_evaluator(config.evaluator), run_input, output)

    async def _apply_hook(self, messages: list[LLMMessage]) -> list[LLMMessage]:
        if self._before_run is None:
            return messages
        ctx = BeforeRunContext(
            agent=self.config.name, messages=messages, prompt=latest_user_prompt(messages)
        )
        return await apply_before_run(self._before_run, ctx, external=self.is_external)

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

    def _model_call(self, emit: Callable[[Any], None]) -> Callable[[LlmTurnInput], Any]:
        provider = self._provider(self.config.resolved_provider)

        async def call(turn: LlmTurnInput) -> LlmTurnOutput:
            out: LlmTurnOutput = await provider.turn(turn, on_event=emit)
            return out

        return call

    def _provider(self, name: str) -> Any:
        if self._providers is None:
            anthropic = importlib.import_module("oma.activities.providers.anthropic")
            scripted = importlib.import_module("oma.activities.providers.scripted")
            self._providers = {
                "anthropic": anthropic.AnthropicProvider(),
                "scripted": scripted.ScriptedProvider(),
            }
        return self._providers[name]

    async def _run_process(self, prompt: str, result: AgentRunResult) -> None:
        from oma.core.process import ProcessRunInput

        process_run = importlib.import_module("oma.activities.process_run").process_run
        assert self.config.backend is not None and self.config.backend.kind == "process"
        out = await process_run(
            ProcessRunInput(
                agent=self.config.name,
                backend=self.config.backend,
                system_prompt=self.config.system_prompt,
                prompt=prompt,
            )
        )
        result.turns, result.output = 1, out.stdout

    async def _run_acp(self, prompt: str, result: AgentRunResult) -> None:
        from oma.core.acp import AcpPromptInput, record_acp_turn

        assert self.config.backend is not None and self.config.backend.kind == "acp"
        if self._acp is None:
            acp = importlib.import_module("oma.activities.acp_prompt")
            pool = importlib.import_module("oma.activities.acp.pool").SessionPool()
            self._acp = acp.AcpActivities(pool, "local")
        out = await self._acp.acp_prompt(
            AcpPromptInput(
                run_key=self._run_key,
                agent=self.config.name,
                backend=self.config.backend,
                system_prompt=self.config.system_prompt,
                prompt=prompt,
            )
        )
        record_acp_turn(result, out)
