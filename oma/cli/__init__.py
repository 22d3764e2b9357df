"""The ``oma`` command line: the typer app (``app``: ``main``, ``invoke``)
and its commands (``run``, ``fork``, ``control``, ``show``, with
``common``, ``live``, ``server_watch``, ``summary`` and ``upstream``;
``_help`` gives every command its usage line and ``oma --version``), and the
warm forkserver the console script uses with ``OMA_FORKSERVER=1``
(``forkserver``). ``oma acp`` serves ``oma.acp`` and ``oma show`` draws
``oma.viewer``: products of their own, which never import this package.

``python -m oma.cli`` runs it (``oma.cli.__main__``). The app's names are
imported on first use (PEP 562): importing a command's module does not load
the app.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oma.cli.app import app, invoke, main

__all__ = ["app", "invoke", "main"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'oma.cli' has no attribute {name!r}")
    value = getattr(importlib.import_module("oma.cli.app"), name)
    globals()[name] = value
    return value
