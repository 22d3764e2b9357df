"""The ports of an in-process agent run (``oma.core.contracts.ports``): direct calls of
the adapters.

``oma.Agent`` hands them to ``oma.core.rules.agent_run.run_agent``, in place of the
activities ``AgentRun`` calls: the provider adapters (their progress events
streamed as they come), the ``process_run`` function, the ACP activities with
a session pool of their own, and the hook and the evaluator as Python callables.
The activity functions raise the ``OMAError`` the ports' contract says (a
worker turns it into a Temporal failure at its boundary,
``oma.worker.activity_errors``; here there is none).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from oma.activities.mcp import McpServerPool
from oma.activities.mcp_tools import list_mcp_tools
from oma.activities.process_run import process_run
from oma.activities.providers import ModelProvider, provider_for
from oma.activities.tool_call import run_tool
from oma.activities.tools.custom import load_custom_tool
from oma.core.contracts.acp import AcpPromptInput, AcpPromptOutput
from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput, price_turn
from oma.core.contracts.mcp import McpListToolsInput, McpListToolsOutput
from oma.core.contracts.process import ProcessRunInput, ProcessRunOutput
from oma.core.contracts.run_hooks import EvaluateInput
from oma.core.contracts.tools import ToolCallInput, ToolCallOutput
from oma.core.rules.evaluation import evaluate, load_evaluator
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.approvals import ApprovalRequest, request_hash
from oma.core.schema.before_run import BeforeRunContext, BeforeRunHook, apply_before_run
from oma.core.schema.errors import OMAError
from oma.core.schema.evaluation import EvaluationRecord
from oma.core.schema.mcp import McpServerConfig
from oma.core.schema.message_guard import latest_user_prompt
from oma.core.schema.messages import LLMMessage
from oma.runtime.approval_callbacks import ApprovalCallback, answer_decision, call_approval_callback

if TYPE_CHECKING:
    from oma.activities.acp_prompt import AcpActivities

ACP_TASK_QUEUE = "local"
"""What an in-process ACP turn reports as its worker's task queue: there is no worker."""


class DirectModel:
    """``ModelPort``: the agent's provider adapter out of ``providers`` (keyed by
    provider name), called with ``on_event`` for its ``TextDelta`` and
    ``ToolCallEvent`` as they stream. Raises ``KeyError`` for a provider
    ``providers`` has no adapter for."""

    def __init__(
        self, providers: Mapping[str, ModelProvider], on_event: Callable[[Any], None]
    ) -> None:
        self._providers = providers
        self._on_event = on_event

    async def turn(self, inp: LlmTurnInput) -> LlmTurnOutput:
        provider = await provider_for(self._providers, inp.agent.resolved_provider)
        return price_turn(inp, await provider.turn(inp, on_event=self._on_event))


