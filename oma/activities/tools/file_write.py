"""``file_write``: create a file, or replace one's whole content."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from oma.activities.tools._files import check_openable, encode_text, write_file
from oma.activities.tools._progress import Work, in_thread
from oma.activities.tools.sandbox import resolve_in_sandbox, shown
from oma.activities.tools.tool import BuiltinTool, ToolContext, ToolError, ToolOutput


class FileWriteInput(BaseModel):
    """Input of ``file_write``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        description="The file to write, relative to the working directory (or absolute, "
        "inside it). Missing parent directories are created.",
    )
    content: str = Field(description="The file's whole new content (UTF-8 text).")


DESCRIPTION = """\
Write a UTF-8 text file: create it (and any missing parent directories), or \
replace its whole content. Returns how many bytes were written. To change \
part of an existing file, use file_edit instead. `path` is relative to the \
working directory; paths that lead outside it (`..`, absolute paths \
elsewhere, symlinks pointing out) are refused."""


async def file_write(args: FileWriteInput, ctx: ToolContext) -> ToolOutput:
    """Write ``args.content`` (as UTF-8) to the file; says ``"wrote N bytes
    to PATH (new file)"`` or ``"... (replaced M bytes)"``."""
    real = resolve_in_sandbox(ctx.cwd, args.path)
    root = ctx.cwd.resolve()
    data = encode_text(args.content, "content")

    def write(work: Work) -> ToolOutput:
        if real == root or real.is_dir():
            raise ToolError(f"{args.path} is a directory; give the path of a file")
        try:
            real.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ToolError(
                f"cannot create {args.path}: {shown(root, real.parent)} is not a directory"
            ) from None
        try:
            existing = real.stat()
        except FileNotFoundError:
            previous = None
        else:
            check_openable(existing, args.path)
            previous = existing.st_size
        write_file(real, data, args.path)
        what = "new file" if previous is None else f"replaced {previous} bytes"
        return ToolOutput(content=f"wrote {len(data)} bytes to {args.path} ({what})")

    return await in_thread(ctx, f"file_write {args.path}", write)


FILE_WRITE = BuiltinTool(
    name="file_write", description=DESCRIPTION, input_model=FileWriteInput, execute=file_write
)
