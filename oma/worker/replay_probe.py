"""A replay that can be looked into: what ``oma replay``'s debugging modes
stand on (``oma.cli.debug``, docs/debugging.md).

The SDK's ``Replayer`` runs the workflow code against a history and says only
whether it matched. ``probe_replayer`` builds one (with ``OmaPlugin``: the
product's data converter and workflows, in the sandbox a worker runs them in)
whose workflow runner wraps each workflow instance, so that a ``ReplayProbe``
sees every activation (one per workflow task of the history: its jobs and
the commands the code answered with, and which line of workflow code issued
each activity, child workflow and signal), can run the workflow's own
queries on it as the replay ends (the state a history cut at a workflow task
left: the answer the ``state`` query would have given then), and can stop the
replay in the workflow code at a chosen workflow task (``pdb``, or the hook of
an IDE's debugger).

Queries run as the SDK runs them on a worker: a ``query_workflow`` job on the
instance, answered read-only. Nothing here changes what the workflow code
does; a replay with a probe matches or mismatches exactly where a plain one
does.
"""

from __future__ import annotations

import pdb
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal

from temporalio import workflow
from temporalio.bridge.proto.workflow_activation import QueryWorkflow, WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.worker import (
    Interceptor,
    StartActivityInput,
    StartChildWorkflowInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)
from temporalio.worker._workflow_instance import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from oma.runtime.converter import DATA_CONVERTER
from oma.runtime.payload_store import PayloadStore

if TYPE_CHECKING:
    from temporalio.worker import Replayer, SignalExternalWorkflowInput
    from temporalio.workflow import ActivityHandle, ChildWorkflowHandle

__all__ = ["Activation", "Origin", "ReplayProbe", "probe_replayer"]

_SDK_MODULES = ("temporalio", "asyncio", "contextlib", "functools", "concurrent", "threading")


@dataclass(frozen=True)
class Origin:
    """Where workflow code issued a command: the innermost frame that is
    neither the SDK's nor this module's. ``line`` counts from 1."""

    file: str
    line: int
    function: str
    code: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}"


@dataclass
class Activation:
    """One workflow task of the replayed history, as the workflow code saw it.

    ``history_length``: the id of the task's ``WorkflowTaskStarted`` event
    (every event up to it was delivered). ``jobs``: the SDK's job kinds
    (``resolve_activity``, ``signal_workflow``, ...). ``commands``: what the
    code answered (the SDK's ``WorkflowCommand`` messages, in order).
    ``origins``: for the commands the SDK's interceptors see (activities,
    child workflows, external signals), ``(kind, key, Origin)`` in the order
    the code issued them: ``kind`` is the command's field name, ``key`` the
    activity type, child workflow id or signal name."""

    history_length: int
    jobs: list[Any]
    commands: list[Any] = field(default_factory=list)
    origins: list[tuple[str, str, Origin]] = field(default_factory=list)
    failure: str | None = None
    replaying: bool = True


class ReplayProbe:
    """What a replay with ``probe_replayer`` saw, and what it is asked to do.

    ``queries``: the queries to answer as the replay ends (after the last
    workflow task of the history, before the SDK evicts the run), by name;
    their answers land in ``answers`` as plain JSON data (a query that
    raised: ``{"error": message}``). ``stop_at``: ids of ``WorkflowTaskStarted``
    events; at the first workflow task whose id is at least one of them,
    ``on_stop(activation, workflow_modules)`` is called just before the
    workflow code handles it (``pdb_stop`` stops in the first line of
    workflow code that runs). ``on_activation(activation, query)`` is called
    after each workflow task, with ``query(name, *args)`` answering the
    workflow's query ``name`` at that point (``oma replay --trace``).
    ``should_stop``, when given, decides instead of ``stop_at`` whether to
    stop before the workflow task of a ``WorkflowTaskStarted`` event id (an
    IDE's breakpoints, which change while the replay runs). ``origins``: record
    where each command was issued (a walk of the stack per command: off
    unless asked, as ``oma replay``'s mismatch report asks). ``keep``: keep
    each workflow task's ``Activation`` in ``activations`` (off for a replay
    that only asks the queries at its end, which then costs what a plain
    replay costs)."""

    def __init__(
        self,
        queries: Sequence[str] = (),
        stop_at: Sequence[int] = (),
        on_stop: Callable[[Activation, tuple[str, ...]], None] | None = None,
        on_activation: Callable[[Activation, Callable[..., Any]], None] | None = None,
        should_stop: Callable[[int], bool] | None = None,
        origins: bool = False,
        keep: bool = True,
    ) -> None:
        self.queries = tuple(queries)
        self.answers: dict[str, Any] = {}
        self.activations: list[Activation] = []
        self.keep = keep
        self.stop_at = sorted(stop_at)
        self.on_stop = on_stop
        self.on_activation = on_activation
        self.should_stop = should_stop
        self.origins = origins
        self.workflow_modules: tuple[str, ...] = ()
        self._pending: list[tuple[str, str, Origin]] = []

    def issued(self, kind: str, key: str) -> None:
        """Called by the interceptor as workflow code issues a command."""
        origin = _origin(sys._getframe(1))
        if origin is not None:
            self._pending.append((kind, key, origin))

    def _take_origins(self) -> list[tuple[str, str, Origin]]:
        taken, self._pending = self._pending, []
        return taken

    def _due_stop(self, history_length: int) -> bool:
        if self.on_stop is not None and self.should_stop is not None:
            return self.should_stop(history_length)
        if self.on_stop is None or not self.stop_at or history_length < self.stop_at[0]:
            return False
        self.stop_at = [s for s in self.stop_at if s > history_length]
        return True


