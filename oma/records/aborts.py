"""The ``abort`` signal a run received, read from its history: when, and
its reason (``oma abort`` says a second abort's first was sent; the run
viewer shows the run stopping)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio.api.common.v1 import Payloads
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.converter import DataConverter

from oma.core.contracts.encoding import ENCRYPTED_ENCODING
from oma.core.contracts.names import SignalName
from oma.core.schema.limits import MAX_REASON_CHARS, cut_text


@dataclass(frozen=True)
class AbortSent:
    """The first ``abort`` signal a ``TeamRun`` execution received."""

    at: datetime
    """When the run recorded it (UTC)."""
    reason: str | None
    """Its ``reason``; ``None`` when it gave none (or it cannot be read)."""


def abort_input(event: HistoryEvent) -> Payloads | None:
    """The input of ``event`` when it is an ``abort`` signal the run received."""
    if not event.HasField("workflow_execution_signaled_event_attributes"):
        return None
    signaled = event.workflow_execution_signaled_event_attributes
    return signaled.input if signaled.signal_name == SignalName.ABORT else None


async def abort_sent(client: Client, workflow_id: str) -> AbortSent | None:
    """The first ``abort`` signal the latest execution of ``workflow_id``
    received, read from its history (no worker needed), or ``None``. Raises
    ``RPCError`` as reading the history does."""
    handle = client.get_workflow_handle(workflow_id)
    async for event in handle.fetch_history_events():
        if (payloads := abort_input(event)) is not None:
            at = event.event_time.ToDatetime(tzinfo=UTC)
            return AbortSent(at, await abort_reason(client.data_converter, payloads))
    return None


async def abort_reason(converter: DataConverter, payloads: Payloads) -> str | None:
    """The ``reason`` of an ``abort`` signal's input (``{"reason": ...}``),
    cut to ``MAX_REASON_CHARS`` as the run records it; ``None`` without one or
    when it cannot be read (a key this process lacks)."""
    first = list(payloads.payloads)[:1]
    try:
        if first and first[0].metadata.get("encoding") == ENCRYPTED_ENCODING:
            value = (await converter.decode(first))[0]
        else:  # plaintext as it is (a run from before encryption was turned on)
            value = converter.payload_converter.from_payloads(first)[0] if first else None
    except Exception:  # best effort: an abort without its reason still says it was sent
        return None
    reason = value.get("reason") if isinstance(value, dict) else None
    if not isinstance(reason, str) or not reason:
        return None
    return cut_text(reason, MAX_REASON_CHARS)  # as the run records it
