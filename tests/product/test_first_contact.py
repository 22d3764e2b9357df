"""What a newcomer meets first: `make demo`'s first run says what it installs
and for how long before pip goes quiet, docs/editors.md's install line for
acpx gives it the Node 22 it needs, and counts read as English."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

from temporalio.exceptions import ApplicationError

from oma.runtime.logs import OneLineExpectedFailures
from tests.support.paths import ROOT, TESTS

NPM = TESTS / "npm" / "node_modules"


def test_make_demo_says_what_it_installs_and_how_long_before_pip_runs(tmp_path: Path) -> None:
    # a fresh .venv, and a Python that fails at once: what make prints before it
    made = subprocess.run(
        ["make", "--no-print-directory", f"VENV={tmp_path / 'venv'}", "PYTHON=false", "demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode != 0
    said = made.stdout.split("test -x")[0]
    assert said.startswith(f"installing OMA into {tmp_path / 'venv'} (first use"), made.stdout
    assert "Temporal SDK, CLI and dev server" in said
    assert "about two minutes the first time" in said


def test_the_editors_doc_installs_the_latest_acpx_with_a_node_22_of_its_own() -> None:
    doc = (ROOT / "docs" / "editors.md").read_text()
    install = re.search(r"npm install --prefix (\S+) node@22 acpx@latest\n", doc)
    assert install is not None, "docs/editors.md gives no install line for acpx"
    prefix = install.group(1)
    assert f'export PATH="{prefix.replace("~", "$HOME")}/node_modules/.bin:$PATH"' in doc
    assert "--approve-all" in doc and "--non-interactive-permissions deny" in doc
    # the same layout, as the suite installed it (tests/npm: node@22 beside acpx):
    # on that PATH, acpx runs on the package's Node 22 whatever node the system has
    env = {**os.environ, "PATH": f"{NPM / '.bin'}{os.pathsep}{os.environ['PATH']}"}
    node = subprocess.run(["node", "--version"], env=env, capture_output=True, text=True)
    assert node.stdout.startswith("v22."), node.stdout
    acpx = subprocess.run(["acpx", "--version"], env=env, capture_output=True, text=True)
    assert acpx.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\n", acpx.stdout), acpx


def test_a_worker_logs_an_expected_failure_of_two_lines_with_one_more_line() -> None:
    formatter = OneLineExpectedFailures("%(message)s")
    try:
        raise ApplicationError("exited with status 3\nstderr: oops", type="PROCESS_FAILED")
    except ApplicationError:
        record = logging.LogRecord(
            "temporalio.activity", logging.WARNING, "", 0, "failed", None, sys.exc_info()
        )
    assert formatter.format(record) == "failed: PROCESS_FAILED: exited with status 3 [+1 line]"
