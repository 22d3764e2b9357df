"""The ACP agent's subprocess: spawned in a process group of its own that dies
with the worker (``WorkerTiedGroup``), stderr tail kept, killed as a whole
process group.

The SDK's ``spawn_agent_process`` is not used: it trims the environment to a
few variables (``acp.transports.default_environment``), does not start a new
process group, and on shutdown signals only the direct child. An agent such as
``npx @agentclientprotocol/claude-agent-acp`` is a tree of processes that
needs the worker's environment, and all of it must die with the session, or
with the worker however it ends (SIGKILL included).
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from oma.core.schema.backends import AcpBackendConfig
from oma.core.schema.errors import AcpSpawnError
from oma.runtime.process_group import (
    StderrTail,
    WorkerTiedGroup,
    describe_exit,
    kill_group,
    wait_exited,
)

STDIO_LIMIT_BYTES = 50 * 1024 * 1024
"""Longest JSON-RPC line read from the agent (the SDK's own stdio default,
``acp.core.DEFAULT_STDIO_BUFFER_LIMIT_BYTES``)."""

_READ_CHUNK_BYTES = 64 * 1024

CANCEL_GRACE_S = 5.0
"""Seconds an agent has, after ``session/cancel``, to end the turn before its
process tree is killed."""

KILL_GRACE_S = 1.0
"""Seconds between SIGTERM and SIGKILL when the process group is killed."""


def resolve_cwd(backend: AcpBackendConfig) -> str:
    """The absolute working directory of the agent: ``backend.cwd`` resolved
    against the worker's working directory, or the worker's own."""
    return os.path.abspath(backend.cwd) if backend.cwd is not None else os.getcwd()


class AgentProcess:
    """A running agent command whose stdin/stdout carry ACP and whose stderr is
    drained (a full stderr pipe would block the agent) into a bounded tail."""

    def __init__(
        self, proc: asyncio.subprocess.Process, group: WorkerTiedGroup, command: str
    ) -> None:
        self.proc = proc
        self.command = command
        self._group = group
        self._stderr = StderrTail()
        assert proc.stderr is not None
        self._stderr_reader = asyncio.create_task(self._drain_stderr(proc.stderr))

    @classmethod
    async def spawn(cls, backend: AcpBackendConfig, agent: str) -> AgentProcess:
        """Start ``backend.command`` with ``backend.args`` in a ``WorkerTiedGroup``
        (a process group that dies with the worker), with the worker's
        environment overlaid by ``backend.env``, in ``resolve_cwd(backend)``.

        Raises ``AcpSpawnError`` when the command or the directory is missing
        or not usable, or the group's keeper (``sh``) cannot start. A
        cancellation while the agent starts kills the group, then propagates.
        """
        cwd = resolve_cwd(backend)
        if not os.path.isdir(cwd):
            raise AcpSpawnError(
                f"agent {agent!r}: cannot start command {backend.command!r}: "
                f"cwd {cwd!r} is not a directory"
            )
        try:
            group = await WorkerTiedGroup.start()
        except OSError as err:
            raise AcpSpawnError(
                f"agent {agent!r}: cannot start the process group of command "
                f"{backend.command!r}: {err.strerror or err}"
            ) from err
        try:
            proc = await group.spawn(
                [backend.command, *backend.args],
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, **backend.env} if backend.env else None,
                cwd=cwd,
                limit=STDIO_LIMIT_BYTES,
            )
        except BaseException as err:
            await group.close()
            if isinstance(err, OSError):
                raise AcpSpawnError(
                    f"agent {agent!r}: cannot start command {backend.command!r}: "
                    f"{err.strerror or err}"
                ) from err
            raise
        return cls(proc, group, backend.command)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc.returncode is None

    def stderr_tail(self) -> str:
        """The redacted end of what the agent wrote on stderr so far."""
        return self._stderr.redacted()

    async def exit_status(self, wait_s: float) -> str:
        """How the process ended, for an error message ("exit status 3",
        "killed by signal SIGKILL", or "still running"), after waiting up to
        ``wait_s`` seconds for it to end."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wait_exited(self.proc), timeout=wait_s)
        return describe_exit(self.proc.returncode)

    async def kill(self, grace_s: float) -> None:
        """Close stdin, SIGTERM the process group, SIGKILL it after ``grace_s``
        seconds, reap the child and end the group.

        SIGKILL goes to the group even when the child exited within the grace
        period, because a descendant may have outlived it.
        """
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await kill_group(self.proc, grace_s, self._group.pgid)
        finally:
            await self._group.close()
        # Descendants may hold stderr open a moment longer; what they still
        # write is not needed.
        await asyncio.wait({self._stderr_reader}, timeout=0.5)
        self._stderr_reader.cancel()
        await asyncio.wait({self._stderr_reader})

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_READ_CHUNK_BYTES):
            self._stderr.add(chunk)
