"""What one prompt turn collects from the agent's ``session/update`` notifications.

ACP "Prompt Turn": between ``session/prompt`` and its response the agent
reports with ``session/update``. The kinds OMA reads (external-agents.md,
"ACP update / stop"):

- ``agent_message_chunk`` with text content: the text of the agent's messages,
  assembled per ``messageId`` into the output as ``_messages`` describes
  (chunks without ``messageId``: joined exactly as sent); each text is also
  passed to the progress callback as it arrives;
- ``tool_call`` / ``tool_call_update``: one ``ToolCallRecord`` per
  ``toolCallId``, in the order first seen, updates merged field by field (a
  field an update leaves out keeps its value). ``name`` is the ``title``,
  ``status`` the ACP status; ``input`` holds the ACP ``kind`` and ``rawInput``
  under those names (``ToolCallRecord`` has no field of its own for the kind);
  ``output`` is ``rawOutput`` (a string as is, other JSON serialized), or else
  the text content blocks joined by newlines;
- ``usage_update``: read by the session, which adds the increments here:
  of ``used`` as input tokens, of ``cost`` (in USD) as ``cost_usd``.

Every other kind is ignored.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass

from acp.schema import (
    AgentMessageChunk,
    ContentToolCallContent,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
)

from oma.activities.acp._messages import AgentMessages
from oma.core.schema.results import PermissionRecord, ToolCallRecord
from oma.core.schema.usage import TokenUsage

ProgressCallback = Callable[[str], None]
"""Called with each text chunk of the agent's message as it arrives."""


@dataclass(frozen=True)
class TurnResult:
    """What one prompt turn produced.

    ``stop_reason`` is the agent's ``stopReason``, verbatim; ``token_usage``
    holds the turn's ``usage_update.used`` increments as ``input_tokens`` and
    its ``usage_update.cost`` increments as ``cost_usd`` (unpriced when the
    agent reports no cost in US dollars).
    """

    output: str
    stop_reason: str
    tool_calls: list[ToolCallRecord]
    permission_requests: list[PermissionRecord]
    token_usage: TokenUsage


class Turn:
    """The state of the prompt turn in flight."""

    def __init__(self, on_progress: ProgressCallback | None) -> None:
        self._messages = AgentMessages()
        self._tool_calls: dict[str, ToolCallRecord] = {}
        self._on_progress = on_progress
        self.permission_requests: list[PermissionRecord] = []
        self.input_tokens = 0
        self.cost_usd = 0.0
        self.unpriced: str | None = None
        """Set by the session when the agent's cost is unknown, saying why."""
        self.cancel_requested = asyncio.Event()
        """Set once ``session/cancel`` is sent: open and later permission
        requests of this turn are answered ``cancelled``."""

    def add(self, update: object) -> None:
        """Take one ``session/update`` (an ``acp.schema`` update model)."""
        if isinstance(update, AgentMessageChunk):
            if isinstance(update.content, TextContentBlock):
                self._messages.add(update.content.text, update.message_id)
                if self._on_progress is not None:
                    self._on_progress(update.content.text)
        elif isinstance(update, ToolCallStart | ToolCallProgress):
            self._merge_tool_call(update)

    def tool_call(self, tool_call_id: str) -> ToolCallRecord | None:
        """The record of a tool call reported in this turn, if any."""
        return self._tool_calls.get(tool_call_id)

    def result(self, stop_reason: str) -> TurnResult:
        return TurnResult(
            output=self._messages.output(),
            stop_reason=stop_reason,
            tool_calls=[call.model_copy(deep=True) for call in self._tool_calls.values()],
            permission_requests=list(self.permission_requests),
            token_usage=TokenUsage(
                input_tokens=self.input_tokens,
                cost_usd=self.cost_usd,
                unpriced=[self.unpriced] if self.unpriced else [],
            ),
        )

    def _merge_tool_call(self, update: ToolCallStart | ToolCallProgress) -> None:
        record = self._tool_calls.get(update.tool_call_id)
        if record is None:
            record = ToolCallRecord(id=update.tool_call_id, name="")
            self._tool_calls[update.tool_call_id] = record
        if update.title is not None:
            record.name = update.title
        if update.status is not None:
            record.status = update.status
        if update.kind is not None:
            record.input["kind"] = update.kind
        if update.raw_input is not None:
            record.input["rawInput"] = update.raw_input
        output = _tool_output(update)
        if output is not None:
            record.output = output


def _tool_output(update: ToolCallStart | ToolCallProgress) -> str | None:
    raw = update.raw_output
    if isinstance(raw, str):
        return raw
    if raw is not None:
        return json.dumps(raw, ensure_ascii=False)
    texts = [
        item.content.text
        for item in update.content or []
        if isinstance(item, ContentToolCallContent) and isinstance(item.content, TextContentBlock)
    ]
    return "\n".join(texts) if texts else None
