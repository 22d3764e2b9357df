"""The ``llm_turn`` activity: one model turn, dispatched on the agent's provider.

An ``AgentRun`` sends its conversation by reference (``LlmTurnInput.conversation``):
the activity reads the messages through the run's ``conversation`` query, in
slices of at most ``QUERY_SLICE_BYTES``, so a long tool loop's history holds
each message once rather than once per turn (docs/tools.md, "History"); the
worker keeps what it read, so a turn reads only the messages added since the
run's previous turn it served (``oma.activities._conversations``). The
agent's config (``LlmTurnInput.agent_ref``: an MCP listing of a thousand
tools is hundreds of KB) likewise: read through the run's ``agent`` query
once, then from this worker's cache, by its digest.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Literal

from temporalio import activity

from oma.activities._conversations import Conversations
from oma.activities.providers import ModelProvider, default_providers, provider_for
from oma.activities.recordings import Recording, Recordings, task_of
from oma.activities.tool_call import offered_tools, tool_traits
from oma.core.contracts.llm import (
    AgentRef,
    LlmTurnInput,
    LlmTurnOutput,
    RequestDigest,
    ToolsDigest,
    legacy_digest,
    price_turn,
    request_digest,
    tools_digest,
)
from oma.core.contracts.names import ActivityName, QueryName
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.errors import RecordingMissError
from oma.core.schema.providers import PROVIDERS


class LlmActivities:
    """Holds the worker's provider adapters (built once per worker, by default
    one per provider of the registry, ``oma.activities.providers``) and exposes
    ``llm_turn``. Credentials are read by the adapters from the worker's
    environment; they never appear in activity input or history."""

    def __init__(
        self,
        providers: Mapping[str, ModelProvider] | None = None,
        *,
        replay: Recording | None = None,
        on_miss: Literal["strict", "fallback"] = "strict",
        conversations: Conversations | None = None,
    ) -> None:
        # by default each adapter is built, and its SDK imported, in a thread
        # at its provider's first turn (``provider_for``): a worker whose runs
        # use no model, or only one provider, never pays for the others
        self.providers: Mapping[str, ModelProvider] = providers or default_providers()
        self.agents: OrderedDict[str, AgentConfig] = OrderedDict()
        """The agent configs turns referred to, by digest, most recent last."""
        self.tools: OrderedDict[str, ToolsDigest] = OrderedDict()
        """The digests of the tools those agents offer, by the agent's digest."""
        self.replay = replay
        """Answers every turn of this worker from these recorded turns
        (``oma.testing.recorded``), ``on_miss`` saying what a miss does."""
        self.on_miss = on_miss
        self.recordings = Recordings()
        self.conversations = conversations or Conversations()
        """What this worker read of its runs' conversations."""

    @activity.defn(name=ActivityName.LLM_TURN)
    async def llm_turn(self, inp: LlmTurnInput) -> LlmTurnOutput:
        """Run one model turn for ``inp.agent``; its usage is priced
        (``oma.core.contracts.llm.price_turn``), so the history records what it cost.

        Raises (a worker records the failure of its code,
        ``oma.worker.activity_errors``):
        ``PROVIDER_ERROR`` (retryable for 429/5xx/network/timeouts),
        ``MISSING_CREDENTIALS``, ``SCRIPT_EXHAUSTED`` (non-retryable).
        """
        if inp.agent_ref is not None:
            inp = inp.model_copy(update={"agent": await self._agent(inp.agent_ref)})
        chain = None
        if inp.conversation is not None:
            messages, chain = await self.conversations.read(activity.client(), inp.conversation)
            inp = inp.model_copy(update={"messages": messages})
        request = None
        if PROVIDERS[inp.agent.resolved_provider].needs_io:
            request = request_digest(inp.agent, inp.messages, self._tools(inp), chain)
        replayed = await self._replayed(inp, request) if request is not None else None
        if replayed is not None:
            return replayed
        provider = await provider_for(self.providers, inp.agent.resolved_provider)
        out = price_turn(inp, await provider.turn(inp))
        out.tool_traits = tool_traits(inp.agent)
        out.request = request
        return out

    async def _replayed(self, inp: LlmTurnInput, request: RequestDigest) -> LlmTurnOutput | None:
        """The recorded answer to this turn, when its run (``inp.recorded``) or
        this worker (``replay``) replays recorded turns: the recording's
        answer, usage and stop reason, at no cost; ``None`` to call the
        provider (live turns, or a miss with ``fallback``). Raises
        ``RecordingMissError`` for a miss with ``strict``."""
        if self.replay is not None:
            recording, on_miss = self.replay, self.on_miss
        elif inp.recorded is not None:
            recorded = inp.recorded
            recording = await self.recordings.of(
                activity.client(), recorded.run_id, recorded.temporal_run_id
            )
            on_miss = recorded.on_miss
        else:
            return None
        legacy = legacy_digest(request, inp.agent)
        found = recording.answer(request, legacy)
        task = task_of(activity.info().workflow_id or "")
        if found is None:
            if on_miss == "fallback":
                return None
            raise RecordingMissError(
                f"agent {inp.agent.name!r}, task {task!r}, model turn {inp.turn + 1}: "
                f"{recording.name} recorded no turn with this request: "
                f"{recording.difference(request, inp.messages, task, legacy)}"
            )
        answer, place = found
        usage = answer.usage.model_copy(update={"cost_usd": 0.0, "unpriced": []})
        return answer.model_copy(
            update={
                "usage": usage,
                "request": request,
                "recorded_from": place.workflow_id,
                "recorded_from_temporal_run_id": place.temporal_run_id,
                "tool_traits": tool_traits(inp.agent),
            }
        )

    def _tools(self, inp: LlmTurnInput) -> ToolsDigest:
        """The digests of the tools ``inp.agent`` offers, kept by its config's
        digest: this worker loads a custom tool once, so one config offers
        the same definitions for the worker's life."""
        if inp.agent_ref is None:
            return tools_digest(offered_tools(inp.agent))
        key = inp.agent_ref.sha256
        digest = self.tools.get(key) or tools_digest(offered_tools(inp.agent))
        self.tools[key] = digest
        self.tools.move_to_end(key)
        while len(self.tools) > AGENT_CACHE_SIZE:
            self.tools.popitem(last=False)
        return digest

    async def _agent(self, ref: AgentRef) -> AgentConfig:
        """The agent ``ref`` names: from the cache, else the run's ``agent`` query."""
        agent = self.agents.get(ref.sha256)
        if agent is None:
            handle = activity.client().get_workflow_handle(
                ref.workflow_id, run_id=ref.temporal_run_id
            )
            agent = await handle.query(QueryName.AGENT, ref.sha256, result_type=_AGENT_OR_NONE)
            if agent is None:
                raise RuntimeError(f"the agent of {ref.workflow_id} is not {ref.sha256}")
        self.agents[ref.sha256] = agent
        self.agents.move_to_end(ref.sha256)
        while len(self.agents) > AGENT_CACHE_SIZE:
            self.agents.popitem(last=False)
        return agent


_AGENT_OR_NONE: Any = AgentConfig | None  # the SDK's result_type is annotated a class

AGENT_CACHE_SIZE = 64
"""Agent configs a worker keeps (an MCP listing of 1,000 tools is ~0.5 MB)."""
