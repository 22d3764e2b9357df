"""Looking at processes from tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def parent_of(pid: int) -> int | None:
    """The parent pid of ``pid``, or ``None`` when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(stat.rpartition(")")[2].split()[1])


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` in the process tree (children,
    grandchildren, ...), whatever session or process group they are in."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (ppid := parent_of(int(entry.name))) is not None:
            children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        if alive(child):
            found.append(child)
        todo.extend(children.get(child, []))
    return sorted(found)


def cmdline(pid: int) -> str:
    """The command line of ``pid`` (arguments joined by spaces; empty when gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


class Processes:
    """Processes a test starts, ended at its teardown if still alive."""

    def __init__(self) -> None:
        self._started: list[subprocess.Popen[Any]] = []

    def start(self, args: list[str], **popen: Any) -> subprocess.Popen[Any]:
        """``subprocess.Popen(args, **popen)``, remembered for the teardown."""
        proc = subprocess.Popen(args, **popen)
        self._started.append(proc)
        return proc

    def end_all(self) -> None:
        """SIGTERM every process still alive and each of its descendants (an
        ``oma dev``'s Temporal server runs in a session of its own), SIGKILL
        what is left after ``END_GRACE_S``, and reap."""
        pids: list[int] = []
        for proc in self._started:
            if proc.poll() is None:
                pids += [proc.pid, *descendants(proc.pid)]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + END_GRACE_S
            while any(map(alive, pids)) and time.monotonic() < deadline:
                time.sleep(0.05)
        for proc in self._started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=END_GRACE_S)


END_GRACE_S = 5.0
"""How long a process left running at a test's end gets after SIGTERM."""


async def dead_soon(pid: int, within_s: float = 10.0) -> bool:
    """Whether ``pid`` has ended within ``within_s`` (looked at every 0.1 s)."""
    deadline = time.monotonic() + within_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def dead_within(pids: list[int], timeout_s: float) -> bool:
    """Whether every one of ``pids`` has ended within ``timeout_s`` (looked at every 0.01 s)."""
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def read_when_written(path: Path, timeout_s: float = 5.0) -> int:
    """The pid a process wrote to ``path`` (a line), once the line is whole."""
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text().endswith("\n")):
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} was not written")
        await asyncio.sleep(0.02)
    return int(path.read_text())
