"""``python -m oma.activities.tools._grep_process``: one ``grep`` search in
a process of its own, for a pattern the worker does not search itself
(``oma.activities.tools.grep``).

Reads ``{"cwd", "input", "engine", "timeout_s"}`` (JSON) on stdin and writes
the ``ToolOutput`` (JSON) on stdout. ``engine`` is ``"re"`` (Python's ``re``:
the pattern is one RE2 cannot compile) or ``"re2"``. The worker kills the
process at its deadline; a CPU-time limit a little past it is the kernel's own
bound, should the worker's kill never come.
"""

from __future__ import annotations

import json
import math
import re
import resource
import sys
from pathlib import Path
from typing import Any

from oma.activities.tools._progress import Work
from oma.activities.tools._regex import NotRe2Error, compile_re2
from oma.activities.tools.grep import GrepInput, search
from oma.activities.tools.tool import ToolError, ToolOutput

_CPU_MARGIN_S = 5


def main() -> None:
    request = json.loads(sys.stdin.buffer.read())
    cpu_s = math.ceil(float(request["timeout_s"])) + _CPU_MARGIN_S
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    args = GrepInput.model_validate(request["input"])
    try:
        regex = _compile(args.pattern, request["engine"])
        out = search(args, Path(request["cwd"]), regex, Work(""))
    except ToolError as err:
        out = ToolOutput(content=str(err), is_error=True)
    sys.stdout.write(out.model_dump_json())


def _compile(pattern: str, engine: str) -> Any:
    try:
        if engine == "re2":
            return compile_re2(pattern)
        return re.compile(pattern)
    # Python's re raises more than re.error for a pattern it cannot compile:
    # RecursionError (deep nesting), OverflowError (a huge repetition count)
    except (re.error, NotRe2Error, RecursionError, OverflowError, ValueError) as err:
        raise ToolError(f"invalid regular expression {pattern!r}: {err}") from None


if __name__ == "__main__":
    main()
