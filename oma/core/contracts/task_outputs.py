"""The ``read_task_outputs`` activity's input and output: outputs a run kept
by reference (``oma.core.rules.payload_fit``), read back from its children's
results."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ReadOutputsInput(BaseModel):
    """Input of the ``read_task_outputs`` activity."""

    refs: list[str] = Field(description="AgentRun workflow ids (TaskState.output_ref).")
    run_ids: dict[str, str] = Field(
        default_factory=dict,
        description="A ref -> the run id of its execution (TaskState.output_run_id); a ref "
        "without one reads the latest execution.",
    )


class ReadOutputsOutput(BaseModel):
    """Output of the ``read_task_outputs`` activity."""

    outputs: dict[str, str] = Field(description="Each ref -> the output its result holds.")
