"""OMA on Temporal: multi-agent teams whose runs are durable Temporal workflows.

The public Python API, re-exported once here. The names are imported on first
use (PEP 562): importing ``oma`` itself costs nothing, which matters because
the Temporal workflow sandbox imports this package again for every workflow
run, and the command line starts faster.

The package's layers, each over the next (the import-linter contracts in
``pyproject.toml``; ``make lint`` checks them): ``oma.cli``; ``oma.acp`` and
``oma.viewer``; ``oma.client`` and ``oma.agent``; ``oma.worker``;
``oma.workflows`` and ``oma.activities``; ``oma.runtime`` and ``oma.records``
(what Temporal keeps of past runs, read back); ``oma.core``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oma.agent import Agent
    from oma.client import ApprovalAnswer, ApprovalCallback, OpenMultiAgent
    from oma.core.schema.agent_config import AgentConfig
    from oma.core.schema.agent_events import StreamEvent
    from oma.core.schema.approvals import ApprovalDecision, ApprovalRequest, Reviewer
    from oma.core.schema.backends import (
        AcpBackendConfig,
        PermissionPolicy,
        PermissionRule,
        ProcessBackendConfig,
    )
    from oma.core.schema.before_run import BeforeRunContext
    from oma.core.schema.errors import InvalidMessageError, OMAError
    from oma.core.schema.evaluation import EvaluationConfig, EvaluationRecord
    from oma.core.schema.messages import (
        Base64ImageSource,
        ContentBlock,
        ImageBlock,
        LLMMessage,
        TextBlock,
        ToolResultBlock,
        ToolUseBlock,
        URLImageSource,
    )
    from oma.core.schema.plan import CoordinatorConfig, PlanArtifact
    from oma.core.schema.results import AgentRunResult, TeamRunResult
    from oma.core.schema.run_input import AgentRunInput, RunOptions, TeamRunInput
    from oma.core.schema.task import TaskSpec, TaskStatus
    from oma.core.schema.team import TeamConfig
    from oma.core.schema.tools import consequential, retried

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
    "consequential",
    "retried",
]

_MODULES: dict[str, tuple[str, ...]] = {
    "oma.agent": ("Agent",),
    "oma.client": (
        "ApprovalAnswer",
        "ApprovalCallback",
        "OpenMultiAgent",
    ),
    "oma.core.schema.agent_config": ("AgentConfig",),
    "oma.core.schema.approvals": (
        "ApprovalDecision",
        "ApprovalRequest",
        "Reviewer",
    ),
    "oma.core.schema.backends": (
        "AcpBackendConfig",
        "PermissionPolicy",
        "PermissionRule",
        "ProcessBackendConfig",
    ),
    "oma.core.schema.before_run": ("BeforeRunContext",),
    "oma.core.schema.errors": (
        "InvalidMessageError",
        "OMAError",
    ),
    "oma.core.schema.evaluation": (
        "EvaluationConfig",
        "EvaluationRecord",
    ),
    "oma.core.schema.messages": (
        "Base64ImageSource",
        "ContentBlock",
        "ImageBlock",
        "LLMMessage",
        "TextBlock",
        "ToolResultBlock",
        "ToolUseBlock",
        "URLImageSource",
    ),
    "oma.core.schema.plan": (
        "CoordinatorConfig",
        "PlanArtifact",
    ),
    "oma.core.schema.results": (
        "AgentRunResult",
        "TeamRunResult",
    ),
    "oma.core.schema.run_input": (
        "AgentRunInput",
        "RunOptions",
        "TeamRunInput",
    ),
    "oma.core.schema.agent_events": ("StreamEvent",),
    "oma.core.schema.task": (
        "TaskSpec",
        "TaskStatus",
    ),
    "oma.core.schema.team": ("TeamConfig",),
    "oma.core.schema.tools": ("consequential", "retried"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}
"""Where each public name is defined."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'oma' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
