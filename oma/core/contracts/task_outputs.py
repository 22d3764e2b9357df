"""The ``read_task_outputs`` activity's input and output: outputs a run kept
by reference (``oma.core.rules.payload_fit``), read back from its children's
results."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ReadOutputsInput(BaseModel):
    """Input of the ``read_task_outputs`` activity. ``temporal_run_ids``
    keeps its JSON key, ``run_ids``: the inputs in histories hold it, and an
    activity in flight during an upgrade reads it."""

    model_config = ConfigDict(
        serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    refs: list[str] = Field(description="AgentRun workflow ids (TaskState.output_ref).")
    temporal_run_ids: dict[str, str] = Field(
        default_factory=dict,
        alias="run_ids",
        description="A ref -> the Temporal run id of its execution (TaskState.output_run_id); "
        "a ref without one reads the latest execution.",
    )


class ReadOutputsOutput(BaseModel):
    """Output of the ``read_task_outputs`` activity."""

    outputs: dict[str, str] = Field(description="Each ref -> the output its result holds.")
