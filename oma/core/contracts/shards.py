"""The ``plan_shards`` activity's input and output: a sharded run's input,
checked and split off the workflow's thread (``oma.core.rules.shards``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class PlanShardsInput(BaseModel):
    """Input of the ``plan_shards`` activity."""

    workflow_id: str = Field(description="The sharded run's own workflow id.")
    input: dict[str, Any] = Field(description="The run's TeamRun input as given, decoded.")
    stored: bool = Field(
        default=False,
        description="The run's payloads go to a payload store: its budget is the stored "
        "one (oma.core.schema.limits.state_budget).",
    )


class PlannedShards(BaseModel):
    """Output of the ``plan_shards`` activity: the run's shards
    (``oma.core.schema.dag.shard_plan``), each as the spans of its tasks'
    indices into the run's tasks (``TeamRunInput.given_tasks`` order) and its
    first task's id."""

    spans: list[list[int]] = Field(
        description="Per shard, its tasks' indices as [start, stop) pairs, flat and "
        "ascending: [0, 3, 5, 6] holds tasks 0, 1, 2 and 5."
    )
    first_tasks: list[str] = Field(description="Per shard, the id of its first task.")

    def indices(self, n: int) -> list[int]:
        """The indices of shard ``n``'s tasks (from 0), ascending."""
        spans = self.spans[n]
        return [
            i
            for start, stop in zip(spans[::2], spans[1::2], strict=True)
            for i in range(start, stop)
        ]


def spans_of(indices: list[int]) -> list[int]:
    """``indices`` (ascending) as flat [start, stop) pairs (``PlannedShards.spans``)."""
    spans: list[int] = []
    for i in indices:
        if spans and spans[-1] == i:
            spans[-1] = i + 1
        else:
            spans += [i, i + 1]
    return spans
