"""Glob patterns (``src/**/*.py``, ``*.{ts,tsx}``) as regular expressions
over ``/``-separated relative paths, matched by RE2: eight ``**/`` in a row
would take Python's ``re`` seconds per path 30 directories deep, and minutes
at 40 (``oma.activities.tools._regex``)."""

from __future__ import annotations

import re
from typing import Any

from oma.activities.tools._regex import NotRe2Error, compile_re2
from oma.activities.tools.tool import ToolError


def compile_glob(pattern: str) -> Any:
    """A regular expression that fully matches the relative paths ``pattern`` names.

    ``**`` matches any number of directories, none included (``**/*.py`` is
    every ``.py`` file at any depth, ``src/**`` everything under ``src``);
    ``*`` any characters but ``/``; ``?`` one character but ``/``;
    ``[abc]``, ``[a-z]`` and ``[!abc]`` one character of (or not of) a set;
    ``{a,b}`` either alternative. A leading ``./`` is ignored. Raises
    ``ToolError`` for an absolute pattern or one that climbs with ``..``
    (the directory belongs in ``path``), or one too large for RE2. The
    result is an RE2 pattern (``oma.activities.tools._regex.Regex``).
    """
    pattern = pattern.removeprefix("./")
    if pattern.startswith("/"):
        raise ToolError(
            f"glob pattern {pattern!r} is absolute; give the directory as 'path' and a "
            "pattern relative to it"
        )
    if ".." in pattern.split("/"):
        raise ToolError(f"glob pattern {pattern!r} may not contain '..'")
    try:
        return compile_re2(_translate(pattern), dot_nl=True)
    except NotRe2Error as err:
        raise ToolError(f"glob pattern {pattern!r} cannot be matched: {err}") from None


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**", i):
            at_segment_start = i == 0 or pattern[i - 1] == "/"
            if at_segment_start and pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := _class_end(pattern, i)) != -1:
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            escaped = "".join(ch if ch == "-" else re.escape(ch) for ch in body)
            out.append(f"[{'^/' if negate else ''}{escaped}]")
            i = end
        elif c == "{" and (alternatives := _alternatives(pattern, i)) is not None:
            options, end = alternatives
            out.append("(?:" + "|".join(_translate(o) for o in options) + ")")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """The index of the ``]`` closing the class opened at ``start``, or -1."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "!":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1  # a leading ] is a member
    end = pattern.find("]", i)
    return -1 if end == -1 or "/" in pattern[start:end] else end


def _alternatives(pattern: str, start: int) -> tuple[list[str], int] | None:
    """The comma-separated options of the ``{...}`` opened at ``start`` and
    the index of its ``}``, nested braces allowed; ``None`` when unclosed."""
    depth, options, begin = 0, [], start + 1
    for i in range(start, len(pattern)):
        c = pattern[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                options.append(pattern[begin:i])
                return options, i
        elif c == "," and depth == 1:
            options.append(pattern[begin:i])
            begin = i + 1
    return None