def _origin(frame: FrameType | None) -> Origin | None:
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if not (module.startswith(_SDK_MODULES) or module == __name__):
            code = frame.f_code
            return Origin(code.co_filename, frame.f_lineno, code.co_name, _line_text(frame))
        frame = frame.f_back
    return None


def _line_text(frame: FrameType) -> str:
    import linecache

    return linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()


class _Observed(WorkflowInstance):
    """A workflow instance whose activations a ``ReplayProbe`` sees."""

    def __init__(self, inner: WorkflowInstance, probe: ReplayProbe) -> None:
        self.inner = inner
        self.probe = probe
        self._last: WorkflowActivation | None = None

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        probe = self.probe
        if any(job.HasField("remove_from_cache") for job in act.jobs):
            if self._last is not None:
                for name in probe.queries:
                    probe.answers[name] = self.query(self._last, name)
            return self.inner.activate(act)
        if all(job.HasField("query_workflow") for job in act.jobs):
            return self.inner.activate(act)
        if not probe.keep and probe.on_stop is None and probe.on_activation is None:
            self._last = act
            return self.inner.activate(act)
        seen = Activation(
            history_length=act.history_length,
            jobs=[job.WhichOneof("variant") for job in act.jobs],
            replaying=act.is_replaying,
        )
        probe._take_origins()
        if probe._due_stop(act.history_length) and probe.on_stop is not None:
            probe.on_stop(seen, probe.workflow_modules)
        completion = self.inner.activate(act)
        self._last = act
        seen.origins = probe._take_origins()
        if completion.HasField("successful"):
            seen.commands = list(completion.successful.commands)
        else:
            seen.failure = completion.failed.failure.message
        probe.activations.append(seen)
        if probe.on_activation is not None:
            probe.on_activation(seen, lambda name, *args: self.query(act, name, *args))
        return completion

    def query(self, last: WorkflowActivation, name: str, *args: Any) -> Any:
        """The answer of the workflow's query ``name`` now, as plain JSON data."""
        act = WorkflowActivation(
            run_id=last.run_id,
            timestamp=last.timestamp,
            is_replaying=True,
            history_length=last.history_length,
        )
        query = QueryWorkflow(query_id=f"oma-replay-{name}", query_type=name)
        query.arguments.extend(DATA_CONVERTER.payload_converter.to_payloads(list(args)))
        act.jobs.add().query_workflow.CopyFrom(query)
        completion = self.inner.activate(act)
        for command in completion.successful.commands:
            if command.HasField("respond_to_query"):
                answer = command.respond_to_query
                if answer.HasField("failed"):
                    return {"error": answer.failed.message}
                return DATA_CONVERTER.payload_converter.from_payloads([answer.succeeded.response])[
                    0
                ]
        return {"error": completion.failed.failure.message or "no answer"}

    def get_serialization_context(self, command_info: Any) -> Any:
        return self.inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self.inner.get_external_store_context(command_info)

    def get_info(self) -> workflow.Info:
        return self.inner.get_info()

    def get_thread_id(self) -> int | None:
        return self.inner.get_thread_id()


@dataclass(frozen=True)
class ProbingRunner(SandboxedWorkflowRunner):
    """The SDK's sandbox whose instances a ``ReplayProbe`` sees. A subclass,
    not a wrapper, so that what the plugin and the SDK's debug mode do to a
    sandbox (pass ``oma`` through, let ``breakpoint()`` and a debugger's
    modules in) still applies."""

    probe: ReplayProbe | None = field(default=None, compare=False)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        instance = super().create_instance(det)
        return instance if self.probe is None else _Observed(instance, self.probe)


