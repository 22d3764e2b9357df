"""The ``scripted`` provider: replays an agent's ``script``, one entry per turn.

It exists for the no-key demo and for tests, like the original project's
no-key demo: everything around the model (Temporal, the scheduler,
subprocesses) stays real.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput
from oma.core.schema.agent_events import TextDelta, ToolCallEvent
from oma.core.schema.errors import ScriptExhaustedError
from oma.core.schema.messages import ContentBlock, TextBlock, ToolUseBlock, text_of
from oma.core.schema.usage import TokenUsage


class ScriptedProvider:
    """Answers turn ``n`` of an agent run with ``agent.script[n]``: a text, or
    the answer's content blocks (a ``tool_use`` block makes the turn's
    ``stop_reason`` ``tool_use``, so scripts drive the real tool loop).

    ``on_event`` (outside Temporal, ``Agent.stream``) gets the answer's text as
    one ``TextDelta`` and each tool call as a ``ToolCallEvent``. Usage is
    counted as whitespace-separated words (input: the latest message's text;
    output: the answer's text and tool inputs) so budgets and totals have
    something real to add. Raises ``ScriptExhaustedError`` (non-retryable)
    when the script has no entry for the turn.
    """

    async def turn(
        self, inp: LlmTurnInput, on_event: Callable[[Any], None] | None = None
    ) -> LlmTurnOutput:
        script = inp.agent.script or []
        if inp.turn >= len(script):
            raise ScriptExhaustedError(
                f"agent {inp.agent.name!r} asked for turn {inp.turn + 1} but its script "
                f"has {len(script)} response(s); add responses to 'script'"
            )
        entry = script[inp.turn]
        content: list[ContentBlock] = (
            [TextBlock(text=entry)] if isinstance(entry, str) else list(entry)
        )
        prompt = text_of(inp.messages[-1].content) if inp.messages else ""
        tool_uses = [b for b in content if isinstance(b, ToolUseBlock)]
        answer = " ".join([text_of(content), *(json.dumps(t.input) for t in tool_uses)])
        if on_event is not None:
            if text_of(content):
                on_event(TextDelta(text=text_of(content)))
            for tool_use in tool_uses:
                on_event(ToolCallEvent(id=tool_use.id, name=tool_use.name, input=tool_use.input))
        return LlmTurnOutput(
            content=content,
            stop_reason="tool_use" if tool_uses else "end_turn",
            usage=TokenUsage(input_tokens=len(prompt.split()), output_tokens=len(answer.split())),
            model="scripted",
        )
