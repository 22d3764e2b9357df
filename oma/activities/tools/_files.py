"""Opening the files the file tools read and write, once the sandbox has
resolved their path.

Only a regular file with one link is opened, and that is checked twice: by
its path first (for a message that says what is there), then on the open file
descriptor, which no later swap can change. The open itself never waits: it is
non-blocking (a FIFO put there meanwhile would otherwise block the thread until
a writer or a reader came, for ever), does not follow a symlink at the last
component, and truncates nothing before the checks pass.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from oma.activities.tools.tool import ToolError

BINARY_SNIFF_BYTES = 8 * 1024
"""A file with a NUL byte in its first this many bytes is binary."""

_NO_WAIT = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def is_binary(head: bytes) -> bool:
    """Whether a file starting with ``head`` is binary (it has a NUL byte),
    as git and grep decide."""
    return b"\0" in head


def check_openable(st: os.stat_result, given: str) -> None:
    """Raise ``ToolError`` unless ``st`` is a regular file with one link.

    A directory, a FIFO, a socket or a device is refused (opening one may
    block, or do something). So is a file with more than one hard link: the
    sandbox resolves names, and another name of the same file may be outside
    the working directory (``ln /etc/shadow notes.txt`` needs no symlink).
    """
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{given} is a directory, not a file (list it with glob)")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{given} is not a regular file")
    if st.st_nlink > 1:
        raise ToolError(
            f"{given} has {st.st_nlink} hard links: it may be a file outside the working "
            "directory under another name, and the file tools do not reach those (use bash "
            "if you trust it)"
        )


def open_existing(real: Path, given: str) -> BinaryIO:
    """Open the regular file at ``real`` (a resolved path) for reading.

    ``given`` is the path as the model wrote it, for messages. Raises
    ``ToolError`` when nothing is there, or when what is there is not a
    regular file with one link (``check_openable``).
    """
    try:
        check_openable(real.stat(), given)
    except FileNotFoundError:
        raise ToolError(f"{given}: no such file") from None
    except NotADirectoryError:
        raise ToolError(f"{given}: no such file (a part of the path is a file)") from None
    return os.fdopen(_open_checked(real, os.O_RDONLY, given), "rb")


def write_file(real: Path, data: bytes, given: str) -> None:
    """Write ``data`` to ``real``: created, or truncated and rewritten in
    place (keeping its permissions). Raises ``ToolError`` when what is there
    is not a regular file with one link (``check_openable``)."""
    fd = _open_checked(real, os.O_WRONLY | os.O_CREAT, given)
    with os.fdopen(fd, "wb") as f:
        f.truncate()
        f.write(data)


def read_regular(real: Path, given: str, max_bytes: int) -> bytes | None:
    """The first ``max_bytes`` bytes of ``real``, or ``None`` when it is not
    a regular file with one link (what a directory walk skips)."""
    try:
        fd = _open_checked(real, os.O_RDONLY, given)
    except ToolError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read(max_bytes)


def _open_checked(real: Path, flags: int, given: str) -> int:
    try:
        fd = os.open(real, flags | _NO_WAIT, 0o666)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENXIO, errno.EWOULDBLOCK):
            # a symlink, or a FIFO (no reader) swapped in since the path was resolved
            raise ToolError(f"{given} is not a regular file") from None
        raise
    try:
        check_openable(os.fstat(fd), given)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def encode_text(text: str, field: str) -> bytes:
    """``text`` as UTF-8; ``ToolError`` naming ``field`` when it holds a lone
    surrogate (JSON can spell one, ``"\\ud800"``; UTF-8 cannot)."""
    try:
        return text.encode()
    except UnicodeEncodeError as err:
        raise ToolError(f"{field} is not valid Unicode text: {err.reason}") from None
