"""`oma --version` and every command's help, as a user of click-based tools
reads them: `Usage: oma abort [OPTIONS] WORKFLOW_ID`."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version

import pytest
import typer

from oma.cli.app import app
from tests.support.cli import oma_blocking


def test_oma_version_prints_the_installed_version() -> None:
    proc = oma_blocking("--version")

    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0,
        f"oma {version('oma-temporal')}\n",
        "",
    )


def test_oma_version_imports_neither_the_sdk_nor_a_command() -> None:
    probe = (
        "import sys\n"
        "sys.argv = ['oma', '--version']\n"
        "from oma.cli.app import invoke\n"
        "code = invoke()\n"
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] in "
        "('temporalio', 'pydantic', 'rich') or m.startswith('oma.cli.') and m not in "
        "('oma.cli.app', 'oma.cli._help')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout

    assert out.splitlines()[-1] == "0 []"


COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_usage_names_its_arguments_in_upper_case(name: str) -> None:
    arguments = [p for p in COMMANDS[name].params if p.param_type_name == "argument"]
    expected = " ".join(p.name.upper() if p.required else f"[{p.name.upper()}]" for p in arguments)

    proc = oma_blocking(name, "--help")

    assert proc.returncode == 0, proc.stderr
    usage = proc.stdout.splitlines()[0]
    assert usage == f"Usage: oma {name} [OPTIONS] {expected}".rstrip()
    if arguments:
        section = proc.stdout.split("Arguments:")[1].split("Options:")[0]
        listed = re.findall(r"^  (\S+)", section, re.MULTILINE)
        assert listed == [p.name.upper() for p in arguments]


def test_the_usage_line_of_abort_approve_and_show() -> None:
    usages = {
        name: oma_blocking(name, "--help").stdout.splitlines()[0]
        for name in ("abort", "approve", "show")
    }

    assert usages == {
        "abort": "Usage: oma abort [OPTIONS] WORKFLOW_ID",
        "approve": "Usage: oma approve [OPTIONS] WORKFLOW_ID REQUEST_ID",
        "show": "Usage: oma show [OPTIONS] [WORKFLOW_ID]",
    }


def test_a_missing_argument_is_named_as_the_usage_line_names_it() -> None:
    proc = oma_blocking("approve", "run-1")

    assert proc.returncode == 2
    assert "Usage: oma approve [OPTIONS] WORKFLOW_ID REQUEST_ID" in proc.stderr
    assert "Missing argument 'REQUEST_ID'." in proc.stderr
