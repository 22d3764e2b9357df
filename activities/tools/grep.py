"""``grep``: the lines of text files that match a regular expression."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from oma.activities.tools._files import BINARY_SNIFF_BYTES, is_binary
from oma.activities.tools._glob_pattern import compile_glob
from oma.activities.tools._progress import Work, in_thread
from oma.activities.tools.sandbox import SKIPPED_DIRS, resolve_in_sandbox, shown, walk_files
from oma.activities.tools.tool import BuiltinTool, ToolContext, ToolError, ToolOutput

MAX_GREP_MATCHES = 100
"""The most matching lines ``grep`` returns; it stops searching there."""

MAX_LINE_CHARS = 300
"""A matching line longer than this is shown cut, around its first match."""

MAX_GREP_FILE_BYTES = 20 * 1024 * 1024
"""Files larger than this are not searched (the result says how many)."""


class GrepInput(BaseModel):
    """Input of ``grep``."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(
        min_length=1,
        description="A Python regular expression, searched in each line (prefix (?i) to "
        "ignore case).",
    )
    path: str | None = Field(
        default=None,
        description="The file or directory to search, relative to the working directory "
        "(default: the working directory itself).",
    )
    glob: str | None = Field(
        default=None,
        description="Search only files matching this glob: without '/', it matches file "
        "names at any depth ('*.py', '*.{ts,tsx}'); with '/', paths relative to `path` "
        "('src/**/*.py').",
    )


DESCRIPTION = f"""\
Search file contents: the lines that match a Python regular expression (`re` \
syntax, searched anywhere in the line; prefix `(?i)` to ignore case), as \
`path:line number:line` with paths relative to the working directory. \
Searches one file, or every text file under a directory (optionally only \
those matching `glob`); binary files (with a NUL byte) and files over \
{MAX_GREP_FILE_BYTES // (1024 * 1024)} MiB are skipped. Stops after \
{MAX_GREP_MATCHES} matching lines (a last line says so: narrow the pattern, \
path or glob); lines longer than {MAX_LINE_CHARS} characters are cut around \
the match, marked with "…". Does not descend into \
{", ".join(sorted(SKIPPED_DIRS))} (give one as `path` to search it), does \
not follow symlinked directories, and skips symlinks that lead outside the \
working directory. Use glob to find files by name. `path` is relative to the \
working directory and may not lead outside it."""


async def grep(args: GrepInput, ctx: ToolContext) -> ToolOutput:
    """Up to ``MAX_GREP_MATCHES`` lines ``path:n:text`` in walk order (a
    directory's files by name, then its subdirectories); ``"No matches
    found."`` when there are none."""
    try:
        regex = re.compile(args.pattern)
    except re.error as err:
        raise ToolError(f"invalid regular expression {args.pattern!r}: {err}") from None
    name_filter = _file_filter(args.glob)
    root = ctx.cwd.resolve()
    base = resolve_in_sandbox(ctx.cwd, args.path or ".")
    where = shown(root, base)

    def search(work: Work) -> ToolOutput:
        if not base.exists():
            raise ToolError(f"{args.path}: no such file or directory")
        if base.is_file():
            if is_binary(_head(base)):
                return ToolOutput(content=f"No matches: {args.path} is a binary file.")
            files: Iterator[tuple[str, Path]] = iter([(where, base)])
        elif not base.is_dir():
            raise ToolError(f"{args.path} is neither a regular file nor a directory")
        else:
            files = (
                (os.path.normpath(os.path.join(where, rel)), real)
                for rel, real in walk_files(root, base, work)
                if name_filter(rel)
            )
        return _search(regex, files, work)

    return await in_thread(ctx, f"grep {args.pattern}", search)


def _file_filter(glob: str | None) -> Callable[[str], bool]:
    if glob is None:
        return lambda rel: True
    regex = compile_glob(glob)
    if "/" in glob.removeprefix("./"):
        return lambda rel: regex.fullmatch(rel) is not None
    return lambda rel: regex.fullmatch(os.path.basename(rel)) is not None


def _search(regex: re.Pattern[str], files: Iterator[tuple[str, Path]], work: Work) -> ToolOutput:
    found: list[str] = []
    searched = too_big = 0
    for name, real in files:
        work.check()
        work.note = f"grep: {searched} files searched, {len(found)} matching lines"
        try:
            if real.stat().st_size > MAX_GREP_FILE_BYTES:
                too_big += 1
                continue
            data = real.read_bytes()
        except OSError:
            continue
        if is_binary(data[:BINARY_SNIFF_BYTES]):
            continue
        searched += 1
        for number, line in enumerate(data.decode(errors="replace").split("\n"), 1):
            match = regex.search(line.removesuffix("\r"))
            if match is None:
                continue
            if len(found) == MAX_GREP_MATCHES:
                return _output(found, too_big, cut=True)
            found.append(f"{name}:{number}:{_cut(line.removesuffix(chr(13)), match)}")
    return _output(found, too_big, cut=False)


def _cut(line: str, match: re.Match[str]) -> str:
    """``line``, or ``MAX_LINE_CHARS`` of it around the start of ``match``."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    start = max(0, min(match.start() - MAX_LINE_CHARS // 3, len(line) - MAX_LINE_CHARS))
    end = start + MAX_LINE_CHARS
    return ("…" if start > 0 else "") + line[start:end] + ("…" if end < len(line) else "")


def _output(found: list[str], too_big: int, *, cut: bool) -> ToolOutput:
    content = "\n".join(found) if found else "No matches found."
    notes = []
    if cut:
        notes.append(
            f"(stopped after {MAX_GREP_MATCHES} matching lines; narrow the pattern, path or "
            "glob to see the others)"
        )
    if too_big:
        notes.append(
            f"({too_big} file{'s' if too_big != 1 else ''} over "
            f"{MAX_GREP_FILE_BYTES // (1024 * 1024)} MiB not searched)"
        )
    if notes:
        content += "\n\n" + "\n".join(notes)
    return ToolOutput(content=content, truncated=cut)


def _head(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(BINARY_SNIFF_BYTES)


GREP = BuiltinTool(name="grep", description=DESCRIPTION, input_model=GrepInput, execute=grep)
