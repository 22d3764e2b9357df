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

from oma._moved import MOVED

ROOT = Path(__file__).resolve().parent.parent


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
    for name in ("oma", "workflows", "activities"):
        copytree(ROOT / name, source / name, symlinks=True, ignore=ignore_patterns("__pycache__"))
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
        "oma/worker.py",
        "oma/workflows/team_run.py",
        "oma/activities/llm_turn.py",
        "oma/core/schema/errors.py",
    } <= set(names)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_imports_from_its_old_path_with_a_warning(old: str) -> None:
    new = importlib.import_module(MOVED[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} has moved to {MOVED[old]}"):
        aliased = importlib.import_module(old)
    assert aliased is new
    assert aliased.__spec__ is not None and aliased.__spec__.name == MOVED[old]
    parent, _, name = old.rpartition(".")
    assert getattr(sys.modules[parent], name) is new


def test_every_old_path_names_a_module_that_is_gone() -> None:
    # an alias that shadows nothing: the old file is no longer there
    for old, new in MOVED.items():
        assert not (ROOT / (old.replace(".", "/") + ".py")).exists(), old
        assert (ROOT / (new.replace(".", "/") + ".py")).exists(), new


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
