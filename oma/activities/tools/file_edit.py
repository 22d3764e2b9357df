"""``file_edit``: replace an exact string in a text file."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from oma.activities.tools._files import (
    BINARY_SNIFF_BYTES,
    encode_text,
    is_binary,
    open_existing,
    write_file,
)
from oma.activities.tools._progress import Work, in_thread
from oma.activities.tools.sandbox import resolve_in_sandbox
from oma.activities.tools.tool import BuiltinTool, ToolContext, ToolError, ToolOutput

MAX_EDIT_BYTES = 10 * 1024 * 1024
"""The largest file ``file_edit`` edits (bytes); a larger one is refused."""

_LONE_LF = re.compile(r"(?<!\r)\n")


class FileEditInput(BaseModel):
    """Input of ``file_edit``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        description="The file to edit, relative to the working directory (or absolute, "
        "inside it). It must exist.",
    )
    old_string: str = Field(
        min_length=1,
        description="The exact text to replace, character for character, indentation and "
        "line ends included. It must occur exactly once unless replace_all is true.",
    )
    new_string: str = Field(description="The text to put in its place (empty to delete it).")
    replace_all: bool = Field(
        default=False, description="Replace every occurrence of old_string (default false)."
    )


DESCRIPTION = f"""\
Edit a UTF-8 text file by replacing an exact string: `old_string` must appear \
in the file exactly as given (whitespace and indentation included) and only \
once, unless `replace_all` is true, which replaces every occurrence. Read the \
file with file_read first, and copy the text without the line-number prefix. \
Returns how many occurrences were replaced. To create a file or rewrite it \
whole, use file_write. Files over {MAX_EDIT_BYTES // (1024 * 1024)} MiB, binary \
and non-UTF-8 files are refused. `path` is relative to the working \
directory; paths that lead outside it (`..`, absolute paths elsewhere, \
symlinks pointing out) are refused."""


async def file_edit(args: FileEditInput, ctx: ToolContext) -> ToolOutput:
    """Replace ``args.old_string`` with ``args.new_string`` (the only
    occurrence, or every one with ``replace_all``); says ``"replaced N
    occurrence(s) in PATH"``.

    In a file with CRLF line ends, an ``old_string`` written with bare LF
    line ends (as ``file_read`` shows lines) is matched with CRLF, and
    ``new_string`` written the same way is given CRLF too.
    """
    real = resolve_in_sandbox(ctx.cwd, args.path)

    def edit(work: Work) -> ToolOutput:
        with open_existing(real, args.path) as f:
            data = f.read(MAX_EDIT_BYTES + 1)
        if len(data) > MAX_EDIT_BYTES:
            raise ToolError(
                f"{args.path} is larger than {MAX_EDIT_BYTES} bytes; file_edit edits smaller "
                "files (use bash for this one)"
            )
        if is_binary(data[:BINARY_SNIFF_BYTES]):
            raise ToolError(f"{args.path} is a binary file; file_edit edits text files")
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise ToolError(f"{args.path} is not UTF-8 text; file_edit edits UTF-8 files") from None
        old, new = args.old_string, args.new_string
        if old == new:
            raise ToolError("old_string and new_string are the same: there is nothing to change")
        count = text.count(old)
        if count == 0 and "\r\n" in text and _LONE_LF.search(old):
            old, new = _LONE_LF.sub("\r\n", old), _LONE_LF.sub("\r\n", new)
            count = text.count(old)
        if count == 0:
            raise ToolError(
                f"old_string was not found in {args.path}; it must match the file exactly, "
                "whitespace and indentation included (read the file with file_read and copy "
                "the text without the line numbers)"
            )
        if count > 1 and not args.replace_all:
            raise ToolError(
                f"old_string occurs {count} times in {args.path}; include more of the "
                "surrounding text to make it unique, or set replace_all to true to replace "
                "every occurrence"
            )
        replaced = count if args.replace_all else 1
        write_file(real, encode_text(text.replace(old, new, replaced), "new_string"), args.path)
        plural = "" if replaced == 1 else "s"
        return ToolOutput(content=f"replaced {replaced} occurrence{plural} in {args.path}")

    return await in_thread(ctx, f"file_edit {args.path}", edit)


FILE_EDIT = BuiltinTool(
    name="file_edit", description=DESCRIPTION, input_model=FileEditInput, execute=file_edit
)
