"""No tool input stops a worker (tools.md, "Limits"): the built-in tools'
patterns match in linear time (RE2) or, where RE2 cannot express them, in a
process of their own that is killed at a deadline; the file tools refuse what
is not a regular file before they open it, and a file with more than one hard
link; a tool stuck in a thread is given up at its deadline, and the calls after
it still run. Real temporary directories, real processes, no Temporal.

The catastrophic inputs here are sized to take Python's ``re`` a second or a
few (a longer one would hold the GIL for hours, and the test could then never
report its failure)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

import oma.activities.tools._progress as progress_module
import oma.activities.tools.grep as grep_module
from oma.activities.tools import ToolContext, ToolError, ToolOutput, run_builtin
from tests.support.procs import cmdline, descendants

BACKTRACKING_LINE = "a" * 25
"""A line on which ``(a+)+b`` backtracks 2**25 times in Python's ``re``
(about 2 s on a loaded 2-core machine)."""


async def call(cwd: Path, name: str, **raw: Any) -> ToolOutput:
    return await run_builtin(name, raw, ToolContext(cwd=cwd))


class LoopGaps:
    """The longest the event loop went without running a 10 ms timer."""

    def __init__(self) -> None:
        self.longest = 0.0


@asynccontextmanager
async def watching_the_loop() -> AsyncIterator[LoopGaps]:
    loop = asyncio.get_running_loop()
    gaps = LoopGaps()
    last = time.monotonic()
    handle: asyncio.TimerHandle

    def tick() -> None:
        nonlocal last, handle
        now = time.monotonic()
        gaps.longest = max(gaps.longest, now - last)
        last = now
        handle = loop.call_later(0.01, tick)

    handle = loop.call_later(0.01, tick)
    try:
        yield gaps
    finally:
        handle.cancel()
        gaps.longest = max(gaps.longest, time.monotonic() - last)


def regex_processes() -> list[int]:
    """This test process's children that search with Python's ``re``."""
    return [pid for pid in descendants(os.getpid()) if "_python_re_grep" in cmdline(pid)]


# -- patterns ------------------------------------------------------------------


@pytest.mark.parametrize("glob", [None, "*.txt"])
async def test_a_catastrophic_grep_pattern_keeps_the_event_loop_running(
    cwd: Path, glob: str | None
) -> None:
    (cwd / "a.txt").write_text(f"{BACKTRACKING_LINE}\nab\n")
    started = time.monotonic()
    async with watching_the_loop() as gaps:
        out = await call(cwd, "grep", pattern="(a+)+b", glob=glob)
    elapsed = time.monotonic() - started

    assert out == ToolOutput(content="a.txt:2:ab")
    assert elapsed < 0.5
    assert gaps.longest < 0.3


async def test_a_catastrophic_glob_pattern_keeps_the_event_loop_running(cwd: Path) -> None:
    # '**/' eight times over a path 30 directories deep: Python's re tries
    # every way to split the path among the eight
    deep = cwd.joinpath(*["d"] * 30)
    deep.mkdir(parents=True)
    (deep / "y").write_text("y\n")
    started = time.monotonic()
    async with watching_the_loop() as gaps:
        out = await call(cwd, "glob", pattern="**/" * 8 + "x")
    elapsed = time.monotonic() - started

    assert out == ToolOutput(content="No files match '" + "**/" * 8 + "x' under ..")
    assert elapsed < 0.5
    assert gaps.longest < 0.3


@pytest.mark.parametrize(
    ("pattern", "found"),
    [
        (r"(?<=foo)bar", "f.txt:2:foobar"),
        (r"(\w)\1", "f.txt:2:foobar\nf.txt:3:book"),
        (r"x\Z", "f.txt:4:ax"),
    ],
)
async def test_a_pattern_re2_cannot_express_still_matches_with_python_re(
    cwd: Path, pattern: str, found: str
) -> None:
    (cwd / "f.txt").write_text("bar\nfoobar\nbook\nax\n")
    assert await call(cwd, "grep", pattern=pattern) == ToolOutput(content=found)


async def test_a_python_re_pattern_past_its_deadline_is_an_error_and_its_process_dies(
    cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grep_module, "GREP_PROCESS_TIMEOUT_S", 0.5)
    (cwd / "a.txt").write_text(f"{BACKTRACKING_LINE * 2}\n")
    started = time.monotonic()
    async with watching_the_loop() as gaps:
        out = await call(cwd, "grep", pattern="(?=(a+)+b)")
    elapsed = time.monotonic() - started

    assert out == ToolOutput(
        content="grep: the pattern '(?=(a+)+b)' did not finish within 0.5 s with Python's re "
        "(RE2 cannot run it: it uses lookaround or a backreference); write it without those "
        "so that RE2 can, or narrow the path or glob",
        is_error=True,
    )
    assert elapsed < 2.0
    assert gaps.longest < 0.3
    assert regex_processes() == []


@pytest.mark.parametrize(
    "pattern",
    [
        "(" * 5000 + ")" * 5000,  # RecursionError in Python's re; RE2 takes it
        "a{99999999999}",  # OverflowError in Python's re
        "(" * 5000 + ")" * 5000 + "(?<=x)",  # RE2 refuses it, Python's re recurses too deep
        "(?<=a{99999999999})",
    ],
)
async def test_a_pattern_python_re_cannot_compile_is_never_an_exception(
    cwd: Path, pattern: str
) -> None:
    (cwd / "f.txt").write_text("xyz\n")
    out = await call(cwd, "grep", pattern=pattern)
    assert isinstance(out, ToolOutput)
    if out.is_error:
        assert out.content.startswith("invalid regular expression")


# -- what is not a regular file ------------------------------------------------


@pytest.fixture
def fifo(cwd: Path) -> Iterator[Path]:
    path = cwd / "pipe"
    os.mkfifo(path)
    yield path
    # a writer blocked opening it (the bug) gets its reader and goes
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    time.sleep(0.05)
    os.close(reader)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("file_write", {"content": "x"}),
        ("file_read", {}),
        ("file_edit", {"old_string": "a", "new_string": "b"}),
        ("grep", {"pattern": "a"}),
    ],
)
async def test_a_fifo_is_refused_before_it_is_opened(
    cwd: Path, fifo: Path, tool: str, args: dict[str, Any]
) -> None:
    out = await asyncio.wait_for(call(cwd, tool, path="pipe", **args), 2.0)
    assert out.is_error
    assert "pipe is not a regular file" in out.content


async def test_grep_skips_a_fifo_while_walking(cwd: Path, fifo: Path) -> None:
    (cwd / "a.txt").write_text("a\n")
    out = await asyncio.wait_for(call(cwd, "grep", pattern="a"), 2.0)
    assert out == ToolOutput(content="a.txt:1:a")


# -- hard links ----------------------------------------------------------------


@pytest.fixture
def hard_link(cwd: Path) -> Path:
    link = cwd / "notes.txt"
    os.link(cwd.parent / "outside" / "secret.txt", link)
    return link


LINKED = (
    "notes.txt has 2 hard links: it may be a file outside the working directory under "
    "another name, and the file tools do not reach those (use bash if you trust it)"
)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("file_read", {}),
        ("file_write", {"content": "overwritten\n"}),
        ("file_edit", {"old_string": "secret", "new_string": "leaked"}),
        ("grep", {"pattern": "secret"}),
    ],
)
async def test_a_hard_link_is_refused(
    cwd: Path, hard_link: Path, tool: str, args: dict[str, Any]
) -> None:
    out = await call(cwd, tool, path="notes.txt", **args)
    assert out == ToolOutput(content=LINKED, is_error=True)
    assert (cwd.parent / "outside" / "secret.txt").read_text() == "the secret\n"


async def test_grep_skips_hard_links_while_walking_and_says_so(cwd: Path, hard_link: Path) -> None:
    (cwd / "plain.txt").write_text("no secret here\n")
    out = await call(cwd, "grep", pattern="secret")
    assert out == ToolOutput(
        content="plain.txt:1:no secret here\n\n(1 file with more than one hard link not searched)"
    )


# -- deadlines -----------------------------------------------------------------


@contextmanager
def stuck_threads(count: int) -> Iterator[list[asyncio.Task[object]]]:
    """``count`` file tools' thread work that blocks until the block ends."""
    release = threading.Event()
    ctx = ToolContext(cwd=Path("/"))
    tasks = [
        asyncio.ensure_future(
            progress_module.in_thread(ctx, f"stuck {i}", lambda work: release.wait(60))
        )
        for i in range(count)
    ]
    try:
        yield tasks
    finally:
        release.set()


