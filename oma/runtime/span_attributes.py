"""OMA's attributes on the SDK's workflow and activity spans (``oma.runtime.tracing``).

A worker interceptor placed inside the SDK's ``OpenTelemetryInterceptor``,
so the span current in a workflow or an activity is the SDK's
``RunWorkflow:<type>`` or ``RunActivity:<type>``. It reads only the
workflow's or activity's own input and result: a workflow's attributes are
the same on every replay, and a replayed workflow's span is never ended (the
SDK's ``ReplaySafeTracerProvider``), so setting them there exports nothing.
Token usage follows the OpenTelemetry GenAI semantic conventions
(``gen_ai.usage.input_tokens`` counts every input token, cached or not).
Imported only when tracing is on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import temporalio.activity
import temporalio.worker
import temporalio.workflow
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue
from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from oma.core.contracts.acp import AcpPromptInput, AcpPromptOutput
from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput
from oma.core.contracts.names import WorkflowName
from oma.core.contracts.process import ProcessRunInput, ProcessRunOutput
from oma.core.contracts.tools import ToolCallInput, ToolCallOutput
from oma.core.contracts.visibility import team_run_result_of
from oma.core.contracts.workflow_ids import team_run_id_of
from oma.core.schema.results import AgentRunResult, TeamRunResult
from oma.core.schema.usage import TokenUsage

Attributes = dict[str, AttributeValue]


class OmaSpanAttributes(temporalio.worker.Interceptor):
    """Sets ``oma.*`` and ``gen_ai.*`` attributes on the current span of every
    workflow run and activity (docs/tracing.md lists them)."""

    def intercept_activity(
        self, next: temporalio.worker.ActivityInboundInterceptor
    ) -> temporalio.worker.ActivityInboundInterceptor:
        return _ActivityAttributes(next)

    def workflow_interceptor_class(
        self, input: temporalio.worker.WorkflowInterceptorClassInput
    ) -> type[temporalio.worker.WorkflowInboundInterceptor]:
        return _WorkflowAttributes


class _ActivityAttributes(temporalio.worker.ActivityInboundInterceptor):
    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        span = trace.get_current_span()
        if not span.is_recording():
            return await self.next.execute_activity(input)
        info = temporalio.activity.info()
        span.set_attributes(_ids(info.workflow_id or ""))
        if input.args:
            span.set_attributes(_activity_input(input.args[0]))
        result = await self.next.execute_activity(input)
        span.set_attributes(_activity_output(result))
        return result


class _WorkflowAttributes(temporalio.worker.WorkflowInboundInterceptor):
    async def execute_workflow(self, input: temporalio.worker.ExecuteWorkflowInput) -> Any:
        span = trace.get_current_span()
        if not span.is_recording():
            return await self.next.execute_workflow(input)
        info = temporalio.workflow.info()
        span.set_attributes(_ids(info.workflow_id))
        if input.args and isinstance(input.args[0], Mapping):
            span.set_attributes(_run_input(info.workflow_type, input.args[0]))
        try:
            result = await self.next.execute_workflow(input)
        except ApplicationError as err:  # a run that did not succeed ends Failed
            _set_run_failure(span, err)
            raise
        _set_run_result(span, result)
        return result


def _ids(workflow_id: str) -> Attributes:
    """``oma.run_id`` (the team run's workflow id) and, in a task's
    ``AgentRun`` (``<run id>/<task id>``, ``oma.core.contracts.workflow_ids``), ``oma.task_id``."""
    run_id = team_run_id_of(workflow_id)
    if run_id is None:
        return {"oma.run_id": workflow_id}
    attrs: Attributes = {"oma.run_id": run_id}
    rest = workflow_id[len(run_id) + 1 :]
    if "/" not in rest:
        attrs["oma.task_id"] = rest
    return attrs


def _run_input(workflow_type: str, raw: Mapping[str, Any]) -> Attributes:
    """The team or agent a run's input (the user's JSON, not yet validated) names."""
    attrs: Attributes = {}
    if workflow_type == WorkflowName.TEAM_RUN:
        team = raw.get("team")
        if isinstance(team, Mapping) and isinstance(team.get("name"), str):
            attrs["oma.team"] = team["name"]
    elif workflow_type == WorkflowName.AGENT_RUN:
        agent = raw.get("agent")
        if isinstance(agent, Mapping) and isinstance(agent.get("name"), str):
            attrs["oma.agent"] = attrs["gen_ai.agent.name"] = agent["name"]
        if isinstance(raw.get("task_id"), str):
            attrs["oma.task_id"] = raw["task_id"]
    return attrs


def _set_run_result(span: Span, result: Any) -> None:
    if isinstance(result, Mapping) and "tasks" in result and "success" in result:
        result = TeamRunResult.model_validate(result)  # a TeamRun returns its JSON
    if isinstance(result, TeamRunResult):
        usage = _usage(result.total_token_usage, "oma")
        span.set_attributes({"oma.status": result.status, **usage})
        if not result.success:
            span.set_status(Status(StatusCode.ERROR, result.error_code or result.status))
    elif isinstance(result, AgentRunResult):
        span.set_attributes({"oma.status": result.status, **_usage(result.token_usage, "oma")})


def _set_run_failure(span: Span, err: ApplicationError) -> None:
    """``oma.error_code`` and, from the result the failure carries (a
    ``TeamRun``'s, ``oma.core.contracts.visibility.team_run_failure``; an ``AgentRun``'s
    partial one), its status and usage; the SDK sets the span's error status."""
    span.set_attributes({"oma.status": "failed", "oma.error_code": err.type or "ApplicationError"})
    partial: TeamRunResult | AgentRunResult | None = team_run_result_of(err)
    if partial is None and err.details:
        with contextlib.suppress(ValidationError):
            partial = AgentRunResult.model_validate(err.details[0])
    if partial is not None:
        _set_run_result(span, partial)


