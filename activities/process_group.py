"""Local subprocesses that die whole: the ``process`` and ``acp`` backends'
commands, and the embedded Temporal dev server.

A command runs as the leader of its own process group, so one signal reaches
every descendant (a ``cmd &`` it left behind included): SIGTERM, a grace
period, then SIGKILL to the group. A backend's stderr is kept as a bounded,
redacted tail for error messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping

from oma.core.redact import redact

STDERR_TAIL_BYTES = 8 * 1024
"""Bytes of stderr kept (the last ones) for error messages."""

_EXIT_POLL_S = 0.02


async def spawn_group_leader(
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    stdin: int,
    limit: int = 2**16,
) -> asyncio.subprocess.Process:
    """Start ``argv`` as the leader of a new process group, stdout and stderr piped.

    ``env`` is merged over the worker's environment. A new process group
    rather than a new session: it is enough for ``killpg`` and, unlike
    ``setsid``, does not put the child in a scheduler autogroup of its own
    (which cost 1.5-2.7 ms per spawn on a loaded 2-core machine, see
    ``bench/backends.py``). Raises ``OSError`` as ``create_subprocess_exec``.
    """
    return await asyncio.create_subprocess_exec(
        *argv,
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env} if env else None,
        cwd=cwd,
        limit=limit,
        process_group=0,
    )


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


async def kill_group(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace_s`` seconds, reap the child.

    SIGKILL goes to the group even when the child exited within the grace
    period, because a descendant may have outlived it. With ``grace_s`` 0 the
    group gets SIGKILL alone, at once: nothing of it runs another instruction.
    """
    if grace_s > 0:
        signal_group(proc.pid, signal.SIGTERM)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wait_exited(proc), timeout=grace_s)
        finally:
            signal_group(proc.pid, signal.SIGKILL)
    else:
        signal_group(proc.pid, signal.SIGKILL)
    await wait_exited(proc)


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
