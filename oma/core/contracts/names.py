"""The names on the wire: every workflow, activity, signal, query and update
name OMA's workflows declare and its worker, client and CLI call.

Both sides use these constants: the worker's ``@activity.defn(name=ActivityName.LLM_TURN)``
and the workflow's ``workflow.execute_activity(ActivityName.LLM_TURN, ...)``, the
workflow's ``@workflow.signal(name=SignalName.ABORT)`` and the client's
``handle.signal(SignalName.ABORT, ...)``; so a name cannot drift on one side
(``tests/worker/test_wire_names.py`` fails on a bare one in such a call under ``oma/``).
Their values are a public interface: histories recorded them and users type
them (``temporal workflow signal --name abort``), so they never change, and a
new one, once released, is permanent (docs/architecture.md, "On Temporal").
Each class is a namespace of constants, never instantiated.
"""

from __future__ import annotations

from typing import Final


class WorkflowName:
    """The workflow types (``@workflow.defn(name=...)``)."""

    TEAM_RUN: Final = "TeamRun"
    """A team run: a task graph of ``AgentRun`` children (``oma/workflows/team_run.py``)."""
    AGENT_RUN: Final = "AgentRun"
    """One agent's run: a task's, a coordinator step's, or ``run_agent``'s."""


class ActivityName:
    """The activity types (``@activity.defn(name=...)``)."""

    LLM_TURN: Final = "llm_turn"
    """A model turn (``LlmTurnInput`` -> ``LlmTurnOutput``)."""
    TOOL_CALL: Final = "tool_call"
    """A tool call (``ToolCallInput`` -> ``ToolCallOutput``)."""
    MCP_LIST_TOOLS: Final = "mcp_list_tools"
    """An agent run's MCP servers started and their tools listed."""
    MCP_CLOSE_RUN: Final = "mcp_close_run"
    """An agent run's MCP servers closed, on one worker."""
    PROCESS_RUN: Final = "process_run"
    """A process agent's run (``ProcessRunInput`` -> ``ProcessRunOutput``)."""
    ACP_PROMPT: Final = "acp_prompt"
    """An ACP prompt turn, on the worker that holds the session."""
    ACP_CLOSE_RUN: Final = "acp_close_run"
    """A run's ACP sessions closed, on one worker."""
    BEFORE_RUN: Final = "before_run"
    """An agent's ``before_run`` hook."""
    EVALUATE: Final = "evaluate"
    """An agent's evaluator."""
    READ_TASK_OUTPUTS: Final = "read_task_outputs"
    """Outputs a resumed run kept by reference, read back."""
    READ_FORK_SOURCE: Final = "read_fork_source"
    """A fork's (or a reusing run's) source run, read."""
    REGISTERED_SEARCH_ATTRIBUTES: Final = "registered_search_attributes"
    """Whether the namespace has OMA's search attributes."""
    PLAN_SHARDS: Final = "plan_shards"
    """A sharded run's input checked and split into shards."""


BACKEND_ACTIVITIES: Final = (ActivityName.PROCESS_RUN, ActivityName.ACP_PROMPT)
"""The activities that run an external agent: their attempts are an agent
run's ``backend_attempts``, so each failure they end with names its attempt
in its details (``{"code", "attempt"}``)."""


class SignalName:
    """The signals (``@workflow.signal(name=...)``)."""

    ABORT: Final = "abort"
    """``TeamRun``: stop gracefully (``{reason}``)."""
    DECIDE: Final = "decide"
    """A reviewer's ``Decision``, fire and forget (the ``decide`` update answers)."""
    TOOL_APPROVAL_REQUEST: Final = "tool_approval_request"
    """Child to parent: a task's gated tool call waits (an ``ApprovalRequest``)."""
    TOOL_APPROVAL_CLOSED: Final = "tool_approval_closed"
    """Child to parent: a task's tool request closed (``ToolRequestClosed``)."""
    TASK_USAGE: Final = "task_usage"
    """Child to parent: a task's usage so far (``UsageReport``)."""
    FORWARDED_DECISION: Final = "forwarded_decision"
    """Parent to child: a decision taken at the team run (``ForwardedDecision``)."""
    BUDGET: Final = "budget"
    """Parent to child: what the run may still spend (``BudgetGrant``)."""
    CLOSE_APPROVALS: Final = "close_approvals"
    """Parent to child: the team run stopped, open tool requests close (``{reason}``)."""


class QueryName:
    """The queries (``@workflow.query(name=...)``)."""

    STATE: Final = "state"
    """The run so far (``TeamRun``: a ``TeamRunResult``; ``AgentRun``: an ``AgentRunResult``)."""
    EVENTS: Final = "events"
    """The run's progress events."""
    SHARED_MEMORY: Final = "shared_memory"
    """``TeamRun``: the run's shared memory."""
    PENDING_APPROVALS: Final = "pending_approvals"
    """The open approval requests."""
    CONVERSATION: Final = "conversation"
    """``AgentRun``: an LLM agent's conversation (the ``llm_turn`` activity reads it)."""
    AGENT: Final = "agent"
    """``AgentRun``: the agent config its model turns are given."""


class UpdateName:
    """The updates (``@workflow.update(name=...)``)."""

    DECIDE: Final = "decide"
    """A reviewer's ``Decision``, validated; answers with the recorded decision."""
