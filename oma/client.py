"""``OpenMultiAgent``: start agent and team runs on Temporal from Python.

The client side only: it validates input, starts ``AgentRun`` / ``TeamRun``
workflows and awaits their results. Workers (``worker.py``, ``oma worker``)
execute them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from oma.agent_config import AgentConfig
from oma.dag import validate_task_graph
from oma.message_guard import to_messages
from oma.results import AgentRunResult, TeamRunResult
from oma.run_input import AgentRunInput, RunOptions, TeamRunInput
from oma.task import TaskSpec
from oma.team import TeamConfig


class OpenMultiAgent:
    """Runs agents and teams as Temporal workflows.

    Connects to ``address`` (default ``TEMPORAL_ADDRESS`` or
    ``localhost:7233``) in ``namespace`` (``TEMPORAL_NAMESPACE`` or
    ``default``) and starts workflows on ``task_queue`` (``OMA_TASK_QUEUE``
    or ``oma``), or uses the given ``client``, which must use the pydantic
    data converter.
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        namespace: str | None = None,
        task_queue: str | None = None,
        client: Client | None = None,
    ) -> None:
        self.address = address or os.environ.get("TEMPORAL_ADDRESS", "localhost:7233")
        self.namespace = namespace or os.environ.get("TEMPORAL_NAMESPACE", "default")
        self.task_queue = task_queue or os.environ.get("OMA_TASK_QUEUE", "oma")
        self._client = client

    async def client(self) -> Client:
        """The Temporal client (connected on first use)."""
        if self._client is None:
            self._client = await Client.connect(
                self.address, namespace=self.namespace, data_converter=pydantic_data_converter
            )
        return self._client

    async def run_agent(
        self,
        config: AgentConfig | Mapping[str, Any],
        input: str | Sequence[Any],
        *,
        workflow_id: str | None = None,
    ) -> AgentRunResult:
        """Run one fresh agent on ``input`` (a string, or a complete message
        list) as an ``AgentRun`` workflow, and return its result.

        Raises ``InvalidMessageError`` for invalid input (or a message list
        for a ``process``/``acp`` agent) before anything starts; a failed run
        raises ``temporalio.client.WorkflowFailureError`` whose cause is an
        ``ApplicationError`` typed with the error code.
        """
        agent = config if isinstance(config, AgentConfig) else AgentConfig.model_validate(config)
        messages, structured = to_messages(input)
        if structured:
            agent.check_accepts_messages()
        run_input = AgentRunInput(agent=agent, input=messages if structured else str(input))
        client = await self.client()
        result: AgentRunResult = await client.execute_workflow(
            "AgentRun",
            run_input,
            id=workflow_id or f"agent-{agent.name}-{uuid.uuid4().hex[:8]}",
            task_queue=self.task_queue,
            result_type=AgentRunResult,
        )
        return result

    async def run_tasks(
        self,
        team: TeamConfig | Mapping[str, Any],
        tasks: Sequence[TaskSpec | Mapping[str, Any]],
        *,
        options: RunOptions | Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
    ) -> TeamRunResult:
        """Run ``tasks`` (text descriptions) across ``team`` as a ``TeamRun``
        workflow and return its result.

        Raises ``pydantic.ValidationError`` for a malformed team or task and
        ``DagValidationError`` for an invalid graph, before anything starts.
        """
        run_input = TeamRunInput.model_validate(
            {"team": team, "tasks": list(tasks), "options": options or {}}
        )
        validate_task_graph(run_input.tasks, (a.name for a in run_input.team.agents))
        client = await self.client()
        result: TeamRunResult = await client.execute_workflow(
            "TeamRun",
            run_input,
            id=workflow_id or f"team-{run_input.team.name}-{uuid.uuid4().hex[:8]}",
            task_queue=self.task_queue,
            result_type=TeamRunResult,
        )
        return result
