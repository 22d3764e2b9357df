"""The result a ``TeamRun``'s history ends with, read from its last event."""

from __future__ import annotations

from temporalio.api.history.v1 import HistoryEvent
from temporalio.converter import DataConverter

from oma.core.contracts.visibility import team_run_result_of
from oma.core.schema.results import TeamRunResult


async def closed_result(converter: DataConverter, last: HistoryEvent) -> TeamRunResult | None:
    """The result a ``TeamRun``'s last event holds: its completion's, or the
    one a run that did not succeed ends Failed with (the failure's details,
    ``oma.core.contracts.visibility.team_run_result_of``); ``None`` for any
    other event (the run goes on, or ended without one). Raises what
    ``converter`` raises decoding it (a codec key this process lacks)."""
    if last.HasField("workflow_execution_completed_event_attributes"):
        payloads = last.workflow_execution_completed_event_attributes.result.payloads
        values = await converter.decode(payloads)
        return TeamRunResult.model_validate(values[0]) if values else None
    if last.HasField("workflow_execution_failed_event_attributes"):
        failure = last.workflow_execution_failed_event_attributes.failure
        return team_run_result_of(await converter.decode_failure(failure))
    return None
