"""Opening the files the file tools read and write, once the sandbox has
resolved their path."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from oma.activities.tools.tool import ToolError

BINARY_SNIFF_BYTES = 8 * 1024
"""A file with a NUL byte in its first this many bytes is binary."""


def is_binary(head: bytes) -> bool:
    """Whether a file starting with ``head`` is binary (it has a NUL byte),
    as git and grep decide."""
    return b"\0" in head


def open_existing(real: Path, given: str) -> BinaryIO:
    """Open the regular file at ``real`` (a resolved path) for reading.

    ``given`` is the path as the model wrote it, for messages. Raises
    ``ToolError`` when nothing is there, or a directory or something other
    than a regular file is; the last component is opened with
    ``O_NOFOLLOW``, so a symlink put there since it was resolved fails.
    """
    try:
        mode = real.stat().st_mode
    except FileNotFoundError:
        raise ToolError(f"{given}: no such file") from None
    except NotADirectoryError:
        raise ToolError(f"{given}: no such file (a part of the path is a file)") from None
    if stat.S_ISDIR(mode):
        raise ToolError(f"{given} is a directory, not a file (list it with glob)")
    if not stat.S_ISREG(mode):
        raise ToolError(f"{given} is not a regular file")
    return os.fdopen(os.open(real, os.O_RDONLY | os.O_NOFOLLOW), "rb")


def write_file(real: Path, data: bytes) -> None:
    """Write ``data`` to ``real`` (created, or truncated and rewritten in
    place, keeping its permissions), not following a symlink put at the last
    component since the path was resolved."""
    fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def encode_text(text: str, field: str) -> bytes:
    """``text`` as UTF-8; ``ToolError`` naming ``field`` when it holds a lone
    surrogate (JSON can spell one, ``"\\ud800"``; UTF-8 cannot)."""
    try:
        return text.encode()
    except UnicodeEncodeError as err:
        raise ToolError(f"{field} is not valid Unicode text: {err.reason}") from None
