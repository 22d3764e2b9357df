"""Signals to other workflows, sent in the background."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import FailureError


class BackgroundSignals:
    """Signals to other runs sent without waiting for their delivery,
    awaited (``flush``) before the run ends."""

    def __init__(self) -> None:
        self._sending: set[asyncio.Task[None]] = set()

    def send(
        self,
        workflow_id: str,
        signal: str,
        payload: Any,
        undelivered: Callable[[], None] | None = None,
    ) -> None:
        """Signal ``workflow_id``; ``undelivered`` is called if the signal
        fails (the run is not running)."""
        handle = workflow.get_external_workflow_handle(workflow_id)
        task = asyncio.create_task(_deliver(handle, signal, payload, undelivered))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def flush(self) -> None:
        """Return once every signal sent so far has been delivered (or failed:
        a run that ended meanwhile)."""
        if self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)


async def _deliver(
    handle: workflow.ExternalWorkflowHandle[Any],
    signal: str,
    payload: Any,
    undelivered: Callable[[], None] | None,
) -> None:
    try:
        await handle.signal(signal, payload)
    except FailureError:
        if undelivered is None:
            raise
        undelivered()
