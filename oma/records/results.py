"""The result a ``TeamRun``'s history ends with, read from its last event."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent

from oma.core.contracts.visibility import team_run_result_of
from oma.core.schema.results import TeamRunResult


class ResultDecoder(Protocol):
    """What ``closed_result`` decodes a last event with: a ``DataConverter``
    (which raises what its codec raises), or a reader's own (the run
    viewer's, which notes what it cannot read and answers nothing for it)."""

    async def decode(self, payloads: Sequence[Payload]) -> list[Any]:
        """The values ``payloads`` hold, as plain JSON data."""
        ...

    async def decode_failure(self, failure: Failure) -> BaseException | None:
        """``failure`` as an exception; ``None`` when it cannot be read."""
        ...


async def closed_result(decoder: ResultDecoder, last: HistoryEvent) -> TeamRunResult | None:
    """The result a ``TeamRun``'s last event holds: its completion's, or the
    one a run that did not succeed ends Failed with (the failure's details,
    ``oma.core.contracts.visibility.team_run_result_of``); ``None`` for any
    other event (the run goes on, or ended without one), and when
    ``decoder`` answers nothing for it. Raises what ``decoder`` raises
    decoding it (a codec key this process lacks), and pydantic's
    ``ValidationError`` for a result that does not read as a
    ``TeamRunResult``."""
    if last.HasField("workflow_execution_completed_event_attributes"):
        payloads = last.workflow_execution_completed_event_attributes.result.payloads
        values = await decoder.decode(payloads)
        return TeamRunResult.model_validate(values[0]) if values else None
    if last.HasField("workflow_execution_failed_event_attributes"):
        failure = last.workflow_execution_failed_event_attributes.failure
        return team_run_result_of(await decoder.decode_failure(failure))
    return None
