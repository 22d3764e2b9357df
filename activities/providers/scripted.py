"""The ``scripted`` provider: replays an agent's ``script``, one entry per turn.

It exists for the no-key demo and for tests, like the original project's
no-key demo: everything around the model (Temporal, the scheduler,
subprocesses) stays real.
"""

from __future__ import annotations

from collections.abc import Callable

from oma.core.agent_events import TextDelta
from oma.core.errors import ScriptExhaustedError
from oma.core.llm import LlmTurnInput, LlmTurnOutput
from oma.core.messages import TextBlock, text_of
from oma.core.usage import TokenUsage


class ScriptedProvider:
    """Answers turn ``n`` of an agent run with ``agent.script[n]`` as text.

    ``on_event`` (outside Temporal, ``Agent.stream``) gets the answer as one
    ``TextDelta``. Usage is counted as whitespace-separated words (input: the latest message's
    text; output: the answer) so budgets and totals have something real to add.
    Raises ``ScriptExhaustedError`` (non-retryable) when the script has no entry
    for the turn.
    """

    async def turn(
        self, inp: LlmTurnInput, on_event: Callable[[TextDelta], None] | None = None
    ) -> LlmTurnOutput:
        script = inp.agent.script or []
        if inp.turn >= len(script):
            raise ScriptExhaustedError(
                f"agent {inp.agent.name!r} asked for turn {inp.turn + 1} but its script "
                f"has {len(script)} response(s); add responses to 'script'"
            )
        answer = script[inp.turn]
        prompt = text_of(inp.messages[-1].content) if inp.messages else ""
        if on_event is not None:
            on_event(TextDelta(text=answer))
        return LlmTurnOutput(
            content=[TextBlock(text=answer)],
            stop_reason="end_turn",
            usage=TokenUsage(input_tokens=len(prompt.split()), output_tokens=len(answer.split())),
            model="scripted",
        )
