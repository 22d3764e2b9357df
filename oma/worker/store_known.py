"""How a worker tells its workflows that it has a payload store.

Workflow code cannot see its worker's data converter, and a ``TeamRun``'s
budget depends on whether its large payloads go to a payload store
(``oma.workflows._payload_store``). This interceptor
(``temporalio.worker.Interceptor``, installed by ``OmaPlugin`` on a worker
with a store) gives the worker's workflows an extern function of that name,
``STORE_EXTERN``; it intercepts nothing.
"""

from __future__ import annotations

from temporalio.worker import Interceptor, WorkflowInterceptorClassInput

from oma.workflows._payload_store import STORE_EXTERN


class StoreKnown(Interceptor):
    """The interceptor; it adds ``STORE_EXTERN`` and intercepts nothing."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> None:
        input.unsafe_extern_functions[STORE_EXTERN] = _stored
        return None


def _stored() -> bool:
    return True
