"""The package's layout: one installed namespace, and a core without side effects.

The import direction between the layers is checked by ``lint-imports``
(``make lint``, the contracts in ``pyproject.toml``); what it cannot say about
the external packages the core may use is checked here.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import zipfile
from pathlib import Path
from shutil import copy, copytree, ignore_patterns

import pytest

from tests.support.paths import ROOT


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_core_uses_only_the_exceptions_of_the_temporal_sdk() -> None:
    temporal = {
        f"{path.name}: {name}"
        for path in (ROOT / "oma" / "core").rglob("*.py")
        for name in _imports(path)
        if name.split(".")[0] == "temporalio" and name != "temporalio.exceptions"
    }
    assert temporal == set()


def test_the_wheel_installs_one_namespace(tmp_path: Path) -> None:
    # built from a copy: a build writes build/ next to the sources
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "worker.py"):
        copy(ROOT / name, source / name)
    copytree(ROOT / "oma", source / "oma", ignore=ignore_patterns("__pycache__"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path),
            str(source),
        ],
        check=True,
        capture_output=True,
        cwd=source,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"oma"}
    assert {
        "oma/worker/__init__.py",
        "oma/workflows/team_run.py",
        "oma/activities/llm_turn.py",
        "oma/core/schema/errors.py",
    } <= set(names)


@pytest.mark.parametrize("old", ["oma.codec", "oma._run_view", "oma.core.errors"])
def test_an_old_module_path_no_longer_imports(old: str) -> None:
    # (the aliases of moved modules, ``oma._moved``, are gone: CHANGELOG.md)
    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_client_package_exports_what_it_lists() -> None:
    import oma.client

    assert sorted(oma.client.__all__) == sorted(oma.client._EXPORTS)
    for name in oma.client.__all__:
        assert getattr(oma.client, name) is not None


def test_the_public_imports_still_work() -> None:
    code = (
        "import oma, oma.client, oma.cli, oma.agent\n"
        "from oma import Agent, OpenMultiAgent\n"
        "from oma.client import ApprovalAnswer, ApprovalCallback, serving, team_run_result\n"
        "from oma.cli import app, main\n"
        "assert Agent.__module__ == 'oma.agent.api'\n"
        "assert OpenMultiAgent is oma.client.OpenMultiAgent\n"
    )
    subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], check=True)
