"""The worker's ACP sessions, keyed by (run, agent).

docs/external-agents.md, "Sessions on Temporal": activities are stateless
but an ACP conversation lives in a subprocess, so the worker that opens a
session keeps it here; later turns of the same agent in the same run are
routed to this worker's own task queue and find it again. Sessions end when
the run ends (``close_run``) or the worker stops (``close_all``).
"""

from __future__ import annotations

import asyncio

from oma.activities.acp.session import CANCEL_GRACE_S, KILL_GRACE_S, AcpSession
from oma.core.schema.backends import AcpBackendConfig

SessionKey = tuple[str, str]
"""(run_key, agent name)."""


class SessionPool:
    """Worker-local ACP sessions; one pool per worker process.

    ``cancel_grace_s`` and ``kill_grace_s`` are passed to every session (see
    ``AcpSession``). ``len(pool)`` is the number of sessions held;
    ``spawn_count`` the number of sessions opened so far (one agent
    subprocess each).
    """

    def __init__(
        self, *, cancel_grace_s: float = CANCEL_GRACE_S, kill_grace_s: float = KILL_GRACE_S
    ) -> None:
        self._cancel_grace_s = cancel_grace_s
        self._kill_grace_s = kill_grace_s
        self._sessions: dict[SessionKey, AcpSession] = {}
        # One lock per key, so that two first prompts of an agent at once open
        # one session, not two.
        self._locks: dict[SessionKey, asyncio.Lock] = {}
        self.spawn_count = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def run_keys(self) -> set[str]:
        """The runs this pool holds sessions for."""
        return {run_key for run_key, _ in self._sessions}

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
        key = (run_key, agent)
        async with self._locks.setdefault(key, asyncio.Lock()):
            session = self._sessions.get(key)
            if session is not None:
                if session.alive:
                    return session, False
                del self._sessions[key]
                await session.close()
            session = await AcpSession.open(
                backend,
                agent=agent,
                system_prompt=system_prompt,
                resume_session_id=resume_session_id,
                cancel_grace_s=self._cancel_grace_s,
                kill_grace_s=self._kill_grace_s,
            )
            self._sessions[key] = session
            self.spawn_count += 1
            return session, True

    async def discard(
        self, run_key: str, agent: str, session: AcpSession, *, at_once: bool = False
    ) -> None:
        """Drop ``session`` (a dead one) from the pool, if it is still the one
        held for (``run_key``, ``agent``), and close it; ``at_once``: with
        SIGKILL and no grace period (``AcpSession.kill``)."""
        key = (run_key, agent)
        if self._sessions.get(key) is session:
            del self._sessions[key]
        await (session.kill() if at_once else session.close())

    async def close_run(self, run_key: str) -> int:
        """Close every session of ``run_key``, killing their process trees.

        Waits for a session of the run that is being opened. Returns how many
        sessions were closed.
        """
        keys = [key for key in self._locks if key[0] == run_key]
        sessions = []
        for key in keys:
            async with self._locks[key]:
                session = self._sessions.pop(key, None)
            self._locks.pop(key, None)
            if session is not None:
                sessions.append(session)
        await asyncio.gather(*(session.close() for session in sessions))
        return len(sessions)

    async def close_all(self) -> int:
        """Close every session (at worker shutdown). Returns how many were closed."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        self._locks.clear()
        await asyncio.gather(*(session.close() for session in sessions))
        return len(sessions)
