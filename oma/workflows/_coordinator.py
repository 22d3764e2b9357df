"""The coordinator of a goal run: it plans the tasks (one correction turn when
the plan is invalid) and synthesizes the final answer, each step an
``AgentRun`` child named ``<run id>/coordinator/<step>``."""

from __future__ import annotations

from typing import Protocol

from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from oma.core.contracts.names import WorkflowName
    from oma.core.contracts.workflow_ids import coordinator_workflow_id
    from oma.core.schema.errors import (
        AgentRunFailedError,
        PlanValidationError,
        application_error,
    )
    from oma.core.schema.messages import LLMMessage, user_text
    from oma.core.schema.plan import (
        COORDINATOR,
        CoordinatorConfig,
        coordinator_agent,
        correction_prompt,
        planning_prompt,
        read_plan,
        synthesis_prompt,
    )
    from oma.core.schema.results import AgentRunResult
    from oma.core.schema.run_input import AgentRunInput, TeamRunInput
    from oma.core.schema.run_state import TeamRunState
    from oma.core.schema.task import TaskSpec
    from oma.workflows import _input_checks, _patches
    from oma.workflows._children import failed_result
    from oma.workflows._failures import as_failure
    from oma.workflows._visibility import Visibility


class StepCounter(Protocol):
    """Told of every step's result (a failed one too) and the step's name, so
    the run counts its turns and tokens (``TeamRun.count_step``)."""

    def count_step(self, result: AgentRunResult, step: str) -> None: ...


class Coordinator:
    """The coordinator steps of the goal run ``inp``, over its ``state``,
    each counted by ``counter``, each child's search attributes the run's
    ``visibility`` gives; ``stored``: the run's payloads go to a payload
    store (the plan's size check, ``limits.state_budget``)."""

    def __init__(
        self,
        inp: TeamRunInput,
        state: TeamRunState,
        counter: StepCounter,
        visibility: Visibility,
        *,
        stored: bool,
    ) -> None:
        self._inp = inp
        self._config = inp.coordinator or CoordinatorConfig()
        self._state = state
        self._counter = counter
        self._visibility = visibility
        self._stored = stored

    async def plan(self, goal: str) -> list[TaskSpec]:
        """The tasks of the coordinator's plan for ``goal``, checked against
        the run. Raises ``ApplicationError``: ``INVALID_PLAN`` when the plan
        is still invalid after one correction turn, the task graph's errors
        (``INVALID_TASK_GRAPH``, ...), or the code of a failed step."""
        team, strict = self._inp.team, self._inp.options.strict_assignees
        prompt = planning_prompt(team, goal, self._config.instructions)
        answer = await self._step("plan", [user_text(prompt)])
        tasks, errors = read_plan(answer.output, team, strict_assignees=strict)
        if errors:
            messages = [*answer.messages, user_text(correction_prompt(errors))]
            answer = await self._step("plan-correction", messages)
            tasks, errors = read_plan(answer.output, team, strict_assignees=strict)
            if errors:
                raise application_error(
                    PlanValidationError(
                        "the coordinator's plan is invalid after one correction turn: "
                        + "; ".join(errors)
                    )
                )
        with as_failure():
            _input_checks.check_plan(self._inp, tasks, stored=self._stored)
        return tasks

    async def synthesize(self, goal: str) -> None:
        """Set the result's ``final_output``; a failed step leaves its error
        and code on the result instead."""
        result = self._state.result
        prompt = synthesis_prompt(goal, result.tasks)
        try:
            answer = await self._step("synthesis", [user_text(prompt)])
        except ApplicationError as err:
            result.error = f"the coordinator's synthesis failed: {err.message}"
            result.error_code = err.type
            return
        result.final_output = answer.output

    async def _step(self, step: str, messages: list[LLMMessage]) -> AgentRunResult:
        """One step as an ``AgentRun`` child; raises ``ApplicationError`` when it fails."""
        with as_failure():
            agent = coordinator_agent(self._config, self._inp.team, self._state.coordinator_turns)
        try:
            result: AgentRunResult = await workflow.execute_child_workflow(
                WorkflowName.AGENT_RUN,
                AgentRunInput(
                    agent=agent,
                    input=messages,
                    pricing=self._inp.options.pricing,
                    models=self._inp.options.recorded(),
                    patched=_patches.FOR_TASKS,
                ),
                id=coordinator_workflow_id(workflow.info().workflow_id, step),
                result_type=AgentRunResult,
                static_summary=f"{COORDINATOR}: {step}",
                search_attributes=self._visibility.for_child(
                    team=self._inp.team.name, agent=COORDINATOR
                ),
            )
        except ChildWorkflowError as err:
            failed = failed_result(COORDINATOR, err)
            self._counter.count_step(failed, step)
            raise ApplicationError(
                f"coordinator step {step!r} failed: {failed.error}",
                type=failed.error_code or AgentRunFailedError.code,
                non_retryable=True,
            ) from None
        self._counter.count_step(result, step)
        return result