def _activity_input(inp: Any) -> Attributes:
    if isinstance(inp, LlmTurnInput):
        return {
            "gen_ai.operation.name": "chat",
            "oma.agent": inp.agent.name,
            "gen_ai.agent.name": inp.agent.name,
            "gen_ai.provider.name": inp.agent.resolved_provider,
            "gen_ai.request.model": inp.agent.resolved_model,
            "oma.turn": inp.turn,
        }
    if isinstance(inp, ToolCallInput):
        return {
            "gen_ai.operation.name": "execute_tool",
            "oma.agent": inp.agent,
            "gen_ai.tool.name": inp.tool.name,
            "gen_ai.tool.call.id": inp.tool_use_id,
            "oma.tool.source": inp.tool.source,
        }
    if isinstance(inp, ProcessRunInput):
        return {"oma.agent": inp.agent, "oma.process.command": inp.backend.command}
    if isinstance(inp, AcpPromptInput):
        return {
            "gen_ai.operation.name": "invoke_agent",
            "oma.agent": inp.agent,
            "gen_ai.agent.name": inp.agent,
        }
    agent = getattr(inp, "agent", None)
    name = agent if isinstance(agent, str) else getattr(agent, "name", None)
    return {"oma.agent": name} if isinstance(name, str) else {}


def _activity_output(out: Any) -> Attributes:
    if isinstance(out, LlmTurnOutput):
        return {
            "gen_ai.response.model": out.model,
            "gen_ai.response.finish_reasons": (out.stop_reason,),
            **_usage(out.usage, "gen_ai"),
        }
    if isinstance(out, ToolCallOutput):
        return {"oma.tool.is_error": out.is_error}
    if isinstance(out, ProcessRunOutput):
        return {"oma.process.exit_code": out.exit_code}
    if isinstance(out, AcpPromptOutput):
        return {
            "oma.acp.stop_reason": out.stop_reason,
            "oma.acp.session_id": out.session_id,
            **_usage(out.token_usage, "gen_ai"),
        }
    return {}


def _usage(usage: TokenUsage, prefix: str) -> Attributes:
    """``<prefix>.usage.*`` token counts (GenAI names) and ``oma.cost_usd``
    when the cost is known or partly known; ``oma.cost_unpriced`` names the rest."""
    attrs: Attributes = {
        f"{prefix}.usage.input_tokens": usage.input_tokens
        + usage.cache_creation_input_tokens
        + usage.cache_read_input_tokens,
        f"{prefix}.usage.output_tokens": usage.output_tokens,
        f"{prefix}.usage.cache_creation.input_tokens": usage.cache_creation_input_tokens,
        f"{prefix}.usage.cache_read.input_tokens": usage.cache_read_input_tokens,
    }
    if usage.cost_known or usage.cost_usd:
        attrs["oma.cost_usd"] = usage.cost_usd
    if usage.unpriced:
        attrs["oma.cost_unpriced"] = tuple(usage.unpriced)
    return attrs
