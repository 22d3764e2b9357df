"""A worker that lacks the key of a run already in progress ends the run with
``CODEC_KEY_MISSING`` instead of failing its workflow task forever.

A worker without the key reads the run's input as ``UndecodableInput`` and
the workflow fails the run with ``CODEC_KEY_MISSING`` (``oma.runtime.plugin``). On a
run's first workflow task that is the end of it. On a run already in progress
the worker replays the history first, and a failure where the history holds
the steps a worker with the key took is a nondeterminism error: the SDK fails
the workflow task, and retries it, until a worker with the key comes back (a
wedged run, for good when the key was rotated out too early).

Temporal lets a worker fail a run it cannot replay only by treating every
nondeterminism error as a workflow failure (``workflow_failure_exception_types``
holding ``NondeterminismError``), which would also fail, for good, a run an
old worker meets during a rolling deploy; and the SDK core cannot carry a
failure of the workflow's own through that path (it adds its own, and the
server refuses both). So this runner does the one precise thing left: when a
replayed activation fails the run for want of its key, the workflow task fails
with that failure (readable in the history, instead of a nondeterminism error)
and the worker terminates the run, the reason being the failure's
``CODEC_KEY_MISSING: ...`` line. Every other activation passes untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from temporalio.api.failure.v1 import Failure
from temporalio.service import RPCError
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner

if TYPE_CHECKING:
    import temporalio.workflow
    from temporalio.bridge.proto.workflow_activation import WorkflowActivation
    from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
    from temporalio.client import Client
    from temporalio.converter import SerializationContext, StorageDriverStoreContext
    from temporalio.worker._command_aware_visitor import CommandInfo


class KeyFailureRunner(WorkflowRunner):
    """``runner`` (the sandbox, by default), except that a replayed activation
    that fails the run with a failure whose type is one of ``key_error_codes``
    fails the workflow task with it instead, and ``client`` terminates the run
    with ``TYPE: message`` as the reason."""

    def __init__(
        self, runner: WorkflowRunner, key_error_codes: frozenset[str], client: Client
    ) -> None:
        self.runner = runner
        self.key_error_codes = key_error_codes
        self.client = client
        self._ended: set[str] = set()  # run ids terminated, so a retried task asks once

    def prepare_workflow(self, defn: temporalio.workflow._Definition) -> None:
        self.runner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        # called on the worker's event loop; activations run on other threads
        loop = asyncio.get_running_loop()
        return _KeyFailureInstance(self.runner.create_instance(det), self, loop)

    def set_worker_level_failure_exception_types(
        self, types: Sequence[type[BaseException]]
    ) -> None:
        self.runner.set_worker_level_failure_exception_types(types)

    async def end(self, workflow_id: str, run_id: str, reason: str) -> None:
        """Terminate the run ``run_id`` of ``workflow_id``, once; a run already
        closed (another worker ended it) is left as it is."""
        if run_id in self._ended:
            return
        self._ended.add(run_id)
        with contextlib.suppress(RPCError):
            await self.client.get_workflow_handle(workflow_id, run_id=run_id).terminate(
                reason=reason
            )


class _KeyFailureInstance(WorkflowInstance):
    def __init__(
        self, instance: WorkflowInstance, runner: KeyFailureRunner, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._instance = instance
        self._runner = runner
        self._loop = loop

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        completion = self._instance.activate(act)
        if act.is_replaying and completion.HasField("successful"):
            failure = self._key_failure(completion)
            if failure is not None:
                completion.failed.failure.CopyFrom(failure)  # replaces `successful`
                info = self._instance.get_info()
                reason = f"{failure.application_failure_info.type}: {failure.message}"
                self._loop.call_soon_threadsafe(
                    asyncio.ensure_future,
                    self._runner.end(info.workflow_id, info.run_id, reason),
                )
        return completion

    def _key_failure(self, completion: WorkflowActivationCompletion) -> Failure | None:
        for command in completion.successful.commands:
            if command.HasField("fail_workflow_execution"):
                failure = command.fail_workflow_execution.failure
                if failure.application_failure_info.type in self._runner.key_error_codes:
                    kept = Failure()
                    kept.CopyFrom(failure)
                    return kept
        return None

    def get_serialization_context(
        self, command_info: CommandInfo | None
    ) -> SerializationContext | None:
        return self._instance.get_serialization_context(command_info)

    def get_external_store_context(
        self, command_info: CommandInfo | None
    ) -> StorageDriverStoreContext:
        return self._instance.get_external_store_context(command_info)

    def get_info(self) -> temporalio.workflow.Info:
        return self._instance.get_info()

    def get_thread_id(self) -> int | None:
        return self._instance.get_thread_id()
