"""The guard a stdio MCP server runs under, so that its whole process tree
dies with it, with its connection, or with its worker.

The SDK's stdio transport starts the guard (``guarded``) as the leader of a
new session; the guard starts the server in that same process group, handing
it stdin, stdout and stderr, and ends that group (itself included) with
SIGKILL when

- the server exits: whatever it started must not outlive it (the SDK
  signals the group only when the server does not exit by itself once its
  stdin is closed);
- the worker is gone (the guard's parent is no longer the worker: a
  SIGKILLed worker runs no code), within ``POLL_S`` seconds;
- SIGTERM, SIGINT or SIGHUP reach the guard (the SDK's SIGTERM to the
  group): the group gets SIGTERM, then SIGKILL after ``GRACE_S`` seconds.

A descendant that leaves the process group (``setsid``, a daemon) escapes.
Run as a script with ``python -I -S`` (standard library only, no ``site``):
it starts in milliseconds and imports nothing of the worker's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

POLL_S = 0.1
"""Seconds between two looks at the server and the worker."""

GRACE_S = 1.0
"""Seconds the group has after SIGTERM before SIGKILL (less than the SDK's
own 2 s before it SIGKILLs the group)."""


def guarded(command: str, args: list[str]) -> tuple[str, list[str]]:
    """The command and arguments that run ``command`` ``args`` under a guard
    watching this process."""
    return sys.executable, ["-I", "-S", __file__, str(os.getpid()), command, *args]


def main(argv: list[str]) -> int:
    """``_guard.py WORKER_PID COMMAND [ARG...]``; returns only when COMMAND
    could not start (127, the shell's "command not found")."""
    worker, command = int(argv[1]), argv[2:]
    try:
        server = subprocess.Popen(command)
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
            os.killpg(0, signal.SIGTERM)
        elif deadline is not None and time.monotonic() > deadline:
            break
        time.sleep(POLL_S)
    os.killpg(0, signal.SIGKILL)
    return 0  # not reached: the guard is in the group


if __name__ == "__main__":
    sys.exit(main(sys.argv))
