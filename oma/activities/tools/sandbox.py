"""The file tools' sandbox: every path they touch is the agent's ``cwd`` or
under it, symlinks resolved.

One rule, for ``file_read``, ``file_write``, ``file_edit`` and the ``path``
of ``glob`` and ``grep``: a path (relative to ``cwd``, or absolute) is
resolved with every symlink followed (``Path.resolve``; for a path that does
not exist yet, its nearest existing parent is resolved and the rest appended),
and refused unless the result is ``cwd`` (itself resolved) or inside it. So
``..``, an absolute path elsewhere, and a symlink inside ``cwd`` that points
out are all refused. ``glob`` and ``grep`` walking a directory skip any
symlink that points out (``walk_files``).

What it does not cover: ``bash`` (a shell can reach anything the worker's
user can), the ``process`` and ``acp`` backends (they run with the worker's
permissions), and a race in which another process swaps a directory for a
symlink between the check and the open (only a process the agent started
through bash could; the final component is opened with ``O_NOFOLLOW``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from oma.activities.tools._progress import Work
from oma.activities.tools.tool import ToolError

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)
"""Directories ``glob`` and ``grep`` do not descend into while walking
(version control, dependencies, caches). Naming one as ``path`` still works."""


class PathOutsideSandboxError(ToolError):
    """A tool was given a path that resolves outside the agent's ``cwd``."""


def resolve_in_sandbox(cwd: Path, path: str | os.PathLike[str]) -> Path:
    """The real path of ``path`` (relative to ``cwd``, or absolute), every
    symlink resolved, when it is ``cwd`` or inside it.

    Raises ``PathOutsideSandboxError`` when it resolves anywhere else (through
    ``..``, an absolute path, or a symlink pointing out), and ``ToolError``
    for a path that cannot be resolved (a symlink loop, a NUL byte).
    """
    root = cwd.resolve()
    try:
        target = (root / path).resolve()
    except (OSError, RuntimeError, ValueError) as err:  # RuntimeError: a symlink loop (3.11)
        raise ToolError(f"cannot resolve path {os.fspath(path)!r}: {err}") from None
    if target != root and root not in target.parents:
        raise PathOutsideSandboxError(
            f"path {os.fspath(path)!r} is outside the working directory {str(root)!r} "
            f"(it resolves to {str(target)!r}); the file tools only reach files under "
            "the working directory: use a path relative to it"
        )
    return target


def shown(root: Path, path: Path) -> str:
    """``path`` as the model reads it: relative to ``root`` (``.`` for ``root``)."""
    return os.path.relpath(path, root)


def walk_files(root: Path, base: Path, work: Work) -> Iterator[tuple[str, Path]]:
    """The regular files under directory ``base`` (inside ``root``, resolved),
    as ``(path relative to base, real path)``: a directory's files in name
    order, then its subdirectories', each in turn, in name order.

    Skips ``SKIPPED_DIRS`` below ``base``, what cannot be listed, and anything
    that is not a regular file (sockets, FIFOs, devices). A symlink to a file
    inside ``root`` is listed under its own name; a symlink that points
    outside ``root``, dangles or loops is skipped; a symlink to a directory is
    not followed (its target, if inside ``root``, is walked where it is).
    """
    stack = [base]
    while stack:
        work.check()
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            try:
                if entry.is_symlink():
                    real = _symlinked_file(root, entry.path)
                    if real is not None:
                        yield os.path.relpath(entry.path, base), real
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIPPED_DIRS:
                        subdirs.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    yield os.path.relpath(entry.path, base), Path(entry.path)
            except OSError:
                continue
        stack.extend(reversed(subdirs))


def _symlinked_file(root: Path, link: str) -> Path | None:
    try:
        real = Path(link).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if root not in real.parents or not real.is_file():
        return None
    return real
