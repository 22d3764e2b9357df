"""Whether a run's large payloads go to a payload store.

A worker with a payload store (``OMA_PAYLOAD_STORE``, Temporal's External
Storage: ``oma.runtime.payload_store``) keeps each payload past the store's
threshold there, and the history holds a reference: a ``TeamRun`` on it may
carry, return and be given far more than Temporal's 2 MB
(``oma.core.schema.limits.state_budget``). Workflow code cannot see its
worker's data converter, so the worker says it has a store through an
extern function (``STORE_EXTERN``, set by ``oma.worker.plugin.OmaPlugin``),
and a run records what it learned as it starts in a patch marker
(``_patches.PAYLOAD_STORE``): its replay, on any worker, takes the path the
run took.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from oma.workflows import _patches

STORE_EXTERN = "oma_payload_store"
"""The extern function a worker with a payload store gives its workflows
(``temporalio.worker.WorkflowInterceptorClassInput.unsafe_extern_functions``)."""


def stored() -> bool:
    """Whether this run's payloads past the threshold go to a payload store:
    its worker has one as the run starts (``STORE_EXTERN``), recorded as
    ``_patches.PAYLOAD_STORE``; in a replay, whether the run recorded it.
    Ask once, in the run's first workflow task (a ``workflow.init``)."""
    if workflow.unsafe.is_replaying() or STORE_EXTERN in workflow.extern_functions():
        return workflow.patched(_patches.PAYLOAD_STORE)
    return False
