"""The worker's ACP sessions, keyed by (run, agent): a ``PinnedPool``
(``oma.activities.pinned``) of ``AcpSession``.

docs/external-agents.md, "Sessions on Temporal": activities are stateless
but an ACP conversation lives in a subprocess, so the worker that opens a
session keeps it here; later turns of the same agent in the same run are
routed to this worker's own task queue and find it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma.activities._lazy import import_off_loop
from oma.activities.acp._process import CANCEL_GRACE_S, KILL_GRACE_S
from oma.activities.pinned import PinnedPool
from oma.core.schema.backends import AcpBackendConfig

if TYPE_CHECKING:
    from oma.activities.acp.session import AcpSession


class SessionPool(PinnedPool["AcpSession"]):
    """Worker-local ACP sessions; one pool per worker process.

    ``cancel_grace_s`` and ``kill_grace_s`` are passed to every session (see
    ``AcpSession``); ``spawn_count`` is one agent subprocess per session.
    """

    def __init__(
        self, *, cancel_grace_s: float = CANCEL_GRACE_S, kill_grace_s: float = KILL_GRACE_S
    ) -> None:
        super().__init__()
        self._cancel_grace_s = cancel_grace_s
        self._kill_grace_s = kill_grace_s

    async def get_or_open(
        self,
        run_key: str,
        agent: str,
        backend: AcpBackendConfig,
        system_prompt: str = "",
        resume_session_id: str | None = None,
    ) -> tuple[AcpSession, bool]:
        """The live session of (``run_key``, ``agent``), or a new one.

        Returns ``(session, new)``: ``new`` is ``True`` when this call opened
        it (``AcpSession.open`` with ``backend``, ``system_prompt`` and
        ``resume_session_id``, which are otherwise unused). A held session
        whose process has ended is closed and replaced. Raises what
        ``AcpSession.open`` raises.
        """
        # the acp SDK, imported by the first session opened, not by the pool
        session = await import_off_loop("oma.activities.acp.session")

        return await self.acquire(
            (run_key, agent),
            lambda: session.AcpSession.open(
                backend,
                agent=agent,
                system_prompt=system_prompt,
                resume_session_id=resume_session_id,
                cancel_grace_s=self._cancel_grace_s,
                kill_grace_s=self._kill_grace_s,
            ),
        )

    async def discard(
        self, run_key: str, agent: str, session: AcpSession, *, at_once: bool = False
    ) -> None:
        """Drop ``session`` (a dead one) from the pool, if it is still the one
        held for (``run_key``, ``agent``), and close it; ``at_once``: with
        SIGKILL and no grace period (``AcpSession.kill``)."""
        self.forget((run_key, agent), session)
        await (session.kill() if at_once else session.close())
