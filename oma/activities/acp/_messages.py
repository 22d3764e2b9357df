"""The agent's messages in one prompt turn, assembled from ``agent_message_chunk`` text.

ACP "Prompt Turn", "Message IDs" (``ContentChunk.messageId`` in the SDK's
``acp/schema.py``, schema v1.19): an agent MAY put an opaque ``messageId`` on
its message chunks; chunks with the same ``messageId`` belong to the same
message, and a changed ``messageId`` starts a new one. The field is optional:
a chunk without it says nothing about where messages begin or end.

The rule OMA applies (docs/external-agents.md, "Agent messages"):

- a chunk with a ``messageId`` is appended to the message with that id,
  created at its first chunk;
- a chunk without one is appended to the message in progress when that
  message has no id either, and otherwise starts a new message without id, so
  a turn in which no chunk has a ``messageId`` is one message: every chunk,
  repeats included, joined as sent;
- the output is every message of the turn, in the order of its first chunk,
  joined by a blank line (``"\\n\\n"``); a message with no text adds nothing;
- a message with a ``messageId`` whose whole text equals the whole text of an
  earlier message of the turn is a re-send of that message and is left out.
  Agents re-send a streamed block whole under another id (Claude Code's ACP
  adapter does when its own de-duplication misses); the protocol has no way
  to say "this replaces that", so equal text is the only evidence.

Only text content counts; other content blocks, thought chunks and tool calls
are neither text of a message nor message boundaries.
"""

from __future__ import annotations

MESSAGE_SEPARATOR = "\n\n"
"""Put between two messages of a turn in the output."""


class _Message:
    def __init__(self, message_id: str | None) -> None:
        self.message_id = message_id
        self.chunks: list[str] = []

    def text(self) -> str:
        return "".join(self.chunks)


class AgentMessages:
    """The text of the agent's messages in one prompt turn."""

    def __init__(self) -> None:
        self._messages: list[_Message] = []
        self._by_id: dict[str, _Message] = {}
        self._current: _Message | None = None

    def add(self, text: str, message_id: str | None) -> None:
        """Take the text of one ``agent_message_chunk`` and its ``messageId``, if any."""
        message = self._message_for(message_id)
        message.chunks.append(text)
        self._current = message

    def output(self) -> str:
        """The turn's output: its messages joined, re-sends left out (module docstring)."""
        texts: list[str] = []
        seen: set[str] = set()
        for message in self._messages:
            text = message.text()
            if message.message_id is not None and text in seen:
                continue
            seen.add(text)
            if text:
                texts.append(text)
        return MESSAGE_SEPARATOR.join(texts)

    def _message_for(self, message_id: str | None) -> _Message:
        if message_id is None:
            current = self._current
            if current is not None and current.message_id is None:
                return current
            return self._new(None)
        message = self._by_id.get(message_id)
        if message is None:
            message = self._by_id[message_id] = self._new(message_id)
        return message

    def _new(self, message_id: str | None) -> _Message:
        message = _Message(message_id)
        self._messages.append(message)
        return message
