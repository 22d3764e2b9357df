"""The ports of an agent run: what ``run_agent`` calls out to.

An agent run is written once (``oma.core.rules.agent_run``) against these ports, and
each caller plugs in its own side of them (the layers of ``pyproject.toml``'s import contracts):

- in a workflow (``AgentRun``) every call is an activity
  (``oma.workflows._agent_ports``): ``llm_turn``, ``process_run``,
  ``acp_prompt``, ``before_run``, ``evaluate``;
- in-process (``oma.Agent``) every call goes to the adapter directly
  (``oma.agent.ports``): a provider adapter, the ``process_run`` function,
  the ACP session pool, the hook and the evaluator as Python callables.

A port reports a failure of the run as an ``OMAError``; anything else it
raises (a Temporal ``ActivityError``, a cancellation) passes through the run
untouched, for its caller to map.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from oma.core.contracts.acp import AcpPromptInput, AcpPromptOutput
from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput
from oma.core.contracts.mcp import McpListToolsOutput
from oma.core.contracts.process import ProcessRunInput, ProcessRunOutput
from oma.core.contracts.run_hooks import EvaluateInput
from oma.core.contracts.tools import ToolCallInput, ToolCallOutput
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.agent_events import AgentStart
from oma.core.schema.evaluation import EvaluationRecord
from oma.core.schema.mcp import McpServerConfig
from oma.core.schema.messages import LLMMessage


class ModelPort(Protocol):
    """One model turn of an LLM agent (the ``llm_turn`` activity's contract).

    Every provider adapter is one (``oma.activities.providers``).
    """

    async def turn(self, inp: LlmTurnInput) -> LlmTurnOutput:
        """The assistant's answer to ``inp.messages``; raises ``ProviderError``,
        ``MissingCredentialsError``, ``ScriptExhaustedError``."""
        ...


class BackendPort(Protocol):
    """One turn of an external agent: a ``process`` run or an ACP prompt turn."""

    async def process_run(self, inp: ProcessRunInput) -> ProcessRunOutput:
        """Run the agent's command once (the ``process_run`` activity's contract);
        raises ``ProcessFailedError``, ``ProcessSpawnError``, ``EmptyPromptError``,
        ``OutputTooLargeError``."""
        ...

    async def acp_prompt(self, inp: AcpPromptInput) -> AcpPromptOutput:
        """One ``session/prompt`` turn in the session ``inp.run_key`` holds for
        ``inp.agent``, opened on first use (the ``acp_prompt`` activity's
        contract). Where the session lives is the port's business."""
        ...


class RunHooksPort(Protocol):
    """The user's code around a run: the ``before_run`` hook and the online
    evaluator; and the random draw that samples runs for evaluation."""

    async def before_run(self, agent: AgentConfig, messages: list[LLMMessage]) -> list[LLMMessage]:
        """The messages the run uses: ``messages`` as ``agent``'s hook rewrote them
        (``oma.core.schema.before_run.apply_before_run``), or unchanged when it has none.
        Raises ``InvalidHookError`` and ``InvalidMessageError``."""
        ...

    async def evaluate(self, inp: EvaluateInput) -> EvaluationRecord:
        """The evaluator's record of a sampled run (``oma.core.rules.evaluation.evaluate``);
        raises ``InvalidHookError`` when it cannot be loaded."""
        ...

    def random(self) -> float:
        """A uniform draw in ``[0, 1)``; in a workflow ``workflow.random()``, so
        that a replay samples the same runs."""
        ...


class ToolsetPort(Protocol):
    """One call of one of an LLM agent's tools (the ``tool_call`` activity's
    contract). What the tool raises, and a call that could not run at all,
    come back as an ``is_error`` output with a message, never as an exception
    (a cancellation excepted)."""

    async def call(self, call: ToolCallInput) -> ToolCallOutput: ...

    async def list_mcp_tools(
        self, agent: str, servers: list[McpServerConfig], custom_tools: dict[str, str]
    ) -> McpListToolsOutput:
        """Start (or reach) the agent's MCP servers for this run and list their
        tools (the ``mcp_list_tools`` activity's contract), once per agent
        run; the port picks the run key its calls carry (``run_key`` of the
        output). ``custom_tools``: the agent's, name -> import path, which no
        listed tool may shadow. Raises ``McpServerError``/
        ``MissingCredentialsError``/``InvalidRunInputError`` (an activity's
        failure in a workflow)."""
        ...


@dataclass(frozen=True)
class AgentPorts:
    """Everything an agent run calls out to, and where its progress goes."""

    model: ModelPort
    tools: ToolsetPort
    backend: BackendPort
    hooks: RunHooksPort
    on_event: Callable[[AgentStart], None]
    """Receives the run's ``agent_start`` event (the model port streams the rest)."""
