"""OMA's workflow code in a strict sandbox, read and compiled once per process.

Temporal's workflow sandbox imports a workflow's module, and the packages
above it, anew for every workflow run it creates, through Python's import
system (``temporalio.worker.workflow_sandbox``). A worker passes the ``oma``
package through the sandbox (``oma.worker.plugin.sandboxed``), so none of
that happens there; a strict sandbox (``OmaPlugin(strict_sandbox=True)``,
which the test suite replays every run it made in) keeps it, to check OMA's
code against the sandbox's restrictions. There, each import would read the
file again and, where no bytecode cache can be read or written
(``PYTHONDONTWRITEBYTECODE``, a read-only install without ``.pyc`` files),
compile it again; and a file changed on disk under a running process (a
deploy that overwrites the code in place) would be picked up by the next
run's import, mid-flight (temporalio/sdk-python#607).

``pin()`` puts one finder first on ``sys.meta_path`` that serves every module
of the ``oma`` package from the code object compiled the first time this
process loaded it: the sandbox still executes each module anew for every run
(its state stays the run's own), but finds, reads and compiles it once, and
the code a run executes is the code the process loaded.
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
    first compiled code (idempotent). A strict sandbox's worker or replayer
    calls it as it is configured (``oma.worker.plugin.sandboxed``)."""
    if not any(isinstance(f, _PinnedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PinnedFinder())
