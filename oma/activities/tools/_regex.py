"""The regular expressions a model writes (``grep``'s pattern, a glob
translated), matched by RE2 (``google-re2``): in time linear in the text,
whatever the pattern, where Python's backtracking ``re`` can take longer than
the universe's age (``(a+)+b`` on a line of 48 ``a``) while holding the GIL.

Linear is not free: RE2 falls back from its DFA to simulating the pattern's
program, at a cost of about the program's size per character, so a large
program (``(a{1}b|a{2}b|...|a{299}b)``, 45 000 instructions) is slow on a long
text. ``is_cheap`` tells the patterns whose worst case is bounded enough to run
in the worker.
"""

from __future__ import annotations

from typing import Any, Protocol

import re2

MAX_WORKER_PROGRAM_SIZE = 300
"""The largest RE2 program (``programsize``, instructions) searched in the
worker: at about 7 ns per instruction and character in RE2's slowest mode,
at most 2 µs per character. Everyday patterns are 10 to 60; a larger one is
searched in a process of its own, with a deadline (``oma.activities.tools.grep``)."""

MAX_MEMORY_BYTES = 64 * 1024 * 1024
"""RE2's memory budget per pattern (its program and DFA cache), bytes."""


class Match(Protocol):
    """What a search finds (an ``re.Match`` or an RE2 match)."""

    def start(self) -> int: ...


class Regex(Protocol):
    """A compiled pattern (an ``re.Pattern[str]`` or an RE2 one)."""

    def search(self, text: str) -> Match | None: ...

    def fullmatch(self, text: str) -> Match | None: ...


class NotRe2Error(Exception):
    """RE2 cannot compile the pattern: its syntax has no lookaround,
    backreferences, possessive quantifiers or repetitions over 1000, or the
    pattern is invalid in any syntax. The message is RE2's."""


def compile_re2(pattern: str, *, dot_nl: bool = False) -> Any:
    """``pattern`` compiled by RE2 (a ``Regex``), Python's syntax as far as
    RE2 has it; ``dot_nl``: ``.`` matches a line end too (``re.DOTALL``).

    Raises ``NotRe2Error`` when RE2 cannot compile it.
    """
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.max_mem = MAX_MEMORY_BYTES
    options.dot_nl = dot_nl
    try:
        return re2.compile(pattern, options)
    except re2.error as err:
        reason = err.args[0] if err.args else err
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise NotRe2Error(str(reason)) from None


def is_cheap(regex: Any) -> bool:
    """Whether an RE2 pattern is small enough to search in the worker
    (``MAX_WORKER_PROGRAM_SIZE``)."""
    size: int = regex.programsize
    return size <= MAX_WORKER_PROGRAM_SIZE
