"""Run an OMA worker: connect to Temporal and serve the ``oma`` task queue.

``python worker.py`` or ``oma worker``. Where it connects comes from
Temporal's environment configuration (``oma.runtime.connection``: a profile file,
``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, TLS) and
``OMA_TASK_QUEUE`` (``oma``); with ``TEMPORAL_DEPLOYMENT_NAME`` and
``TEMPORAL_WORKER_BUILD_ID``, it serves that build of a Worker Deployment
(``oma.runtime.deployment``, docs/operations.md). Model credentials (``ANTHROPIC_API_KEY``) are
read here, by the activities, and never travel in workflow input; where they
may be sent is the operator's ``OMA_CREDENTIALS`` (docs/security.md).

``python worker.py`` at the repository's root runs this package's ``main``.
Its composition root is ``root`` (``main``, ``build_worker``,
``Activities``, ``OmaWorker``, named here and imported on first use), which
alone (with the CLI, the client, the in-process ``Agent`` and the dev
server) imports everything. The package holds what only a worker (or a
replayer) needs besides: its
plugin (``plugin``), its workflow sandbox (``workflow_code``), the
interceptors the plugin installs (``activity_errors``, ``_redaction``,
``store_known``) and the replay probe (``replay_probe``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oma.worker.root import (
        Activities,
        OmaWorker,
        build_worker,
        deployment_config,
        main,
        serving_client,
        session_task_queue,
    )

__all__ = [
    "Activities",
    "OmaWorker",
    "build_worker",
    "deployment_config",
    "main",
    "serving_client",
    "session_task_queue",
]


def __getattr__(name: str) -> Any:
    """The composition root's names, imported on first use (PEP 562): a
    replayer's ``import oma.worker.plugin`` loads no activity."""
    if name in __all__:
        return getattr(importlib.import_module("oma.worker.root"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