class DirectTools:
    """``ToolsetPort``: the ``tool_call`` activity's work, called directly.

    ``on_tool_call``, when given, reviews every call first: it gets the call
    as an ``ApprovalRequest`` (boundary ``tool``, the content and hash a team
    run's tool gate would show) and answers ``approve`` or ``reject`` (``True``
    / ``False``); a rejected call is an error result the model reads. A
    consequential tool (``oma.consequential``) with no ``on_tool_call`` is
    refused: nobody can approve it. The calls of one turn run together,
    but ``on_tool_call`` sees them one at a time, in the order the model
    asked them (as a team run's tool requests are numbered).
    """

    def __init__(self, scope: str, on_tool_call: ApprovalCallback | None = None) -> None:
        self._scope = scope
        self._on_tool_call = on_tool_call
        self.mcp_pool = McpServerPool()  # the Agent's MCP servers, until Agent.close()
        self._reviewing: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    async def call(self, call: ToolCallInput) -> ToolCallOutput:
        refused = await self._review(call)
        return refused if refused is not None else await run_tool(call, mcp_pool=self.mcp_pool)

    async def list_mcp_tools(
        self, agent: str, servers: list[McpServerConfig], custom_tools: dict[str, str]
    ) -> McpListToolsOutput:
        inp = McpListToolsInput(
            run_key=self._scope, agent=agent, servers=servers, custom_tools=custom_tools
        )
        return await list_mcp_tools(self.mcp_pool, inp)

    def _review_lock(self) -> asyncio.Lock:
        """One review at a time (an ``asyncio.Lock`` wakes its waiters in
        order), on whichever event loop runs the agent now."""
        loop = asyncio.get_running_loop()
        if self._reviewing is None or self._reviewing[0] is not loop:
            self._reviewing = (loop, asyncio.Lock())
        return self._reviewing[1]

    async def _review(self, call: ToolCallInput) -> ToolCallOutput | None:
        if self._on_tool_call is None:
            if call.tool.source == "builtin":
                return None
            try:
                if not load_custom_tool(call.tool.source).traits.consequential:
                    return None
            except OMAError:
                return None  # run_tool says why it cannot be loaded
            return ToolCallOutput(
                content=f"not run: {call.tool.name} is consequential and this Agent has no "
                "on_tool_call to approve it",
                is_error=True,
            )
        content = {
            "agent": call.agent,
            "task": None,
            "tool": call.tool.name,
            "tool_use_id": call.tool_use_id,
            "input": call.input,
        }
        now = datetime.now(UTC)
        request = ApprovalRequest(
            request_id=f"tool-{call.tool_use_id}",
            boundary="tool",
            scope=self._scope,
            content=content,
            reason=f"on_tool_call: review {call.agent}'s {call.tool.name} call",
            requested_at=now,
            request_hash=request_hash(self._scope, "tool", content),
        )
        async with self._review_lock():
            answer = await call_approval_callback(self._on_tool_call, request)
        if answer_decision(answer, "on_tool_call") == "approve":
            return None
        return ToolCallOutput(content="not run: on_tool_call rejected it", is_error=True)


class DirectBackend:
    """``BackendPort``: the ``process_run`` activity function, and the ACP
    activities on a session pool of this process (opened on the first ACP
    turn; ``close`` ends its sessions and their process trees)."""

    def __init__(self) -> None:
        self._acp: AcpActivities | None = None

    async def process_run(self, inp: ProcessRunInput) -> ProcessRunOutput:
        return await process_run(inp)

    async def acp_prompt(self, inp: AcpPromptInput) -> AcpPromptOutput:
        if self._acp is None:
            # the acp SDK, imported by an Agent's first ACP turn, not by ``import oma``
            from oma.activities.acp import SessionPool
            from oma.activities.acp_prompt import AcpActivities

            self._acp = AcpActivities(SessionPool(), ACP_TASK_QUEUE)
        return await self._acp.acp_prompt(inp)

    async def close(self) -> None:
        """End every ACP session this backend opened (their process trees with them)."""
        if self._acp is not None:
            await self._acp.pool.close_all()


class DirectRunHooks:
    """``RunHooksPort``: ``hook`` (the ``Agent``'s ``before_run``, whatever the
    agent's config names) and the evaluator called in this process, and
    Python's ``random`` for sampling."""

    def __init__(self, hook: BeforeRunHook | None) -> None:
        self._hook = hook

    async def before_run(self, agent: AgentConfig, messages: list[LLMMessage]) -> list[LLMMessage]:
        if self._hook is None:
            return messages
        ctx = BeforeRunContext(
            agent=agent.name, messages=messages, prompt=latest_user_prompt(messages)
        )
        return await apply_before_run(self._hook, ctx, external=agent.backend is not None)

    async def evaluate(self, inp: EvaluateInput) -> EvaluationRecord:
        evaluator = load_evaluator(inp.config.evaluator)
        return await evaluate(inp.config, evaluator, inp.input, inp.output)

    def random(self) -> float:
        return random.random()