async def test_a_tool_stuck_in_a_thread_is_given_up_at_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress_module, "THREAD_TOOL_TIMEOUT_S", 0.3)
    with stuck_threads(1) as [stuck], pytest.raises(ToolError) as err:
        await asyncio.wait_for(stuck, 2.0)
    assert str(err.value) == (
        "stuck 0 did not finish within 0.3 s and was given up (a write it had begun may "
        "still complete)"
    )


async def test_tools_stuck_in_threads_do_not_hold_up_the_next_call(cwd: Path) -> None:
    (cwd / "notes.txt").write_text("alpha\n")
    # more than the default executor's threads (min(32, cores + 4))
    with stuck_threads((os.cpu_count() or 1) + 8) as tasks:
        out = await asyncio.wait_for(call(cwd, "file_read", path="notes.txt"), 2.0)
        assert not any(task.done() for task in tasks)
    assert out == ToolOutput(content="     1\talpha")
    await asyncio.wait(tasks)


async def test_an_unexpected_error_inside_a_builtin_tool_is_an_error_result(
    cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> ToolOutput:
        raise RuntimeError("a bug")

    monkeypatch.setattr(grep_module, "_search", broken)
    (cwd / "f.txt").write_text("x\n")
    out = await call(cwd, "grep", pattern="x")
    assert out == ToolOutput(
        content="grep failed unexpectedly (RuntimeError: a bug); this is a bug in OMA, the "
        "worker's log has the traceback",
        is_error=True,
    )
