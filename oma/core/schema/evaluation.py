"""Online evaluation as a user writes and reads it: an agent's ``evaluation``
(``EvaluationConfig``: which evaluator, how many runs it samples, what the
record keeps) and a run's ``EvaluationRecord``.

What the record keeps of the run's input and output is governed by
``store_payloads`` (structured-input.md, "Progress and online evaluation"):
``none`` omits the content, ``redacted`` and ``full`` store it bounded to
``max_payload_bytes`` of JSON, ``redacted`` with credentials scrubbed. The
sampling, the storing and the evaluator's call are ``oma.core.rules.evaluation``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

EVALUATOR_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
"""An evaluator's import path: ``package.module:function``."""

StorePayloads = Literal["none", "redacted", "full"]
"""What a record keeps of a run's input and output: nothing, the content with
credentials scrubbed, or the content as it was (both bounded in size)."""


class EvaluationConfig(BaseModel):
    """How an agent's runs are evaluated online."""

    model_config = ConfigDict(extra="forbid")

    evaluator: str = Field(
        pattern=EVALUATOR_PATTERN,
        description="The evaluator function, package.module:function, importable on the worker.",
    )
    sample_rate: float = Field(
        default=1.0, ge=0.0, le=1.0, description="Fraction of runs evaluated: 0 never, 1 always."
    )
    store_payloads: StorePayloads = Field(
        default="none",
        description="What the record keeps of the run's input and output: none | redacted | full.",
    )
    max_payload_bytes: int = Field(
        default=16384,
        ge=2,
        description="Bytes of UTF-8 JSON each of the stored input and output may take.",
    )


class EvaluationRecord(BaseModel):
    """The outcome of evaluating one run (or of deciding not to)."""

    evaluator: str = Field(description="The evaluator's import path.")
    sampled: bool = Field(description="False: the run was not sampled and nothing else is set.")
    score: float | None = None
    label: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    input: Any | None = Field(
        default=None, description="The stored input, per store_payloads (None under none)."
    )
    output: str | None = Field(
        default=None, description="The stored output, per store_payloads (None under none)."
    )
    truncated: bool = Field(
        default=False, description="The stored input or output was cut to max_payload_bytes."
    )
    error: str | None = Field(
        default=None, description="Why the evaluator gave no score (redacted), else None."
    )
