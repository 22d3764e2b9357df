"""What a worker has read of the conversations of the runs whose turns it serves.

An ``AgentRun`` sends its conversation to ``llm_turn`` by reference
(``ConversationRef``), and within one execution (a workflow id and a Temporal
run id) the conversation only grows: a message its ``conversation`` query
answered once never changes. So a worker keeps what it read of each run's
conversation, with the chain of its digests
(``oma.core.contracts.llm.message_chain``), and asks the query only for the
messages after them: each turn reads and digests the new messages, not the
whole conversation again (in a 300-call tool loop, 3 MB a turn by the last
ones). A worker that never served the run, or has let it go, reads it from
the first message, as before.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from temporalio.client import Client

from oma.core.contracts.llm import ConversationRef, ConversationSlice, chain_after_json
from oma.core.contracts.names import QueryName
from oma.core.schema.messages import LLMMessage

QUERY_SLICE_BYTES = 1024 * 1024
"""The most JSON one ``conversation`` query returns (Temporal caps a message at 4 MB)."""

CACHE_BYTES = 64 * 1024 * 1024
"""The JSON a worker keeps of the conversations it read, all runs together
(the least recently used go first): about 80 conversations as long as a
200,000-token context, each kept in memory a few times its JSON size."""


@dataclass
class Conversation:
    """The first ``len(messages)`` messages of one run's conversation."""

    messages: list[LLMMessage] = field(default_factory=list)
    chain: list[str] = field(default_factory=lambda: [""])
    """``chain[i]``: the chain of the first ``i`` messages (``message_chain``)."""
    size: int = 0
    """Bytes of the messages' JSON."""

    def extend(self, start: int, part: list[LLMMessage]) -> None:
        """Add ``part``, the messages from ``start`` on, past those already kept
        (another read of the same run may have added some meanwhile)."""
        for message in part[len(self.messages) - start :]:
            text = message.model_dump_json()
            self.messages.append(message)
            self.chain.append(chain_after_json(self.chain[-1], text))
            self.size += len(text)


class Conversations:
    """The conversations a worker read, by ``(workflow id, Temporal run id)``,
    at most ``max_bytes`` of JSON in all (a conversation larger than that is
    read whole at every turn, and not kept)."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._kept: OrderedDict[tuple[str, str], Conversation] = OrderedDict()
        self._size = 0

    async def read(self, client: Client, ref: ConversationRef) -> tuple[list[LLMMessage], str]:
        """The first ``ref.length`` messages of the run ``ref`` names and their
        chain, reading only those this worker does not hold yet through the
        run's ``conversation`` query (in slices of ``QUERY_SLICE_BYTES``).
        Raises ``RuntimeError`` when the run's conversation is shorter."""
        key = (ref.workflow_id, ref.temporal_run_id)
        kept = self._kept.pop(key, None) or Conversation()
        self._size -= kept.size
        handle = client.get_workflow_handle(ref.workflow_id, run_id=ref.temporal_run_id)
        while len(kept.messages) < ref.length:
            start = len(kept.messages)
            part: list[LLMMessage] = await handle.query(
                QueryName.CONVERSATION,
                ConversationSlice(start=start, end=ref.length, max_bytes=QUERY_SLICE_BYTES),
                result_type=list[LLMMessage],
            )
            if not part:
                raise RuntimeError(
                    f"the conversation of {ref.workflow_id} ended before {ref.length}"
                )
            kept.extend(start, part)
        self._keep(key, kept)
        return kept.messages[: ref.length], kept.chain[ref.length]

    def _keep(self, key: tuple[str, str], kept: Conversation) -> None:
        other = self._kept.pop(key, None)  # kept by a read of the same run meanwhile
        if other is not None:
            self._size -= other.size
        if kept.size > self.max_bytes:
            return
        self._kept[key] = kept
        self._size += kept.size
        while self._size > self.max_bytes:
            _, gone = self._kept.popitem(last=False)
            self._size -= gone.size
