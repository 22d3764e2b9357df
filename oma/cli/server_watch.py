"""While ``oma run`` follows a run: whether the Temporal server answers.

A run does not live in the ``oma run`` that started it: its history is on the
server, and when the server restarts (or the network between them drops) a
worker carries the run on once the server is back. So the command that
follows it says so in one line and goes on following: ``ServerWatch`` asks
the server every ``WATCH_INTERVAL_S`` whether it answers (``GetSystemInfo``,
not retried: one attempt, ``PROBE_TIMEOUT`` at most), says when it stops and
when it answers again, and lets the waits for the run's result sleep until
it does. Interrupted while the server does not answer, the run cannot be
cancelled: ``left_running`` says how to find it again.

Imported by ``oma.cli.run`` only, when a run is followed.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client, RPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from oma.cli.common import err_console, run_text

WATCH_INTERVAL_S = 1.0
"""How often ``ServerWatch`` asks whether the server answers."""

PROBE_TIMEOUT = timedelta(seconds=2)
"""How long one of those questions waits for the answer."""

LOST_STATUSES = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,  # nothing listens, or the connection dropped
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.CANCELLED,  # a long poll cut when the server went away
        RPCStatusCode.UNKNOWN,  # a transport error the client could not name
    }
)
"""The status of a call that failed because the server went away, not because
it refused: a restart, a dropped connection."""


def server_gone(err: BaseException) -> bool:
    """Whether ``err``, raised by a call to the server, says the server went
    away (``LOST_STATUSES``, or a call timed out) rather than answered no."""
    if isinstance(err, RPCTimeoutOrCancelledError):
        return True
    return isinstance(err, RPCError) and err.status in LOST_STATUSES


class ServerWatch:
    """Whether the server of ``client`` answers, said on stderr when that
    changes: one line when it stops (the run ``workflow_id`` goes on there,
    followed again once it is back), one when it answers again.

    ``watch`` asks every ``WATCH_INTERVAL_S`` until cancelled, ``probe``
    once; ``answered`` is what another call to the server reports when it
    got an answer; ``answering`` waits until the server answers (at once
    when it does)."""

    def __init__(self, client: Client, workflow_id: str) -> None:
        self.client = client
        self.workflow_id = workflow_id
        self.address = client.service_client.config.target_host
        self._up = asyncio.Event()
        self._up.set()
        self._lost_at = 0.0

    @property
    def unreachable(self) -> bool:
        """Whether the server's last answer, or a call's failure, said it is gone."""
        return not self._up.is_set()

    async def watch(self) -> None:
        """Ask the server every ``WATCH_INTERVAL_S`` whether it answers, until
        cancelled."""
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            await self.probe()

    async def probe(self) -> bool:
        """Ask the server once whether it answers (``answers``); say so if
        that changed."""
        try:
            await self._ask()
        except (RPCError, RPCTimeoutOrCancelledError) as err:
            self._lost(err)
            return False
        self.answered()
        return True

    async def answers(self) -> bool:
        """Ask the server once whether it answers (``GetSystemInfo``, not
        retried, ``PROBE_TIMEOUT`` at most), saying nothing."""
        try:
            await self._ask()
        except (RPCError, RPCTimeoutOrCancelledError):
            return False
        return True

    async def _ask(self) -> None:
        await self.client.workflow_service.get_system_info(
            GetSystemInfoRequest(), retry=False, timeout=PROBE_TIMEOUT
        )

    def _lost(self, err: BaseException) -> None:
        """The server did not answer a call (``err``): say so, once until it
        answers again."""
        if self.unreachable:
            return
        self._up.clear()
        self._lost_at = time.monotonic()
        why = str(err) or type(err).__name__
        wid = self.workflow_id
        say(
            f"the Temporal server at {self.address} does not answer ({why}); still trying: "
            f"TeamRun {wid} goes on once it is back, and this command follows it again "
            f"(Ctrl-C leaves it running; `oma show {wid}` shows it)",
            "bold yellow",
        )

    async def answering(self) -> None:
        """Return once the server answers (at once if it does)."""
        await self._up.wait()

    def left_running(self) -> None:
        """Say, on an interrupt while the server does not answer, that the run
        was not cancelled, and how to find it again."""
        wid = self.workflow_id
        say(
            f"interrupted: TeamRun {wid} was not cancelled, the Temporal server at "
            f"{self.address} does not answer; the run goes on once it is back: see it with "
            f"`oma show {wid}`, stop it with `oma abort {wid}`",
            "bold yellow",
        )

    def answered(self) -> None:
        """The server answered a call: say so if it did not before."""
        if not self.unreachable:
            return
        self._up.set()
        away = time.monotonic() - self._lost_at
        say(
            f"the Temporal server at {self.address} answers again (after {away:.0f} s): "
            f"following TeamRun {self.workflow_id}",
            "dim",
        )


def say(message: str, style: str) -> None:
    err_console.print(run_text(message, style))
