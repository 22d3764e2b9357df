"""The demo's "coder": an external agent run by the ``process`` backend.

It reads its task from stdin (``input: stdin``), writes ``slugify.py`` and its
test ``test_slugify.py`` into its working directory (the backend's ``cwd``),
runs the test with the same interpreter, and prints a short report on stdout,
which becomes the task's result. It exits 1 when the test fails, so the task
fails with the test's output (redacted) in the error.

A stand-in for a real coding agent: it ignores what the task asks beyond
echoing its first line. Standard library only. Try it by hand::

    echo "Write a slugify function" | python3 examples/agents/coder.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SLUGIFY_PY = '''\
"""URL slugs: ``slugify("Crème Brûlée!") == "creme-brulee"``."""

import re
import unicodedata


def slugify(text: str) -> str:
    """``text`` as a lowercase ASCII slug.

    Unicode is NFKD-normalized and folded to ASCII (accents dropped, other
    non-ASCII characters removed), every run of characters other than a-z and
    0-9 becomes one ``-``, and leading and trailing ``-`` are stripped.
    """
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")
'''

TEST_SLUGIFY_PY = '''\
"""Checks for slugify; run with ``python3 test_slugify.py`` (no pytest needed)."""

from slugify import slugify

CASES = [
    ("Hello, World!", "hello-world"),
    ("  Crème Brûlée  ", "creme-brulee"),
    ("Ünïcödé -- 2024", "unicode-2024"),
    ("already-a-slug", "already-a-slug"),
    ("\\ufb01le_name.txt", "file-name-txt"),
    ("---", ""),
    ("", ""),
]

if __name__ == "__main__":
    for text, expected in CASES:
        got = slugify(text)
        assert got == expected, f"slugify({text!r}) == {got!r}, expected {expected!r}"
    print(f"{len(CASES)} checks passed")
'''


def main() -> int:
    task = sys.stdin.read()
    lines = [line.strip() for line in task.splitlines() if line.strip()]
    # OMA sends the system prompt, then the task under a "# Task:" heading
    first_line = next(
        (ln for ln in lines if ln.startswith("# Task:")), lines[0] if lines else "(empty)"
    )
    workdir = Path.cwd()
    files = {"slugify.py": SLUGIFY_PY, "test_slugify.py": TEST_SLUGIFY_PY}
    for name, source in files.items():
        (workdir / name).write_text(source, encoding="utf-8")

    # -B: leave only the two files behind, no __pycache__.
    test = subprocess.run(
        [sys.executable, "-B", "test_slugify.py"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    passed = test.returncode == 0
    summary = test.stdout.strip() if passed else f"failed (exit status {test.returncode})"

    print(f"task: {first_line}")
    print(f"wrote: {', '.join(files)} in {workdir}")
    print(f"test: python3 test_slugify.py -> {summary}")
    if not passed:
        sys.stderr.write(test.stdout + test.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
