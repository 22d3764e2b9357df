"""Whatever a run holds reaches the terminal as text: `oma run` (plain lines,
the live view on a pseudo-terminal, the summary) and `oma show` never pass an
escape sequence a process printed through, and never read run data as rich
markup.

Every `oma` here is a subprocess with `--no-worker` (or connect-only) against
the session's dev server; the session's worker, in this process, runs the
workflows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oma.cli.common import visible
from oma.runtime.dev_server import DevServer
from tests.support.cli import input_file, oma_run, oma_show
from tests.support.runs import process, task
from tests.support.terminal import Terminal

pytestmark = pytest.mark.usefixtures("worker")

HOSTILE = (
    "\x1b]52;c;SGVsbG8=\x07"  # OSC 52: write the clipboard
    "\x1b[2J"  # CSI 2J: clear the screen
    "\x1b]0;pwned\x07"  # OSC 0: set the window title
    " wrote [/tmp/out.txt]"  # a closing tag, to rich markup
)
SHOWN = "^[]52;c;SGVsbG8=^G^[[2J^[]0;pwned^G wrote [/tmp/out.txt]"
"""``HOSTILE`` as the terminal must show it: each control character in caret
notation, the brackets as they are."""

TITLE = "[/]"


def hostile_run(go: Path | None = None) -> dict[str, Any]:
    """One task titled ``[/]`` whose process prints ``HOSTILE`` (and, with
    ``go``, waits until that file exists before it ends)."""
    code = f"import os, sys, time\nsys.stdout.write({HOSTILE!r} + '\\n')\nsys.stdout.flush()\n"
    if go is not None:
        code += f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
    return {
        "team": {"name": "t", "agents": [process("evil", code)]},
        "tasks": [{**task("write", "evil"), "title": TITLE}],
    }


def hostile_failure() -> dict[str, Any]:
    """One task titled ``[/]`` whose process fails with ``HOSTILE`` on stderr."""
    code = f"import sys\nsys.stderr.write({HOSTILE!r} + '\\n')\nsys.exit(3)\n"
    return {
        "team": {"name": "t", "agents": [process("evil", code)]},
        "tasks": [{**task("write", "evil"), "title": TITLE}],
    }


async def test_oma_run_and_oma_show_print_a_hostile_output_as_visible_text(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    ran = await oma_run(dev_server, workflow_id, tmp_path, hostile_run())

    assert ran.returncode == 0, ran.stderr
    # piped, rich writes no escape sequence of its own: any ESC came from the run
    assert "\x1b" not in ran.stdout + ran.stderr
    assert f"output of write ({TITLE})" in ran.stdout
    assert SHOWN in ran.stdout
    assert TITLE in ran.stderr  # the progress lines name the task by its title

    shown = await oma_show(dev_server, workflow_id)

    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout + shown.stderr
    assert TITLE in shown.stdout


async def test_oma_run_and_oma_show_print_a_hostile_error_as_visible_text(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    ran = await oma_run(dev_server, workflow_id, tmp_path, hostile_failure())

    assert ran.returncode == 1, ran.stderr
    assert "Traceback" not in ran.stderr
    assert "\x1b" not in ran.stdout + ran.stderr
    failures = ran.stdout.split("Failures", 1)[1]
    assert f"write ({TITLE}) · evil · PROCESS_FAILED" in failures
    assert SHOWN in failures

    shown = await oma_show(dev_server, workflow_id)

    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout + shown.stderr
    assert f"write ({TITLE}) [PROCESS_FAILED]:" in shown.stdout
    assert SHOWN in shown.stdout


async def test_the_live_view_shows_a_hostile_latest_line_as_visible_text(
    dev_server: DevServer, workflow_id: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    run_file = input_file(tmp_path, hostile_run(go))
    term = Terminal(dev_server, "run", "--no-worker", "--workflow-id", workflow_id, run_file)
    try:
        # the live row: id, title, agent, elapsed, the process's latest line
        await term.wait_for(r"write +\[/\] +evil +\d+\.\ds +\^\[\]52;c;")
        go.touch()
        assert await term.exit_code() == 0, term.screen
    finally:
        term.kill()
    raw = bytes(term._raw)
    # rich's own sequences are CSI (colours, cursor moves): no OSC, no clear
    # screen, no bell reached the terminal
    assert [s for s in (b"\x1b]", b"\x1b[2J", b"\x07") if s in raw] == []
    assert SHOWN in term.screen


def test_visible_names_c1_controls_bidi_overrides_del_and_a_lone_carriage_return() -> None:
    assert visible("a\r\nb\rc\x9b2J\u202eevil\x7f\tend") == "a\nb^McM-^[2J<U+202E>evil^?\tend"
