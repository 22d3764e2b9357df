"""Temporal's events and commands in the team's words: "task t3's AgentRun
started", "a model turn (llm_turn)", "the decision on dispatch-b arrived".

Two sides of one workflow task: what a history recorded (its events) and
what workflow code issued (the SDK's ``WorkflowCommand`` messages of a
replay). Both name a child by what it is to the run (``<run id>/<task id>``
is a task's run, ``<run id>/coordinator/<step>`` a coordinator step), an
activity by what it does.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.history.v1 import HistoryEvent

from oma.core.contracts.names import ActivityName, SignalName

ACTIVITIES = {
    ActivityName.LLM_TURN: "a model turn (llm_turn)",
    ActivityName.TOOL_CALL: "a tool call (tool_call)",
    ActivityName.PROCESS_RUN: "the process agent's run (process_run)",
    ActivityName.ACP_PROMPT: "an ACP prompt turn (acp_prompt)",
    ActivityName.ACP_CLOSE_RUN: "closing the run's ACP sessions (acp_close_run)",
    ActivityName.MCP_LIST_TOOLS: "listing an MCP server's tools (mcp_list_tools)",
    ActivityName.MCP_CLOSE_RUN: "closing the run's MCP servers (mcp_close_run)",
    ActivityName.BEFORE_RUN: "the agent's before_run hook (before_run)",
    ActivityName.EVALUATE: "the agent's evaluator (evaluate)",
    ActivityName.READ_TASK_OUTPUTS: "reading outputs kept by reference (read_task_outputs)",
    ActivityName.READ_FORK_SOURCE: "reading the fork's source run (read_fork_source)",
    ActivityName.REGISTERED_SEARCH_ATTRIBUTES: (
        "asking whether the namespace has the search attributes (registered_search_attributes)"
    ),
    ActivityName.PLAN_SHARDS: (
        "checking the run's tasks and splitting them into shards (plan_shards)"
    ),
}

SIGNALS = {
    SignalName.DECIDE: "a reviewer's decision (decide)",
    SignalName.FORWARDED_DECISION: "a decision taken at the team run (forwarded_decision)",
    SignalName.BUDGET: "what the run may still spend (budget)",
    SignalName.CLOSE_APPROVALS: "the run's stop, closing open tool requests (close_approvals)",
    SignalName.TOOL_APPROVAL_REQUEST: "a task's gated tool call (tool_approval_request)",
    SignalName.TOOL_APPROVAL_CLOSED: "a task's tool request closed (tool_approval_closed)",
    SignalName.TASK_USAGE: "a task's usage so far (task_usage)",
    SignalName.ABORT: "an abort (abort)",
}


def child(workflow_id: str, run_id: str) -> str:
    """A child workflow as the run knows it."""
    rest = workflow_id.removeprefix(f"{run_id}/")
    if rest == workflow_id:
        return f"workflow {workflow_id}"
    if rest.startswith("coordinator/"):
        return f"the coordinator's {rest.removeprefix('coordinator/')} step"
    return f"task {rest}'s AgentRun"


def activity(name: str) -> str:
    return ACTIVITIES.get(name, f"activity {name}")


def signal(name: str) -> str:
    return SIGNALS.get(name, f"signal {name}")


def recorded(event: HistoryEvent, run_id: str) -> str:
    """What a command's event says the workflow did (``recorded`` side)."""
    which = event.WhichOneof("attributes") or ""
    attrs: Any = getattr(event, which, None)
    if which == "start_child_workflow_execution_initiated_event_attributes":
        return f"{child(attrs.workflow_id, run_id)} started"
    if which == "activity_task_scheduled_event_attributes":
        return f"{activity(attrs.activity_type.name)} scheduled"
    if which == "timer_started_event_attributes":
        return f"a timer of {attrs.start_to_fire_timeout.ToTimedelta().total_seconds():g} s started"
    if which == "timer_canceled_event_attributes":
        return "a timer cancelled"
    if which == "marker_recorded_event_attributes":
        return _marker(attrs)
    if which == "signal_external_workflow_execution_initiated_event_attributes":
        to = child(attrs.workflow_execution.workflow_id, run_id)
        return f"{signal(attrs.signal_name)} sent to {to}"
    if which == "request_cancel_external_workflow_execution_initiated_event_attributes":
        return f"{child(attrs.workflow_execution.workflow_id, run_id)} asked to cancel"
    if which == "activity_task_cancel_requested_event_attributes":
        return "an activity asked to cancel"
    if which == "upsert_workflow_search_attributes_event_attributes":
        return "its search attributes set (OmaStatus, ...)"
    if which == "workflow_properties_modified_event_attributes":
        return "its memo changed"
    if which == "workflow_execution_completed_event_attributes":
        return "the run completed"
    if which == "workflow_execution_failed_event_attributes":
        return f"the run failed: {attrs.failure.message}"
    if which == "workflow_execution_canceled_event_attributes":
        return "the run was cancelled"
    if which == "workflow_execution_continued_as_new_event_attributes":
        return "the run continued as new"
    if which == "workflow_execution_update_accepted_event_attributes":
        return f"update {attrs.accepted_request.input.name} accepted"
    if which == "workflow_execution_update_completed_event_attributes":
        return "an update answered"
    return which.removesuffix("_event_attributes").replace("_", " ") or "an event"