class _ProbeInterceptor(Interceptor):
    """Tells the probe which line of workflow code issued each activity,
    child workflow and signal (the commands the SDK's interceptors see)."""

    def __init__(self, probe: ReplayProbe) -> None:
        self.probe = probe

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        probe = self.probe

        class Outbound(WorkflowOutboundInterceptor):
            def start_activity(self, input: StartActivityInput) -> ActivityHandle[Any]:
                probe.issued("schedule_activity", input.activity)
                return super().start_activity(input)

            def start_local_activity(self, input: StartLocalActivityInput) -> ActivityHandle[Any]:
                probe.issued("schedule_local_activity", input.activity)
                return super().start_local_activity(input)

            async def start_child_workflow(
                self, input: StartChildWorkflowInput
            ) -> ChildWorkflowHandle[Any, Any]:
                probe.issued("start_child_workflow_execution", input.id)
                return await super().start_child_workflow(input)

            async def signal_external_workflow(self, input: SignalExternalWorkflowInput) -> None:
                probe.issued("signal_external_workflow_execution", input.signal)
                return await super().signal_external_workflow(input)

        class Inbound(WorkflowInboundInterceptor):
            def init(self, outbound: WorkflowOutboundInterceptor) -> None:
                super().init(Outbound(outbound))

        return Inbound


def probe_replayer(
    probe: ReplayProbe,
    *,
    debug_mode: bool = False,
    codec: bool = True,
    payload_store: PayloadStore | Literal["env"] | None = "env",
) -> Replayer:
    """A ``Replayer`` of every OMA workflow (``oma.worker.plugin.replayer``'s:
    the product's data converter, decrypting with ``OMA_CODEC_KEYS`` when
    ``codec`` and reading stored payloads from ``payload_store``, by default
    ``OMA_PAYLOAD_STORE``'s, and the worker's sandbox) that ``probe`` looks into.
    ``debug_mode``: the SDK's (``Replayer(debug_mode=True)``): each workflow
    task runs on the calling thread with no deadlock timeout, so ``pdb`` and
    an IDE's breakpoints can hold it, and ``breakpoint()`` in workflow code
    stops there."""
    from temporalio.worker import Replayer

    from oma.worker.plugin import OmaPlugin, workflows

    probe.workflow_modules = tuple(sorted({"oma.workflows", *(w.__module__ for w in workflows())}))
    plugin = OmaPlugin(codec_keys="env" if codec else None, payload_store=payload_store)
    return Replayer(
        workflows=[],
        plugins=[plugin],
        workflow_runner=ProbingRunner(probe=probe),
        interceptors=[_ProbeInterceptor(probe)] if probe.origins else [],
        debug_mode=debug_mode,
    )


class WorkflowPdb(pdb.Pdb):
    """``pdb`` for workflow code: its first stop is the first line of
    workflow code that runs (``workflow_modules``, by module name prefix),
    not the SDK's or the sandbox's; ``next`` and ``step`` then skip the
    SDK's frames. Its prompt lifts the sandbox's restrictions while it waits
    (as the SDK's own debug-mode ``pdb`` does), and ``quit`` continues the
    replay (stopping a workflow task half-way would fail it)."""

    def __init__(self, workflow_modules: tuple[str, ...]) -> None:
        super().__init__(skip=[f"{m}*" for m in _SDK_MODULES] + ["oma.runtime*", __name__])
        self.workflow_modules = workflow_modules
        self.first = True

    def is_skipped_module(self, module_name: str) -> bool:
        if self.first:
            return not (module_name or "").startswith(self.workflow_modules)
        return bool(super().is_skipped_module(module_name))

    def interaction(self, frame: Any, tb_or_exc: Any) -> None:
        self.first = False
        with workflow.unsafe.sandbox_unrestricted():
            super().interaction(frame, tb_or_exc)

    def do_quit(self, arg: str) -> bool | None:
        self.message("(quit continues the replay; Ctrl-C ends it)")
        return self.do_continue(arg)

    do_q = do_exit = do_EOF = do_quit


def pdb_stop(activation: Activation, workflow_modules: tuple[str, ...]) -> None:
    """``ReplayProbe.on_stop`` for a terminal: ``pdb`` at the first line of
    workflow code that the workflow task of ``activation`` runs."""
    print(
        f"oma replay: stopping in the workflow code at the workflow task of event "
        f"{activation.history_length} ({', '.join(activation.jobs)})",
        file=sys.stderr,
    )
    debugger = WorkflowPdb(workflow_modules)
    debugger.set_trace(sys._getframe(1))
