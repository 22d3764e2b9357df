"""OMA on Temporal: multi-agent teams whose runs are durable Temporal workflows.

The public Python API, re-exported once here.
"""

from oma.agent import Agent
from oma.agent_config import AgentConfig
from oma.backends import AcpBackendConfig, PermissionPolicy, PermissionRule, ProcessBackendConfig
from oma.before_run import BeforeRunContext
from oma.client import OpenMultiAgent
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
    "Base64ImageSource",
    "BeforeRunContext",
    "ContentBlock",
    "EvaluationConfig",
    "EvaluationRecord",
    "ImageBlock",
    "InvalidMessageError",
    "LLMMessage",
    "OMAError",
    "OpenMultiAgent",
    "PermissionPolicy",
    "PermissionRule",
    "ProcessBackendConfig",
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
