"""``grep``: the lines of text files that match a regular expression.

A pattern is matched by RE2 (``oma.activities.tools._regex``), in the worker,
in time linear in the text. One RE2 cannot compile (a lookaround, a
backreference) is matched by Python's ``re``, and one whose RE2 program is
large by RE2, in a process of its own (``oma.activities.tools._grep_process``)
that is killed after ``GREP_PROCESS_TIMEOUT_S`` seconds: there a catastrophic
pattern costs its deadline, not the worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oma.activities.tools._files import BINARY_SNIFF_BYTES, is_binary, open_existing, read_regular
from oma.activities.tools._glob_pattern import compile_glob
from oma.activities.tools._progress import Work, in_thread, reporting
from oma.activities.tools._regex import Match, NotRe2Error, Regex, compile_re2, is_cheap
from oma.activities.tools.sandbox import SKIPPED_DIRS, resolve_in_sandbox, shown, walk_files
from oma.activities.tools.tool import BuiltinTool, ToolContext, ToolError, ToolOutput
from oma.runtime.process_group import StderrTail, WorkerTiedGroup, signal_group, wait_exited

MAX_GREP_MATCHES = 100
"""The most matching lines ``grep`` returns; it stops searching there."""

MAX_LINE_CHARS = 300
"""A matching line longer than this is shown cut, around its first match."""

MAX_GREP_FILE_BYTES = 20 * 1024 * 1024
"""Files larger than this are not searched (the result says how many)."""

GREP_PROCESS_TIMEOUT_S = 30.0
"""Seconds a search in a process of its own (Python's ``re``, or a large RE2
program) may take; then the process is killed and the call is an error."""

Engine = Literal["re", "re2"]


class GrepInput(BaseModel):
    """Input of ``grep``."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(
        min_length=1,
        description="A regular expression in Python's syntax, searched in each line (prefix "
        "(?i) to ignore case).",
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
Search file contents: the lines that match a regular expression (Python's \
syntax, searched anywhere in the line; prefix `(?i)` to ignore case), as \
`path:line number:line` with paths relative to the working directory. \
Patterns run on RE2, in linear time: `\\d`, `\\w`, `\\s` and `\\b` are ASCII \
(`\\pL` is any letter); a pattern with a lookaround or a backreference runs on \
Python's re instead, with a deadline of {GREP_PROCESS_TIMEOUT_S:g} s. \
Searches one file, or every text file under a directory (optionally only \
those matching `glob`); binary files (with a NUL byte), files over \
{MAX_GREP_FILE_BYTES // (1024 * 1024)} MiB and files with more than one hard \
link are skipped. Stops after \
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
    _file_filter(args.glob)  # an invalid glob is an error before anything starts
    resolve_in_sandbox(ctx.cwd, args.path or ".")
    try:
        regex = compile_re2(args.pattern)
    except NotRe2Error:
        return await _in_a_process(args, ctx, "re")
    if not is_cheap(regex):
        return await _in_a_process(args, ctx, "re2")
    return await in_thread(
        ctx, f"grep {args.pattern}", lambda work: search(args, ctx.cwd, regex, work)
    )


def search(args: GrepInput, cwd: Path, regex: Regex, work: Work) -> ToolOutput:
    """The search itself, in a thread or in a process of its own: ``args``
    under ``cwd``, matched by ``regex``. Raises ``ToolError`` for a path that
    is missing, outside ``cwd``, or not a regular file or a directory."""
    root = cwd.resolve()
    base = resolve_in_sandbox(cwd, args.path or ".")
    where = shown(root, base)
    name_filter = _file_filter(args.glob)
    if not base.exists():
        raise ToolError(f"{args.path}: no such file or directory")
    if base.is_file():
        with open_existing(base, args.path or where) as f:
            if is_binary(f.read(BINARY_SNIFF_BYTES)):
                return ToolOutput(content=f"No matches: {args.path} is a binary file.")
        files: Iterator[tuple[str, Path]] = iter([(where, base)])
    elif not base.is_dir():
        raise ToolError(f"{args.path} is not a regular file or a directory")
    else:
        files = (
            (os.path.normpath(os.path.join(where, rel)), real)
            for rel, real in walk_files(root, base, work)
            if name_filter(rel)
        )
    return _search(regex, files, work)


async def _in_a_process(args: GrepInput, ctx: ToolContext, engine: Engine) -> ToolOutput:
    """``search`` in ``python -m oma.activities.tools._grep_process``, in a
    process group tied to the worker, killed at ``GREP_PROCESS_TIMEOUT_S``
    or a cancellation."""
    timeout_s = GREP_PROCESS_TIMEOUT_S
    request = json.dumps(
        {"cwd": str(ctx.cwd), "input": args.model_dump(), "engine": engine, "timeout_s": timeout_s}
    ).encode()
    group = await WorkerTiedGroup.start()
    proc: asyncio.subprocess.Process | None = None
    try:
        proc = await group.spawn(
            [sys.executable, "-m", "oma.activities.tools._grep_process"],
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        note = f"grep {args.pattern}: searching with {'Python re' if engine == 're' else 'RE2'}"
        with reporting(ctx, lambda: note):
            try:
                stdout, stderr = await asyncio.wait_for(proc.communicate(request), timeout_s)
            except TimeoutError:
                raise ToolError(_too_slow(args.pattern, engine, timeout_s)) from None
    finally:
        signal_group(group.pgid, signal.SIGKILL)
        if proc is not None:
            await wait_exited(proc)
        await group.close()
    try:
        return ToolOutput.model_validate_json(stdout)
    except ValidationError:
        tail = StderrTail()
        tail.add(stderr)
        raise ToolError(
            f"grep's search process failed ({proc.returncode}): {tail.redacted()}"
        ) from None


def _too_slow(pattern: str, engine: Engine, timeout_s: float) -> str:
    if engine == "re":
        return (
            f"grep: the pattern {pattern!r} did not finish within {timeout_s:g} s with "
            "Python's re (RE2 cannot run it: it uses lookaround or a backreference); write "
            "it without those so that RE2 can, or narrow the path or glob"
        )
    return (
        f"grep: the pattern {pattern!r} did not finish within {timeout_s:g} s (it is large, "
        "and slow to search); simplify it, or narrow the path or glob"
    )


def _file_filter(glob: str | None) -> Callable[[str], bool]:
    if glob is None:
        return lambda rel: True
    regex = compile_glob(glob)
    if "/" in glob.removeprefix("./"):
        return lambda rel: regex.fullmatch(rel) is not None
    return lambda rel: regex.fullmatch(os.path.basename(rel)) is not None


def _search(regex: Regex, files: Iterator[tuple[str, Path]], work: Work) -> ToolOutput:
    found: list[str] = []
    searched = too_big = linked = 0
    for name, real in files:
        work.check()
        work.note = f"grep: {searched} files searched, {len(found)} matching lines"
        try:
            if real.stat().st_size > MAX_GREP_FILE_BYTES:
                too_big += 1
                continue
            if real.stat().st_nlink > 1:
                linked += 1
                continue
            data = read_regular(real, name, MAX_GREP_FILE_BYTES + 1)
        except OSError:
            continue
        if data is None or is_binary(data[:BINARY_SNIFF_BYTES]):
            continue
        searched += 1
        for number, line in enumerate(data.decode(errors="replace").split("\n"), 1):
            if number % 1024 == 0:
                work.check()
            line = line.removesuffix("\r")
            match = regex.search(line)
            if match is None:
                continue
            if len(found) == MAX_GREP_MATCHES:
                return _output(found, too_big, linked, cut=True)
            found.append(f"{name}:{number}:{_cut(line, match)}")
    return _output(found, too_big, linked, cut=False)


def _cut(line: str, match: Match) -> str:
    """``line``, or ``MAX_LINE_CHARS`` of it around the start of ``match``."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    start = max(0, min(match.start() - MAX_LINE_CHARS // 3, len(line) - MAX_LINE_CHARS))
    end = start + MAX_LINE_CHARS
    return ("…" if start > 0 else "") + line[start:end] + ("…" if end < len(line) else "")


def _output(found: list[str], too_big: int, linked: int, *, cut: bool) -> ToolOutput:
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
    if linked:
        notes.append(
            f"({linked} file{'s' if linked != 1 else ''} with more than one hard link not searched)"
        )
    if notes:
        content += "\n\n" + "\n".join(notes)
    return ToolOutput(content=content, truncated=cut)


GREP = BuiltinTool(name="grep", description=DESCRIPTION, input_model=GrepInput, execute=grep)
