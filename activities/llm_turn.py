"""The ``llm_turn`` activity: one model turn, dispatched on the agent's provider.

An ``AgentRun`` sends its conversation by reference (``LlmTurnInput.conversation``):
the activity reads the messages through the run's ``conversation`` query, in
slices of at most ``QUERY_SLICE_BYTES``, so a long tool loop's history holds
each message once rather than once per turn (docs/tools.md, "History").
"""

from __future__ import annotations

from collections.abc import Mapping

from temporalio import activity

from oma.activities.providers import ModelProvider, default_providers
from oma.activities.tool_call import tool_traits
from oma.core.errors import OMAError, application_error
from oma.core.llm import (
    ConversationRef,
    ConversationSlice,
    LlmTurnInput,
    LlmTurnOutput,
    price_turn,
)
from oma.core.messages import LLMMessage


class LlmActivities:
    """Holds the worker's provider adapters (built once per worker, by default
    one per provider of the registry, ``oma.activities.providers``) and exposes
    ``llm_turn``. Credentials are read by the adapters from the worker's
    environment; they never appear in activity input or history."""

    def __init__(self, providers: Mapping[str, ModelProvider] | None = None) -> None:
        self.providers: Mapping[str, ModelProvider] = providers or default_providers()

    @activity.defn(name="llm_turn")
    async def llm_turn(self, inp: LlmTurnInput) -> LlmTurnOutput:
        """Run one model turn for ``inp.agent``; its usage is priced
        (``oma.core.llm.price_turn``), so the history records what it cost.

        Raises ``ApplicationError`` typed with the ``OMAError`` code:
        ``PROVIDER_ERROR`` (retryable for 429/5xx/network/timeouts),
        ``MISSING_CREDENTIALS``, ``SCRIPT_EXHAUSTED`` (non-retryable).
        """
        provider = self.providers[inp.agent.resolved_provider]
        if inp.conversation is not None:
            inp = inp.model_copy(update={"messages": await _conversation(inp.conversation)})
        try:
            out = price_turn(inp, await provider.turn(inp))
            out.tool_traits = tool_traits(inp.agent)
            return out
        except OMAError as err:
            raise application_error(err) from err


QUERY_SLICE_BYTES = 1024 * 1024
"""The most JSON one ``conversation`` query returns (Temporal caps a message at 4 MB)."""


async def _conversation(ref: ConversationRef) -> list[LLMMessage]:
    """The first ``ref.length`` messages of the run, read through its query."""
    handle = activity.client().get_workflow_handle(ref.workflow_id, run_id=ref.run_id)
    messages: list[LLMMessage] = []
    while len(messages) < ref.length:
        part: list[LLMMessage] = await handle.query(
            "conversation",
            ConversationSlice(start=len(messages), end=ref.length, max_bytes=QUERY_SLICE_BYTES),
            result_type=list[LLMMessage],
        )
        if not part:
            raise RuntimeError(f"the conversation of {ref.workflow_id} ended before {ref.length}")
        messages += part
    return messages
