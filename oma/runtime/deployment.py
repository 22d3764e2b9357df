"""A worker's Worker Deployment Version (Temporal's Worker Versioning), read
from its environment.

``TEMPORAL_DEPLOYMENT_NAME`` and ``TEMPORAL_WORKER_BUILD_ID`` are the names the
Temporal Worker Controller sets on the workers it runs
(https://docs.temporal.io/production-deployment/worker-deployments/kubernetes-controller),
so an OMA worker it starts is versioned as it is. Set both and the worker
serves build ``TEMPORAL_WORKER_BUILD_ID`` of deployment
``TEMPORAL_DEPLOYMENT_NAME``: a run starts on the deployment's current version,
stays on the build it started on (the worker's runs are ``PINNED``:
``oma.worker.deployment_config``; a task's ``AgentRun`` runs on its team run's
build), and a ``TeamRun`` moves to the current version when it continues as
new (``oma.workflows._continue``). Set neither and the worker is
unversioned: every run goes on with the code of whichever worker takes its
next workflow task, so a change of workflow code goes under a patch
(docs/operations.md, "Rolling out new code").
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from temporalio.common import WorkerDeploymentVersion

from oma.core.schema.errors import WorkerDeploymentInvalidError

DEPLOYMENT_NAME_VAR = "TEMPORAL_DEPLOYMENT_NAME"
BUILD_ID_VAR = "TEMPORAL_WORKER_BUILD_ID"

MAX_ID_BYTES = 255
"""The longest deployment name or build id, in UTF-8 bytes (the server's
limit on a build id, ``limit.workerBuildIdSize``)."""


def deployment_from_env(environ: Mapping[str, str] | None = None) -> WorkerDeploymentVersion | None:
    """The Worker Deployment Version ``TEMPORAL_DEPLOYMENT_NAME`` and
    ``TEMPORAL_WORKER_BUILD_ID`` name, or ``None`` when neither is set (an
    unversioned worker).

    Raises ``WorkerDeploymentInvalidError`` when only one is set, or for a
    value the server refuses (empty, longer than ``MAX_ID_BYTES``, starting
    with ``__``, a deployment name holding ``.`` or ``:``): the server
    refuses such a worker's polls without a word to it, so the worker would
    serve nothing.
    """
    env = os.environ if environ is None else environ
    name = env.get(DEPLOYMENT_NAME_VAR, "").strip()
    build_id = env.get(BUILD_ID_VAR, "").strip()
    if not name and not build_id:
        return None
    if not name or not build_id:
        given, missing = (
            (DEPLOYMENT_NAME_VAR, BUILD_ID_VAR) if name else (BUILD_ID_VAR, DEPLOYMENT_NAME_VAR)
        )
        raise WorkerDeploymentInvalidError(
            f"{given} is set but {missing} is not: a versioned worker needs both "
            "(docs/operations.md), an unversioned one neither"
        )
    for var, value in ((DEPLOYMENT_NAME_VAR, name), (BUILD_ID_VAR, build_id)):
        if len(value.encode()) > MAX_ID_BYTES:
            raise WorkerDeploymentInvalidError(
                f"{var} is {len(value.encode())} bytes long; at most {MAX_ID_BYTES}"
            )
        if value.startswith("__"):
            raise WorkerDeploymentInvalidError(
                f"{var} {value!r} starts with '__', which Temporal keeps for itself"
            )
    if "." in name or ":" in name:
        raise WorkerDeploymentInvalidError(
            f"{DEPLOYMENT_NAME_VAR} {name!r} holds '.' or ':', which separate a deployment "
            "name from a build id in Temporal's version strings: choose a name without them"
        )
    return WorkerDeploymentVersion(deployment_name=name, build_id=build_id)
