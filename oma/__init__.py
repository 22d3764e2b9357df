"""OMA on Temporal: multi-agent teams whose runs are durable Temporal workflows.

The public Python API, re-exported once here.
"""

from oma.agent import Agent
from oma.agent_config import AgentConfig
from oma.approvals import ApprovalDecision, ApprovalRequest, Reviewer
from oma.backends import AcpBackendConfig, PermissionPolicy, PermissionRule, ProcessBackendConfig
from oma.before_run import BeforeRunContext
from oma.client import ApprovalAnswer, ApprovalCallback, OpenMultiAgent
from oma.errors import InvalidMessageError, OMAError
from oma.evaluation import EvaluationConfig, EvaluationRecord
from oma.messages import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    LLMMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
)
from oma.plan import CoordinatorConfig, PlanArtifact
from oma.results import AgentRunResult, TeamRunResult
from oma.run_input import AgentRunInput, RunOptions, TeamRunInput
from oma.stream import StreamEvent
from oma.task import TaskSpec, TaskStatus
from oma.team import TeamConfig

__all__ = [
    "AcpBackendConfig",
    "Agent",
    "AgentConfig",
    "AgentRunInput",
    "AgentRunResult",
    "ApprovalAnswer",
    "ApprovalCallback",
    "ApprovalDecision",
    "ApprovalRequest",
    "Base64ImageSource",
    "BeforeRunContext",
    "ContentBlock",
    "CoordinatorConfig",
    "EvaluationConfig",
    "EvaluationRecord",
    "ImageBlock",
    "InvalidMessageError",
    "LLMMessage",
    "OMAError",
    "OpenMultiAgent",
    "PermissionPolicy",
    "PermissionRule",
    "PlanArtifact",
    "ProcessBackendConfig",
    "Reviewer",
    "RunOptions",
    "StreamEvent",
    "TaskSpec",
    "TaskStatus",
    "TeamConfig",
    "TeamRunInput",
    "TeamRunResult",
    "TextBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "URLImageSource",
]
