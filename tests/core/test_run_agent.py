"""The one agent run (oma.core.rules.agent_run.run_agent), driven by fake ports:
the order of its calls and the result it leaves, without Temporal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from oma.core.contracts.acp import AcpPromptInput, AcpPromptOutput
from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput
from oma.core.contracts.ports import AgentPorts
from oma.core.contracts.process import ProcessRunInput, ProcessRunOutput
from oma.core.contracts.run_hooks import EvaluateInput
from oma.core.rules.agent_run import run_agent
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.agent_events import AgentStart
from oma.core.schema.errors import (
    AgentRefusalError,
    InvalidHookError,
    OMAError,
    ProcessFailedError,
    ProviderError,
)
from oma.core.schema.evaluation import EvaluationRecord
from oma.core.schema.messages import LLMMessage, TextBlock, ToolUseBlock, text_of, user_text
from oma.core.schema.results import AcpSessionInfo, AgentRunResult
from oma.core.schema.usage import TokenUsage

EVALUATION = {"evaluator": "tests.support.hooks:output_length", "sample_rate": 0.5}


class FakePorts:
    """The model, backend and hooks ports at once: each call is logged in
    ``calls`` as ``(port method, what it was given)`` and answered from what
    the test set up (an exception is raised)."""

    def __init__(
        self,
        *,
        answers: list[LlmTurnOutput | Exception] | None = None,
        process: ProcessRunOutput | Exception | None = None,
        acp: AcpPromptOutput | Exception | None = None,
        hook: Callable[[list[LLMMessage]], list[LLMMessage]] | Exception | None = None,
        draw: float = 0.0,
        record: EvaluationRecord | Exception | None = None,
    ) -> None:
        self.calls: list[tuple[str, Any]] = []
        self._answers = list(answers or [])
        self._process, self._acp, self._hook = process, acp, hook
        self._draw, self._record = draw, record

    def ports(self) -> AgentPorts:
        return AgentPorts(model=self, tools=self, backend=self, hooks=self, on_event=self.on_event)

    def on_event(self, event: AgentStart) -> None:
        self.calls.append(("on_event", event))

    async def turn(self, inp: LlmTurnInput) -> LlmTurnOutput:
        self.calls.append(("turn", inp))
        return _answer(self._answers.pop(0))

    async def process_run(self, inp: ProcessRunInput) -> ProcessRunOutput:
        self.calls.append(("process_run", inp))
        return _answer(self._process)

    async def acp_prompt(self, inp: AcpPromptInput) -> AcpPromptOutput:
        self.calls.append(("acp_prompt", inp))
        return _answer(self._acp)

    async def before_run(self, agent: AgentConfig, messages: list[LLMMessage]) -> list[LLMMessage]:
        self.calls.append(("before_run", messages))
        if isinstance(self._hook, Exception):
            raise self._hook
        return messages if self._hook is None else self._hook(messages)

    async def evaluate(self, inp: EvaluateInput) -> EvaluationRecord:
        self.calls.append(("evaluate", inp))
        return _answer(self._record)

    def random(self) -> float:
        self.calls.append(("random", None))
        return self._draw

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def given(self, name: str) -> Any:
        return next(arg for n, arg in self.calls if n == name)


def _answer(value: Any) -> Any:
    if isinstance(value, Exception):
        raise value
    assert value is not None, "the test set up no answer for this call"
    return value


def llm(**fields: Any) -> AgentConfig:
    return AgentConfig.model_validate({"name": "writer", "system_prompt": "Be brief.", **fields})


def process_agent(**fields: Any) -> AgentConfig:
    backend = {"kind": "process", "command": "python3"}
    return llm(backend=backend, **fields)


def acp_agent(**fields: Any) -> AgentConfig:
    backend = {"kind": "acp", "command": "claude-code-acp"}
    return llm(backend=backend, **fields)


def text_answer(text: str, tokens: tuple[int, int] = (3, 2)) -> LlmTurnOutput:
    usage = TokenUsage(input_tokens=tokens[0], output_tokens=tokens[1])
    return LlmTurnOutput(content=[TextBlock(text=text)], stop_reason="end_turn", usage=usage)


def acp_turn(stop_reason: str = "end_turn") -> AcpPromptOutput:
    return AcpPromptOutput(
        output="patched",
        stop_reason=stop_reason,
        token_usage=TokenUsage(input_tokens=40),
        session_id="s-1",
        worker_task_queue="oma/worker-1",
        new_session=True,
    )


def shout(messages: list[LLMMessage]) -> list[LLMMessage]:
    return [user_text(text_of(m.content).upper()) for m in messages]


def fresh(agent: AgentConfig) -> AgentRunResult:
    return AgentRunResult(agent=agent.name, status="completed")


async def run(
    fake: FakePorts,
    agent: AgentConfig,
    prompt: str | list[LLMMessage] = "hello",
    result: AgentRunResult | None = None,
) -> AgentRunResult:
    messages = [user_text(prompt)] if isinstance(prompt, str) else prompt
    return await run_agent(
        agent,
        messages,
        structured=not isinstance(prompt, str),
        run_key="team-1/run-1",
        ports=fake.ports(),
        result=result or fresh(agent),
    )


# -- an LLM agent ----------------------------------------------------------------


async def test_an_llm_run_calls_the_hook_then_announces_the_start_then_takes_its_turn() -> None:
    fake = FakePorts(answers=[text_answer("Hi.")])
    await run(fake, llm())
    assert fake.names() == ["before_run", "on_event", "turn"]


async def test_the_model_turn_gets_the_messages_the_hook_returned() -> None:
    fake = FakePorts(answers=[text_answer("HI.")], hook=shout)
    await run(fake, llm())
    turn = fake.given("turn")
    assert (turn.turn, turn.messages) == (0, [user_text("HELLO")])
    assert fake.given("on_event").payload == {"prompt": "HELLO"}


async def test_a_completed_llm_run_has_its_turns_usage_conversation_and_output() -> None:
    fake = FakePorts(answers=[text_answer("Hi.", tokens=(7, 2))])
    result = await run(fake, llm())
    assert result.model_dump(include={"status", "turns", "token_usage", "output", "messages"}) == {
        "status": "completed",
        "turns": 1,
        "token_usage": TokenUsage(input_tokens=7, output_tokens=2).model_dump(),
        "output": "Hi.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hello"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
        ],
    }


async def test_structured_input_is_announced_as_its_messages() -> None:
    fake = FakePorts(answers=[text_answer("Hi.")])
    await run(fake, llm(), [user_text("look")])
    assert fake.given("on_event").model_dump() == {
        "type": "agent_start",
        "agent": "writer",
        "payload": {"messages": [{"role": "user", "content": [{"type": "text", "text": "look"}]}]},
    }


async def test_a_failed_model_turn_leaves_the_partial_result() -> None:
    # the first turn asks for a tool (none declared): the turn and its usage stay recorded
    tool_use = LlmTurnOutput(
        content=[ToolUseBlock(id="t1", name="bash", input={})],
        stop_reason="tool_use",
        usage=TokenUsage(input_tokens=5, output_tokens=1),
    )
    fake = FakePorts(answers=[tool_use])
    result = fresh(llm())
    with pytest.raises(OMAError):
        await run(fake, llm(), result=result)
    assert result.model_dump(include={"status", "error_code", "turns", "token_usage"}) == {
        "status": "failed",
        "error_code": "UNKNOWN_TOOL",
        "turns": 1,
        "token_usage": TokenUsage(input_tokens=5, output_tokens=1).model_dump(),
    }
    assert len(result.messages) == 2


async def test_a_provider_error_fails_the_run_with_its_code_and_message_and_is_raised_again() -> (
    None
):
    error = ProviderError("HTTP 400 invalid_request_error: image too large")
    fake = FakePorts(answers=[error], record=EvaluationRecord(evaluator="e", sampled=True))
    result = fresh(llm(evaluation=EVALUATION))
    with pytest.raises(ProviderError) as raised:
        await run(fake, llm(evaluation=EVALUATION), result=result)
    assert raised.value is error
    assert (result.status, result.error, result.error_code, result.turns) == (
        "failed",
        "HTTP 400 invalid_request_error: image too large",
        "PROVIDER_ERROR",
        0,
    )
    assert fake.names() == ["before_run", "on_event", "turn"]


async def test_an_error_that_is_not_an_oma_error_passes_through_with_the_result_as_it_was() -> None:
    # e.g. a Temporal ActivityError: the workflow maps it, not the run
    fake = FakePorts(answers=[RuntimeError("activity task failed")])
    result = fresh(llm())
    with pytest.raises(RuntimeError):
        await run(fake, llm(), result=result)
    assert (result.status, result.error, result.error_code) == ("completed", None, None)


# -- the hook and the evaluator ------------------------------------------------------


async def test_a_failing_hook_propagates_before_the_start_and_leaves_the_result_untouched() -> None:
    fake = FakePorts(hook=InvalidHookError("hook 'tests.nowhere:hook': no module"))
    result = fresh(llm())
    with pytest.raises(InvalidHookError):
        await run(fake, llm(), result=result)
    assert fake.names() == ["before_run"]
    assert result == fresh(llm())


async def test_a_sampled_completed_run_is_evaluated_on_its_announced_input_and_output() -> None:
    record = EvaluationRecord(
        evaluator="tests.support.hooks:output_length", sampled=True, score=3.0
    )
    fake = FakePorts(answers=[text_answer("Hi.")], draw=0.49, record=record)
    result = await run(fake, llm(evaluation=EVALUATION))
    assert fake.names() == ["before_run", "on_event", "turn", "random", "evaluate"]
    assert fake.given("evaluate").model_dump(include={"input", "output"}) == {
        "input": {"prompt": "hello"},
        "output": "Hi.",
    }
    assert result.evaluation == record


async def test_a_run_that_is_not_sampled_gets_a_not_sampled_record_without_the_evaluator() -> None:
    fake = FakePorts(answers=[text_answer("Hi.")], draw=0.5)
    result = await run(fake, llm(evaluation=EVALUATION))
    assert fake.names() == ["before_run", "on_event", "turn", "random"]
    assert result.evaluation == EvaluationRecord(
        evaluator="tests.support.hooks:output_length", sampled=False
    )


async def test_an_agent_without_evaluation_draws_nothing() -> None:
    fake = FakePorts(answers=[text_answer("Hi.")])
    result = await run(fake, llm())
    assert "random" not in fake.names()
    assert result.evaluation is None


async def test_an_evaluator_failure_propagates_with_the_completed_result() -> None:
    fake = FakePorts(answers=[text_answer("Hi.")], record=InvalidHookError("no evaluator"))
    result = fresh(llm(evaluation=EVALUATION))
    with pytest.raises(InvalidHookError):
        await run(fake, llm(evaluation=EVALUATION), result=result)
    assert (result.status, result.output, result.evaluation) == ("completed", "Hi.", None)


# -- a process agent ---------------------------------------------------------------


async def test_a_process_agent_runs_once_with_its_system_prompt_and_the_hooked_prompt() -> None:
    fake = FakePorts(process=ProcessRunOutput(stdout="done\n"), hook=shout)
    agent = process_agent()
    result = await run(fake, agent)
    assert fake.names() == ["before_run", "on_event", "process_run"]
    assert fake.given("process_run") == ProcessRunInput(
        agent="writer", backend=agent.backend, system_prompt="Be brief.", prompt="HELLO"
    )
    assert (result.status, result.turns, result.output) == ("completed", 1, "done\n")
    assert result.token_usage == TokenUsage(unpriced=["process agent 'writer'"])


async def test_a_failed_process_fails_the_run_with_its_code() -> None:
    fake = FakePorts(process=ProcessFailedError("command 'python3' exited with status 3"))
    result = fresh(process_agent())
    with pytest.raises(ProcessFailedError):
        await run(fake, process_agent(), result=result)
    assert (result.status, result.error_code, result.turns) == ("failed", "PROCESS_FAILED", 0)


# -- an ACP agent ----------------------------------------------------------------------


async def test_an_acp_turn_goes_to_the_session_of_the_run_key_and_is_recorded() -> None:
    fake = FakePorts(acp=acp_turn())
    agent = acp_agent()
    result = await run(fake, agent)
    assert fake.names() == ["before_run", "on_event", "acp_prompt"]
    assert fake.given("acp_prompt") == AcpPromptInput(
        run_key="team-1/run-1",
        agent="writer",
        backend=agent.backend,
        system_prompt="Be brief.",
        prompt="hello",
    )
    assert result.model_dump(
        include={"status", "turns", "output", "stop_reason", "token_usage", "acp_session"}
    ) == {
        "status": "completed",
        "turns": 1,
        "output": "patched",
        "stop_reason": "end_turn",
        "token_usage": TokenUsage(input_tokens=40).model_dump(),
        "acp_session": AcpSessionInfo(
            session_id="s-1", worker_task_queue="oma/worker-1", new_session=True
        ).model_dump(),
    }


async def test_a_refused_acp_turn_is_recorded_and_fails_the_run() -> None:
    fake = FakePorts(acp=acp_turn("refusal"))
    result = fresh(acp_agent())
    with pytest.raises(AgentRefusalError):
        await run(fake, acp_agent(), result=result)
    assert (result.status, result.error_code, result.stop_reason, result.output) == (
        "failed",
        "AGENT_REFUSAL",
        "refusal",
        "patched",
    )


async def test_a_cancelled_acp_turn_keeps_its_partial_output_and_is_not_evaluated() -> None:
    fake = FakePorts(acp=acp_turn("cancelled"))
    result = await run(fake, acp_agent(evaluation=EVALUATION))
    assert fake.names() == ["before_run", "on_event", "acp_prompt"]
    assert (result.status, result.output, result.evaluation) == ("cancelled", "patched", None)