def _marker(attrs: Any) -> str:
    if attrs.marker_name == "core_patch":
        patch = attrs.details.get("patch-data")
        data = patch.payloads[0].data.decode(errors="replace") if patch else ""
        return f"a patch marker ({data})" if data else "a patch marker"
    if attrs.marker_name == "core_local_activity":
        return "a scripted model turn (a local activity)"
    return f"marker {attrs.marker_name}"


def arrived(event: HistoryEvent, run_id: str) -> str | None:
    """What reached the workflow with an event (``None``: nothing the code
    sees, e.g. a workflow task's own events)."""
    which = event.WhichOneof("attributes") or ""
    attrs: Any = getattr(event, which, None)
    closed = {
        "child_workflow_execution_completed_event_attributes": "completed",
        "child_workflow_execution_failed_event_attributes": "failed",
        "child_workflow_execution_canceled_event_attributes": "was cancelled",
        "child_workflow_execution_timed_out_event_attributes": "timed out",
        "child_workflow_execution_terminated_event_attributes": "was terminated",
    }
    if which in closed:
        return f"{child(attrs.workflow_execution.workflow_id, run_id)} {closed[which]}"
    if which == "child_workflow_execution_started_event_attributes":
        return f"{child(attrs.workflow_execution.workflow_id, run_id)} is running"
    if which == "activity_task_completed_event_attributes":
        return "an activity's result"
    if which in (
        "activity_task_failed_event_attributes",
        "activity_task_timed_out_event_attributes",
    ):
        return "an activity failed"
    if which == "activity_task_canceled_event_attributes":
        return "an activity was cancelled"
    if which == "timer_fired_event_attributes":
        return "a timer fired"
    if which == "workflow_execution_signaled_event_attributes":
        return f"{signal(attrs.signal_name)} arrived"
    if which == "workflow_execution_update_accepted_event_attributes":
        return f"update {attrs.accepted_request.input.name} arrived"
    if which == "workflow_execution_cancel_requested_event_attributes":
        return "Temporal cancellation of the run"
    if which == "workflow_execution_started_event_attributes":
        return "the run's input"
    if which == "signal_external_workflow_execution_failed_event_attributes":
        return "a signal could not be delivered"
    return None


def issued(command: Any, run_id: str) -> str | None:
    """What a command the workflow code issued does (``None`` for a query's
    answer, which is no decision)."""
    which = command.WhichOneof("variant") or ""
    attrs: Any = getattr(command, which, None)
    if which == "start_child_workflow_execution":
        return f"{child(attrs.workflow_id, run_id)} started"
    if which == "schedule_activity":
        return f"{activity(attrs.activity_type)} scheduled"
    if which == "schedule_local_activity":
        return "a scripted model turn (a local activity)"
    if which == "start_timer":
        seconds = attrs.start_to_fire_timeout.ToTimedelta().total_seconds()
        return f"a timer of {seconds:g} s started"
    if which == "cancel_timer":
        return "a timer cancelled"
    if which == "set_patch_marker":
        return f"a patch marker ({attrs.patch_id})"
    if which == "signal_external_workflow_execution":
        target = attrs.WhichOneof("target")
        to = (
            attrs.child_workflow_id
            if target == "child_workflow_id"
            else attrs.workflow_execution.workflow_id
        )
        return f"{signal(attrs.signal_name)} sent to {child(to, run_id)}"
    if which == "request_cancel_external_workflow_execution":
        return f"{child(attrs.workflow_execution.workflow_id, run_id)} asked to cancel"
    if which == "cancel_child_workflow_execution":
        return "a task's AgentRun asked to cancel"
    if which == "request_cancel_activity":
        return "an activity asked to cancel"
    if which == "upsert_workflow_search_attributes":
        return "its search attributes set (OmaStatus, ...)"
    if which == "modify_workflow_properties":
        return "its memo changed"
    if which == "complete_workflow_execution":
        return "the run completed"
    if which == "fail_workflow_execution":
        return f"the run failed: {attrs.failure.message}"
    if which == "cancel_workflow_execution":
        return "the run was cancelled"
    if which == "continue_as_new_workflow_execution":
        return "the run continued as new"
    if which in ("respond_to_query", "update_response"):
        return None
    return which.replace("_", " ")
