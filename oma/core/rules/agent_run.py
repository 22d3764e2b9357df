"""One agent run, written once: for the ``AgentRun`` workflow and the in-process ``Agent``.

``run_agent`` does the steps of a run in order — the ``before_run`` hook, the
prompt and the ``agent_start`` event, the agent's turns (the model loop, one
process run, or one ACP prompt turn), the online evaluation — against the
ports of ``oma.core.contracts.ports``. It is deterministic given what the ports return,
so it may run in workflow code.
"""

from __future__ import annotations

from typing import Any

from oma.core.contracts.acp import AcpPromptInput, record_acp_turn
from oma.core.contracts.budget import RunBudget
from oma.core.contracts.ports import AgentPorts
from oma.core.contracts.process import ProcessRunInput
from oma.core.contracts.run_hooks import EvaluateInput
from oma.core.rules.agent_loop import run_model_loop
from oma.core.rules.evaluation import is_sampled, not_sampled
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.agent_events import agent_start
from oma.core.schema.errors import OMAError
from oma.core.schema.message_guard import latest_user_prompt
from oma.core.schema.messages import LLMMessage
from oma.core.schema.pricing import ModelPrice
from oma.core.schema.results import AgentRunResult


async def run_agent(
    agent: AgentConfig,
    messages: list[LLMMessage],
    *,
    structured: bool,
    run_key: str,
    ports: AgentPorts,
    result: AgentRunResult,
    budget: RunBudget | None = None,
    pricing: dict[str, ModelPrice] | None = None,
) -> AgentRunResult:
    """Run ``agent`` on ``messages`` and return ``result``, updated as the run goes.

    ``structured``: the caller gave a message list (``agent_start``'s payload is
    then ``{"messages": [...]}``, else ``{"prompt": str}``; structured-input.md,
    "Progress and online evaluation"). ``run_key``: the run that owns the
    agent's ACP sessions (``AcpPromptInput.run_key``). ``result`` is the
    caller's, so that it can show the run while it goes. ``budget`` and
    ``pricing``: the tokens and dollars an LLM agent's turns may use, and
    the run's price overrides (``run_model_loop``).

    The steps: ``ports.hooks.before_run``; ``agent_start`` to
    ``ports.on_event``; then an LLM agent's model loop
    (``oma.core.rules.agent_loop``: ``turns``, ``token_usage``, ``messages``,
    ``output``), a ``process`` agent's one run (``turns`` 1, ``output`` its
    stdout) or an ``acp`` agent's one prompt turn (``record_acp_turn``); last,
    when the run completed and the agent has an ``evaluation``, the sampling
    draw and ``evaluation`` (the evaluator's record, or a not-sampled one).

    Errors: an ``OMAError`` from the agent's turns marks ``result`` failed
    (``status``, ``error``, ``error_code``, with turns and usage as far as
    they got) and is raised again, so the caller decides what a failed run is:
    a failed workflow, or a result ``Agent.run`` returns. Errors of the hook
    and of the evaluator propagate with ``result`` as it was, and so does
    anything a port raises that is not an ``OMAError`` (a Temporal
    ``ActivityError``, a cancellation).
    """
    messages = await ports.hooks.before_run(agent, messages)
    prompt = latest_user_prompt(messages)
    start = agent_start(agent.name, prompt, messages if structured else None)
    ports.on_event(start)
    try:
        await _turns(agent, messages, prompt, run_key, ports, result, budget, pricing)
    except OMAError as err:
        result.status, result.error, result.error_code = "failed", err.message, err.code
        raise
    await _evaluate(agent, start.payload, ports, result)
    return result


async def _turns(
    agent: AgentConfig,
    messages: list[LLMMessage],
    prompt: str,
    run_key: str,
    ports: AgentPorts,
    result: AgentRunResult,
    budget: RunBudget | None,
    pricing: dict[str, ModelPrice] | None,
) -> None:
    backend = agent.backend
    if backend is None:
        await run_model_loop(agent, messages, ports.model, ports.tools, result, budget, pricing)
    elif backend.kind == "process":
        # whatever the command spends (it may call models itself), nobody
        # reports it: unknown, also when it fails
        result.token_usage.unpriced = [f"process agent {agent.name!r}"]
        out = await ports.backend.process_run(
            ProcessRunInput(
                agent=agent.name, backend=backend, system_prompt=agent.system_prompt, prompt=prompt
            )
        )
        result.turns, result.output = 1, out.stdout
        result.backend_attempts = out.attempt
    else:
        turn = await ports.backend.acp_prompt(
            AcpPromptInput(
                run_key=run_key,
                agent=agent.name,
                backend=backend,
                system_prompt=agent.system_prompt,
                prompt=prompt,
            )
        )
        record_acp_turn(result, turn)


async def _evaluate(
    agent: AgentConfig, run_input: dict[str, Any], ports: AgentPorts, result: AgentRunResult
) -> None:
    # a cancelled ACP turn (status "cancelled") has only a partial output: not evaluated
    config = agent.evaluation
    if config is None or result.status != "completed":
        return
    if not is_sampled(config.sample_rate, ports.hooks.random()):
        result.evaluation = not_sampled(config)
        return
    result.evaluation = await ports.hooks.evaluate(
        EvaluateInput(config=config, input=run_input, output=result.output)
    )
