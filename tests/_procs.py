"""Looking at processes from tests."""

from __future__ import annotations

import os
from pathlib import Path


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
