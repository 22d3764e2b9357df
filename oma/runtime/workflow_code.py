"""A worker's workflow code, read and compiled once per process.

Temporal's workflow sandbox imports a workflow's module, and the packages
above it, anew for every workflow run it creates, through Python's import
system (``temporalio.worker.workflow_sandbox``). Each of those imports reads
the file again and, where no bytecode cache can be read or written
(``PYTHONDONTWRITEBYTECODE``, a read-only install without ``.pyc`` files),
compiles it again: in a 5,000-task ``TeamRun`` (``bench/dag_overhead.py``),
compiling ``agent_run.py`` and ``oma/__init__.py`` for every ``AgentRun`` was
about a tenth of the worker's CPU. And a file changed on disk under a
running worker (a deploy that overwrites the code in place) is picked up by
the next run's import, mid-flight, while the worker goes on replaying its
other runs with the old code (temporalio/sdk-python#607).

``pin()`` puts one finder first on ``sys.meta_path`` that serves every module
of the ``oma`` package from the code object compiled the first time this
process loaded it: the sandbox still executes each module anew for every run
(its state stays the run's own), but finds, reads and compiles it once, and
the code a worker runs is the code it loaded.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType

PACKAGE = "oma"
"""The top-level package whose modules are pinned (the workflows are ``oma.workflows``)."""


class _PinnedLoader(importlib.machinery.SourceFileLoader):
    """A source file loader that compiles each file once per process."""

    _code: dict[str, CodeType] = {}  # by file path: the registry built as modules load

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        code = self._code.get(path)
        if code is None:
            compiled = super().get_code(fullname)
            assert compiled is not None  # a source file always has code
            code = self._code.setdefault(path, compiled)
        return code


class _PinnedFinder(importlib.abc.MetaPathFinder):
    """Finds a module of ``PACKAGE`` with the finders after it, the first
    time, and loads it with ``_PinnedLoader``; later finds of a source module
    make its spec from where it was found (no search of the path again)."""

    def __init__(self) -> None:
        self._found: dict[str, tuple[str, list[str] | None]] = {}  # name -> (file, package path)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] != PACKAGE:
            return None
        if (found := self._found.get(fullname)) is not None:
            origin, locations = found
            return importlib.util.spec_from_file_location(
                fullname,
                origin,
                loader=_PinnedLoader(fullname, origin),
                submodule_search_locations=locations,
            )
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            loader = spec.loader
            if type(loader) is importlib.machinery.SourceFileLoader:
                spec.loader = _PinnedLoader(loader.name, loader.path)
                locations = spec.submodule_search_locations
                self._found[fullname] = (loader.path, list(locations) if locations else None)
            return spec
        return None


def pin() -> None:
    """Serve every ``oma`` module this process imports from then on from its
    first compiled code (idempotent). A worker and a replayer call it as
    they are configured (``oma.runtime.plugin``)."""
    if not any(isinstance(f, _PinnedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PinnedFinder())
