"""Signals to other workflows, sent in the background."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow


class BackgroundSignals:
    """Signals to other runs sent without waiting for their delivery,
    awaited (``flush``) before the run ends."""

    def __init__(self) -> None:
        self._sending: set[asyncio.Task[None]] = set()

    def send(self, workflow_id: str, signal: str, payload: Any) -> None:
        handle = workflow.get_external_workflow_handle(workflow_id)
        task = asyncio.create_task(handle.signal(signal, payload))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def flush(self) -> None:
        """Return once every signal sent so far has been delivered (or failed:
        a run that ended meanwhile)."""
        if self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)
