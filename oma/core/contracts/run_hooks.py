"""Inputs and outputs of the activities that run user code around an agent run:
``before_run`` (the hook, loaded by import path) and ``evaluate`` (the online
evaluator). User code may do I/O or be non-deterministic, so in a workflow it
runs as an activity, never in workflow code."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from oma.core.schema.evaluation import EvaluationConfig
from oma.core.schema.messages import LLMMessage


class BeforeRunInput(BaseModel):
    """Apply the hook ``hook`` (``package.module:function``) to ``messages``."""

    agent: str
    hook: str
    messages: list[LLMMessage]
    external: bool = Field(description="process/acp agent: the hook may change prompt only.")


class BeforeRunOutput(BaseModel):
    """The messages the run uses."""

    messages: list[LLMMessage]


class EvaluateInput(BaseModel):
    """Evaluate one sampled run: its effective input and its output."""

    config: EvaluationConfig
    input: Any = Field(description="{'prompt': str} or {'messages': [...]}, as agent_start had it.")
    output: str
