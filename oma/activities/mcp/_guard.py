"""The guard a stdio MCP server runs under, so that its whole process tree
dies with it, with its connection, or with its worker.

The SDK's stdio transport starts the guard (``guarded``) as the leader of a
new session; the guard starts the server as the leader of a process group of
its own, handing it stdin, stdout and stderr, and kills the server's tree
when

- the server exits: whatever it started must not outlive it (the SDK
  signals the group only when the server does not exit by itself once its
  stdin is closed);
- the worker is gone (the guard's parent is no longer the worker: a
  SIGKILLed worker runs no code), within ``POLL_S`` seconds;
- SIGTERM, SIGINT or SIGHUP reach the guard (the SDK's SIGTERM to the
  guard's group): the server's group gets SIGTERM, then the tree is killed
  after ``GRACE_S`` seconds.

Killing the tree is SIGKILL to the server's group and, on Linux, to every
process that the tree left orphaned: the guard is a child subreaper
(``PR_SET_CHILD_SUBREAPER``), so those become its children, even the ones
that left the group (``setsid``, a daemon). It reaps them all before it
exits, so that none is left a zombie under a worker that is PID 1 (a
container without an init). Should the guard itself be SIGKILLed, the
server gets SIGKILL too (``PR_SET_PDEATHSIG``, Linux). Run as a script
with ``python -I -S`` (standard library only, no ``site``): it starts in
milliseconds and imports nothing of the worker's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.1
"""Seconds between two looks at the server and the worker."""

GRACE_S = 1.0
"""Seconds the server's group has after SIGTERM before SIGKILL (less than the
SDK's own 2 s, after which it SIGKILLs the guard)."""

REAP_S = 2.0
"""Seconds the guard waits for the killed tree to be gone before it leaves."""

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_PR_SET_CHILD_SUBREAPER = 36


def guarded(command: str, args: list[str]) -> tuple[str, list[str]]:
    """The command and arguments that run ``command`` ``args`` under a guard
    watching this process."""
    return sys.executable, ["-I", "-S", __file__, str(os.getpid()), command, *args]


def main(argv: list[str]) -> int:
    """``_guard.py WORKER_PID COMMAND [ARG...]``: the server's exit status
    (128 + the signal that ended it), 127 when it could not start."""
    worker, command = int(argv[1]), argv[2:]
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_CHILD_SUBREAPER, 1)
    try:
        server = subprocess.Popen(
            command,
            process_group=0,
            preexec_fn=None if prctl is None else lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGKILL),
        )
    except OSError as err:
        sys.stderr.write(f"cannot start {command[0]!r}: {err.strerror or err}\n")
        return 127
    # the server alone holds the pipes: their end reaches the worker with it
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    stopping: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _: stopping.append(signum))
    deadline: float | None = None
    while server.poll() is None:
        if deadline is None and (stopping or os.getppid() != worker):
            deadline = time.monotonic() + GRACE_S
            _signal_group(server.pid, signal.SIGTERM)
        elif deadline is not None and time.monotonic() > deadline:
            break
        time.sleep(POLL_S)
    _kill_tree(server.pid)
    code = server.wait()
    return code if code >= 0 else 128 - code


def _prctl() -> Callable[[int, int], object] | None:
    """Linux's ``prctl(option, value)``; ``None`` elsewhere."""
    if sys.platform != "linux":
        return None
    import ctypes  # here: the guard's start pays for it on Linux only

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return lambda option, value: libc.prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        return None


def _kill_tree(server: int) -> None:
    """SIGKILL the server's group and every child of the guard, and reap
    them, until none is left (or ``REAP_S`` has passed)."""
    deadline = time.monotonic() + REAP_S
    while True:
        _signal_group(server, signal.SIGKILL)
        for pid in _children():
            if pid != server:  # reaped by Popen.wait, which needs its status
                _signal_group(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        if not [pid for pid in _children() if pid != server] and not _alive(server):
            return
        if time.monotonic() > deadline:
            return
        time.sleep(0.01)


def _children() -> list[int]:
    """The guard's children, from ``/proc`` (none where there is no ``/proc``)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(entry.joinpath("stat").read_text().rpartition(")")[2].split()[1]) == me:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
