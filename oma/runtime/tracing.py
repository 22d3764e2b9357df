"""Tracing: OpenTelemetry spans for runs, tasks, model turns, tool calls,
process runs and ACP turns (docs/tracing.md).

Off unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, and off again with
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none`` (the standard
OpenTelemetry variables). While it is off nothing here imports OpenTelemetry:
this module is read by every ``OmaPlugin``, the CLI's included.

When on, ``OmaPlugin`` adds ``tracing_plugin()`` to every client, worker and
replayer: the SDK's ``temporalio.contrib.opentelemetry.OpenTelemetryInterceptor``
with its Temporal spans (``StartWorkflow:TeamRun`` on the client, the trace's
root; ``RunWorkflow:TeamRun``, ``StartChildWorkflow:AgentRun``,
``RunWorkflow:AgentRun``, ``RunActivity:llm_turn``, ... on the workers,
connected through the ``_tracer-data`` header Temporal carries), which are
replay-safe (a workflow span ends only when not replaying, its ids come from
the workflow's deterministic random), plus OMA's attributes on them
(``oma.runtime.span_attributes``: agent, task, team, token usage). Spans leave the
process over OTLP/HTTP (``opentelemetry-exporter-otlp-proto-http``, the
``[otel]`` extra), batched.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from oma.core.schema.errors import TracingUnavailableError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor
    from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider
    from temporalio.plugin import SimplePlugin
    from temporalio.worker import WorkflowRunner

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
"""Either turns tracing on (the OTLP exporter's own variables)."""

SERVICE_NAME = "oma"
"""The ``service.name`` of OMA's spans unless ``OTEL_SERVICE_NAME`` names another."""

_EXTRA_HINT = "pip install 'oma-temporal[otel]'"


def enabled_by_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint is set and
    neither ``OTEL_SDK_DISABLED=true`` nor ``OTEL_TRACES_EXPORTER=none``."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(env.get(var, "").strip() for var in ENDPOINT_VARS)


def tracer_provider(*processors: SpanProcessor) -> ReplaySafeTracerProvider:
    """A replay-safe tracer provider (``temporalio.contrib.opentelemetry.
    create_tracer_provider``, which an OMA worker needs) with OMA's resource
    and sampler, exporting through ``processors``.

    The sampler drops the traces a bare query would start (``QueryWorkflow:*``
    with no parent: ``oma run`` polls its run's state several times a second)
    and follows the parent otherwise; ``OTEL_TRACES_SAMPLER``, when set,
    replaces it. Set it globally (``opentelemetry.trace.set_tracer_provider``)
    to trace with your own exporter and ``OmaPlugin(tracing=True)``. Raises
    ``TracingUnavailableError`` without ``opentelemetry-sdk``.
    """
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import sampling
        from temporalio.contrib.opentelemetry import create_tracer_provider
    except ImportError as err:
        raise TracingUnavailableError(
            f"tracing needs the OpenTelemetry SDK ({err.name} is missing): {_EXTRA_HINT}"
        ) from None

    class NoQueryRoots(sampling.Sampler):
        def should_sample(
            self, parent_context: Any, trace_id: int, name: str, *args: Any, **kwargs: Any
        ) -> sampling.SamplingResult:
            if name.startswith("QueryWorkflow:"):
                return sampling.SamplingResult(sampling.Decision.DROP)
            return sampling.SamplingResult(
                sampling.Decision.RECORD_AND_SAMPLE, kwargs.get("attributes")
            )

        def get_description(self) -> str:
            return "OmaNoQueryRoots"

    own_sampler = sampling.ParentBased(NoQueryRoots())
    sampler = None if os.environ.get("OTEL_TRACES_SAMPLER") else own_sampler
    own_name = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
    provider = create_tracer_provider(sampler=sampler, resource=Resource.create(own_name))
    for processor in processors:
        provider.add_span_processor(processor)
    return provider


def install_from_env() -> None:
    """Make the global tracer provider a ``tracer_provider`` exporting over
    OTLP/HTTP to ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the exporter reads its own
    variables: headers, timeout, ``.../v1/traces``), batched and flushed at
    exit (the SDK's ``atexit`` hook, or ``shutdown`` for a process that
    leaves with ``os._exit``); unless a replay-safe provider is global already (a test's, an
    application's). Raises ``TracingUnavailableError`` without the ``[otel]``
    extra."""
    from opentelemetry import trace
    from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider

    if isinstance(trace.get_tracer_provider(), ReplaySafeTracerProvider):
        return
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as err:
        raise TracingUnavailableError(
            f"OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is not installed "
            f"({err.name} is missing): {_EXTRA_HINT}, or unset it (OTEL_SDK_DISABLED=true)"
        ) from None
    trace.set_tracer_provider(tracer_provider(BatchSpanProcessor(OTLPSpanExporter())))


def shutdown() -> None:
    """Export every span still batched and stop exporting: the global tracer
    provider's ``shutdown`` (OpenTelemetry SDK), which its ``atexit`` hook
    would call, for a process that leaves without running ``atexit``
    (``oma``'s commands leave with ``os._exit``). Waits for the exporter at
    most ``OTEL_EXPORTER_OTLP_TIMEOUT`` (10 s) when the collector does not
    answer. Does nothing when this process never loaded OpenTelemetry, or its
    provider is not the SDK's (the API's default no-op one)."""
    if "opentelemetry.trace" not in sys.modules:
        return  # tracing is off: nothing to export, and nothing to import
    from opentelemetry import trace

    stop = getattr(trace.get_tracer_provider(), "shutdown", None)
    if callable(stop):
        stop()


def tracing_plugin(*, from_env: bool) -> SimplePlugin:
    """The SDK's OpenTelemetry interceptor (with its Temporal spans) and OMA's
    span attributes, as a plugin ``OmaPlugin`` applies to a client, a worker
    and a replayer; ``from_env`` first installs the OTLP provider
    (``install_from_env``). A worker or replayer it configures raises
    ``TracingUnavailableError`` when the global tracer provider is not
    replay-safe (``tracer_provider``)."""
    try:
        from temporalio.contrib.opentelemetry import (
            OpenTelemetryInterceptor,
            ReplaySafeTracerProvider,
        )
    except ImportError as err:
        raise TracingUnavailableError(
            f"tracing needs the OpenTelemetry SDK ({err.name} is missing): {_EXTRA_HINT}"
        ) from None
    import dataclasses

    from opentelemetry import trace
    from temporalio.plugin import SimplePlugin
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

    from oma.runtime.span_attributes import OmaSpanAttributes

    if from_env:
        install_from_env()

    def runner(given: WorkflowRunner | None) -> WorkflowRunner:
        if not isinstance(trace.get_tracer_provider(), ReplaySafeTracerProvider):
            raise TracingUnavailableError(
                "tracing is on but the global tracer provider is not replay-safe: set "
                "oma.runtime.tracing.tracer_provider(...) with "
                "opentelemetry.trace.set_tracer_provider before building the worker"
            )
        if given is None:
            given = SandboxedWorkflowRunner()
        if isinstance(given, SandboxedWorkflowRunner):
            # the workflow's spans and the interceptor's must share one context
            restrictions = given.restrictions.with_passthrough_modules("opentelemetry")
            return dataclasses.replace(given, restrictions=restrictions)
        return given

    return SimplePlugin(
        "oma-tracing",
        interceptors=[OpenTelemetryInterceptor(add_temporal_spans=True), OmaSpanAttributes()],
        workflow_runner=runner,
    )
