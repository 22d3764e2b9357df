"""``file_read``: a text file's lines, numbered like ``cat -n``."""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict, Field

from oma.activities.tools._files import BINARY_SNIFF_BYTES, is_binary, open_existing
from oma.activities.tools._progress import Work, in_thread
from oma.activities.tools.sandbox import resolve_in_sandbox
from oma.activities.tools.tool import BuiltinTool, ToolContext, ToolError, ToolOutput

_CHUNK_BYTES = 256 * 1024
_NOTE_RESERVE_CHARS = 200


class FileReadInput(BaseModel):
    """Input of ``file_read``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        description="The file to read, relative to the working directory (or absolute, inside it).",
    )
    offset: int = Field(
        default=1, ge=1, description="The line to start at, counting from 1 (default 1)."
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description="The most lines to return (default: to the end of the file, as far as "
        "the output limit allows).",
    )


DESCRIPTION = """\
Read a UTF-8 text file. Returns its lines numbered like `cat -n` (the line \
number, a tab, the line). For a large file, read a part with `offset` (the \
first line, from 1) and `limit` (how many lines); when only part of the file \
is shown, a last line in parentheses says which lines and how many the file \
has. Output is limited in size: past the limit, reading stops at a line \
boundary and says which `offset` continues. Binary and non-UTF-8 files are \
refused. `path` is relative to the working directory; paths that lead \
outside it (`..`, absolute paths elsewhere, symlinks pointing out) are refused."""


async def file_read(args: FileReadInput, ctx: ToolContext) -> ToolOutput:
    """Lines ``offset`` to ``offset + limit - 1`` of the file (all from
    ``offset`` by default), each as ``f"{n:>6}\\t{line}"`` (``\\r\\n`` shown
    as a line end), within ``ctx.max_output_chars``."""
    real = resolve_in_sandbox(ctx.cwd, args.path)

    def read(work: Work) -> ToolOutput:
        with open_existing(real, args.path) as f:
            head = f.read(BINARY_SNIFF_BYTES)
            if is_binary(head):
                raise ToolError(f"{args.path} is a binary file; file_read reads text files")
            f.seek(0)
            budget = max(ctx.max_output_chars - _NOTE_RESERVE_CHARS, 1)
            part = _Slicer(args.path, args.offset, args.limit, budget).read(f, work)
        return _output(args, part)

    return await in_thread(ctx, f"file_read {args.path}", read)


@dataclass
class _Slicer:
    """Reads a file chunk by chunk, keeping the numbered lines asked for
    (within ``budget`` characters) and counting all of them."""

    given: str
    offset: int
    limit: int | None
    budget: int
    lines: list[str] = field(default_factory=list)
    used: int = 0
    lineno: int = 1
    last_shown: int = 0
    newlines: int = 0
    collecting: bool = True
    budget_hit: bool = False
    line_cut: bool = False
    current: bytearray = field(default_factory=bytearray)

    def read(self, f: BinaryIO, work: Work) -> _Slicer:
        ends_with_newline = True
        while chunk := f.read(_CHUNK_BYTES):
            work.check()
            ends_with_newline = chunk.endswith(b"\n")
            if self.collecting:
                self._feed(chunk)
            else:
                self.newlines += chunk.count(b"\n")
        if not ends_with_newline:  # a last line without a line end
            if self.collecting and self.lineno >= self.offset:
                self._emit()
            self.lineno += 1
        return self

    @property
    def total(self) -> int:
        return self.lineno - 1 + self.newlines

    def _feed(self, chunk: bytes) -> None:
        start = 0
        if self.lineno < self.offset:  # skip whole chunks before the first line asked for
            count = chunk.count(b"\n")
            if self.lineno + count < self.offset:
                self.lineno += count
                return
        while self.collecting:
            end = chunk.find(b"\n", start)
            if self.lineno >= self.offset:
                piece = chunk[start:] if end == -1 else chunk[start:end]
                room = 4 * self.budget + 4 - len(self.current)  # 4 bytes at most per character
                if room > 0:
                    self.current += piece[:room]
            if end == -1:
                return
            if self.lineno >= self.offset:
                self._emit()
            self.lineno += 1
            start = end + 1
        self.newlines += chunk.count(b"\n", start)

    def _emit(self) -> None:
        text = self._decode().removesuffix("\r")
        self.current.clear()
        line = f"{self.lineno:>6}\t{text}"
        cost = len(line) + (1 if self.lines else 0)
        if self.used + cost > self.budget:
            if not self.lines:  # one line longer than the limit: show its start
                self.lines.append(line[: self.budget])
                self.last_shown = self.lineno
                self.line_cut = True
            self.budget_hit = True
            self.collecting = False
            return
        self.lines.append(line)
        self.used += cost
        self.last_shown = self.lineno
        if self.limit is not None and self.lineno + 1 >= self.offset + self.limit:
            self.collecting = False

    def _decode(self) -> str:
        # incremental and not final: a line kept only in part may end in the
        # middle of a character, which is not an error
        decoder = codecs.getincrementaldecoder("utf-8")("strict")
        try:
            return decoder.decode(bytes(self.current), final=len(self.current) < 4 * self.budget)
        except UnicodeDecodeError:
            raise ToolError(
                f"{self.given} is not UTF-8 text (line {self.lineno} has a byte that is not "
                "UTF-8); read it with bash (e.g. iconv or xxd)"
            ) from None


def _output(args: FileReadInput, part: _Slicer) -> ToolOutput:
    total = part.total
    if total == 0:
        return ToolOutput(content=f"({args.path} is empty)")
    if args.offset > total:
        raise ToolError(
            f"{args.path} has {total} line{'s' if total != 1 else ''}; offset {args.offset} "
            "is past its end"
        )
    content = "\n".join(part.lines)
    first, last = args.offset, part.last_shown
    if first > 1 or last < total or part.budget_hit:
        notes = [f"lines {first}-{last} of {total}"]
        if part.line_cut:
            notes.append(f"line {last} is longer than the output limit and was cut")
        elif part.budget_hit:
            notes.append("the output limit was reached")
        if last < total:
            notes.append(f"continue with offset={last + 1}")
        content += f"\n\n({'; '.join(notes)})"
    return ToolOutput(content=content, truncated=part.budget_hit)


FILE_READ = BuiltinTool(
    name="file_read", description=DESCRIPTION, input_model=FileReadInput, execute=file_read
)
