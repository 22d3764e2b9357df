"""Local subprocesses that die whole: the ``process`` and ``acp`` backends'
commands, ``bash``'s, and the embedded Temporal dev server.

A command runs in a process group of its own, so one signal reaches every
descendant (a ``cmd &`` it left behind included): SIGTERM, a grace period,
then SIGKILL to the group. A ``WorkerTiedGroup`` also dies with the worker,
however the worker ends (SIGKILL included). A backend's stderr is kept as a
bounded, redacted tail for error messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from typing import Any

from oma.core.rules.redact import redact

STDERR_TAIL_BYTES = 8 * 1024
"""Bytes of stderr kept (the last ones) for error messages."""

_EXIT_POLL_S = 0.02


async def wait_exited(proc: asyncio.subprocess.Process) -> None:
    """Return once the child has exited (descendants may still run).

    On Python 3.11 ``proc.wait()`` also waits for stdout and stderr to close,
    which a background descendant holding them open delays forever; so the
    return code is also polled every ``_EXIT_POLL_S`` seconds. The usual exit
    still returns at once, through ``wait()``.
    """
    if proc.returncode is not None:
        return
    waiter = asyncio.ensure_future(proc.wait())
    try:
        while proc.returncode is None and not waiter.done():
            await asyncio.wait({waiter}, timeout=_EXIT_POLL_S)
    finally:
        waiter.cancel()


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group ``pid`` leads (its pgid is its pid);
    a group that is gone is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def kill_group(
    proc: asyncio.subprocess.Process, grace_s: float, pgid: int | None = None
) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace_s`` seconds, reap the child.

    The group is ``pgid``, by default the one ``proc`` leads. SIGKILL goes to
    the group even when the child exited within the grace period, because a
    descendant may have outlived it. With ``grace_s`` 0 the group gets SIGKILL
    alone, at once: nothing of it runs another instruction.
    """
    group = proc.pid if pgid is None else pgid
    if grace_s > 0:
        signal_group(group, signal.SIGTERM)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wait_exited(proc), timeout=grace_s)
        finally:
            signal_group(group, signal.SIGKILL)
    else:
        signal_group(group, signal.SIGKILL)
    await wait_exited(proc)


_KEEPER_SCRIPT = "trap '' TERM INT HUP; read _; kill -9 0"
"""The keeper of a ``WorkerTiedGroup``: it outlives a SIGTERM to its group, and
SIGKILLs the group once its stdin, the worker's end of a pipe, is closed."""


class WorkerTiedGroup:
    """A process group that dies with this worker process.

    Its leader is a keeper, a ``sh`` that reads a pipe whose other end only
    this process holds. When this process exits, however it exits, the kernel
    closes that end; the keeper reads end-of-file and SIGKILLs its whole group.
    So a command spawned into the group (``spawn``) cannot outlive a worker
    that was SIGKILLed or crashed, which a parent-death signal alone would not
    give: ``PR_SET_PDEATHSIG`` reaches one process, not its descendants, and
    fires when the *thread* that forked it ends. (A process that leaves the
    group, with ``setsid``, escapes this as it escapes ``killpg``.)

    The keeper ignores SIGTERM, so the group, and its id, stay until
    ``close()``: no signal sent meanwhile can reach a process group that
    reused the id. Use ``start()``, then ``close()`` once the command is done.
    """

    def __init__(self, keeper: asyncio.subprocess.Process, lifeline: int) -> None:
        self._keeper = keeper
        self._lifeline: int | None = lifeline

    @classmethod
    async def start(cls) -> WorkerTiedGroup:
        """Start the keeper; raises ``OSError`` when ``sh`` cannot start."""
        read_end, write_end = os.pipe()  # neither is inherited by other children
        try:
            keeper = await asyncio.create_subprocess_exec(
                "sh",
                "-c",
                _KEEPER_SCRIPT,
                stdin=read_end,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                process_group=0,
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        return cls(keeper, write_end)

    @property
    def pgid(self) -> int:
        """The group's id (the keeper's pid), for ``killpg``."""
        return self._keeper.pid

    async def spawn(
        self,
        argv: list[str],
        *,
        kill_grace_s: Callable[[], float] = lambda: 0.0,
        **kwargs: Any,
    ) -> asyncio.subprocess.Process:
        """Start ``argv`` in the group: ``create_subprocess_exec(*argv,
        **kwargs)`` with ``process_group`` set. Raises ``OSError`` as it does.

        A cancellation while the child starts lets the start finish, kills
        the group (``kill_group`` with ``kill_grace_s()`` seconds of grace) and
        then propagates: cancelling ``create_subprocess_exec`` itself kills the
        child alone, then waits for its stdout and stderr to close, which a
        background descendant holding them keeps from happening for ever
        (CPython 3.11).
        """
        starting = asyncio.ensure_future(
            asyncio.create_subprocess_exec(*argv, process_group=self.pgid, **kwargs)
        )
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await kill_group(await starting, kill_grace_s(), self.pgid)
            raise

    async def close(self) -> None:
        """SIGKILL the whole group (the keeper included) and reap the keeper."""
        signal_group(self.pgid, signal.SIGKILL)
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        await self._keeper.wait()


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """``kill_group`` for a child started with ``subprocess.Popen`` in a
    session (or group) of its own, e.g. the embedded dev server: SIGTERM the
    group, SIGKILL it after ``grace_s`` seconds, reap the child."""
    signal_group(proc.pid, signal.SIGTERM)
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    finally:
        signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def describe_exit(code: int | None) -> str:
    """``"exit status 3"``, ``"killed by signal SIGKILL"`` or ``"still running"``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


class StderrTail:
    """The last ``STDERR_TAIL_BYTES`` a process wrote on stderr."""

    def __init__(self) -> None:
        self._tail = bytearray()
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        self._tail += chunk
        if len(self._tail) > STDERR_TAIL_BYTES:
            del self._tail[:-STDERR_TAIL_BYTES]
            self.truncated = True

    def redacted(self) -> str:
        """The tail decoded, credentials redacted, stripped."""
        text = self._tail.decode("utf-8", errors="replace")
        if self.truncated:
            # The first line is cut: a secret cut in half would escape redaction.
            text = text.partition("\n")[2]
        return redact(text).strip()
