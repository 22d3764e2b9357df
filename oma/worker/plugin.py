"""``OmaPlugin``: the product on Temporal, as one SDK plugin.

Every process that talks to Temporal uses it or, a client that runs no
worker (``oma`` CLI, the Python client), its client half ``OmaClientPlugin``
(``oma.runtime.client_plugin``, which imports no part of ``temporalio.worker``).
Either gives the data converter every OMA payload uses (pydantic JSON,
``DATA_CONVERTER``; with ``OMA_CODEC_KEYS`` set, also the AES-GCM payload
codec of ``oma.runtime.codec`` and failure attributes encoded, see
``data_converter``: ``oma.runtime.converter``); a ``Replayer`` gets the converter and
the workflows; a worker built with ``OmaPlugin(activities)`` gets the
workflows and the activities it serves, the interceptor that turns an
``OMAError`` an activity raises into the failure of its code
(``oma.worker.activity_errors``), the one that redacts the
worker's credential environment values from everything an activity returns,
heartbeats or raises (``oma.worker._redaction``), and the heartbeat throttle that lets
a cancel, and an activity's progress, reach the server within half a second.
With tracing on (``OTEL_EXPORTER_OTLP_ENDPOINT``), each also gets
OpenTelemetry spans (``oma.runtime.tracing``).
(``temporalio.plugin.SimplePlugin``, the SDK's plugin interface:
https://docs.temporal.io/develop/python/temporal-client#plugins.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from temporalio.plugin import SimplePlugin

from oma.core.schema.limits import MAX_CONCURRENCY
from oma.runtime.client_plugin import OmaClientPlugin
from oma.runtime.codec import CodecKey
from oma.runtime.converter import (
    DATA_CONVERTER,
    ENCRYPTED_FAILURE,
    codec_key_error,
    data_converter,
    replaying_data_converter,
    worker_data_converter,
)
from oma.runtime.payload_store import PayloadStore
from oma.worker import workflow_code

__all__ = [
    "DATA_CONVERTER",
    "ENCRYPTED_FAILURE",
    "HEARTBEAT_THROTTLE",
    "OmaPlugin",
    "codec_key_error",
    "data_converter",
    "replayer",
    "workflows",
]

if TYPE_CHECKING:
    from temporalio.client import Client, ClientConfig
    from temporalio.worker import Replayer, ReplayerConfig, WorkerConfig, WorkflowRunner


class Activities(Protocol):
    """The activities a worker serves (``oma.worker.Activities``): every one,
    for the shared task queue, and those of ``session_task_queue``, this
    worker's own."""

    session_task_queue: str

    def all(self) -> list[Any]: ...

    def session_activities(self) -> list[Any]: ...


def workflows() -> Sequence[type]:
    """Every OMA workflow. Imported when a worker or a replayer asks for them,
    not when a client is built: a client (``oma run``) never loads the
    workflow code."""
    from oma.workflows.agent_run import AgentRun
    from oma.workflows.team_run import TeamRun

    return (TeamRun, AgentRun)


def _with_workflows(given: Sequence[type] | None) -> Sequence[type]:
    return [*(given or ()), *workflows()]


CACHED_WORKFLOWS = 2 * MAX_CONCURRENCY
"""The fewest runs a worker keeps in its cache (the SDK's ``max_cached_workflows``,
1,000 by default; a larger value given is kept). A run may have
``MAX_CONCURRENCY`` tasks in flight, each an ``AgentRun`` the worker caches
while it runs: with a cache of that size, a fan-out of 1,000 tasks started at
once pushed out their ``TeamRun``, the least recently used, whose next
workflow task then replayed its whole history (some 8 s at 9,000 events on a
2-core machine) and passed the 10 s workflow task timeout again and again
(``bench/dag_overhead.py --sizes 10000x1``: 9 workflow tasks failed or timed
out). Twice that leaves a run at full concurrency, and another, in the cache."""

HEARTBEAT_THROTTLE = timedelta(milliseconds=200)
"""Heartbeats reach the server at most this often, and at least this often when
an activity heartbeats faster (the SDK's default throttle is 30 s without a
heartbeat timeout). Short, so that progress an activity heartbeats (a
process's last line, an agent's or a model's latest text:
``oma.activities._heartbeat``) reaches the server, and ``oma run``'s live view,
within 0.5 s; activities heartbeat faster than their idle interval (0.5 s)
only while that progress changes, so an idle activity still sends two a
second, and a cancel reaches it within about half a second."""


class OmaPlugin(SimplePlugin, OmaClientPlugin):
    """The data converter and the workflows; on a worker, also its activities.
    (A client that runs no worker needs only ``OmaClientPlugin``, which
    ``Connection.connect`` gives it.)

    Without ``activities`` (a client, a replayer) it leaves the workers of
    its client alone: a worker says what it serves with its own
    ``OmaPlugin(activities)``. With them, a worker on
    ``activities.session_task_queue`` (this process's own queue, where the
    later turns of its ACP sessions are routed) serves the session activities
    only; a worker on any other queue serves every workflow and activity.

    ``codec_keys`` are the encryption keys (``oma.runtime.codec``); by default those
    of ``OMA_CODEC_KEYS`` / ``OMA_CODEC_KEYS_FILE``, none when neither is set.
    ``payload_store`` is where payloads over the threshold go
    (``oma.runtime.payload_store``); by default ``OMA_PAYLOAD_STORE``'s, none
    when it is unset; a replayer reads from it and stores nothing.
    ``tracing`` adds OpenTelemetry spans (``oma.runtime.tracing``): by default when
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (exporting there); with ``True``,
    through the global tracer provider the caller set. Raises
    ``CodecKeysInvalidError`` for a malformed key list, ``PayloadStoreInvalidError``
    for a malformed store, ``TracingUnavailableError``
    when tracing is on without the ``[otel]`` extra.

    A worker and a replayer decode with ``worker_data_converter``: a payload
    this process holds no key for fails the workflow task, never the run
    (``oma.runtime.codec.WorkerCodec``). A worker gets it through a client of
    its own, the client it is given with only that codec changed.

    The workflow sandbox passes the ``oma`` package through (``sandboxed``);
    ``strict_sandbox`` runs OMA's workflow code under the SDK's restrictions
    instead, as the test suite replays every run it made.
    """

    def __init__(
        self,
        activities: Activities | None = None,
        *,
        codec_keys: Sequence[CodecKey] | Literal["env"] | None = "env",
        payload_store: PayloadStore | Literal["env"] | None = "env",
        tracing: bool | Literal["env"] = "env",
        strict_sandbox: bool = False,
    ) -> None:
        OmaClientPlugin.__init__(
            self, codec_keys=codec_keys, payload_store=payload_store, tracing=tracing
        )
        SimplePlugin.__init__(
            self,
            "oma",
            data_converter=data_converter(self.codec_keys, self.payload_store),
            workflows=_with_workflows,
        )
        self.oma_activities = activities
        self.strict_sandbox = strict_sandbox

    def configure_client(self, config: ClientConfig) -> ClientConfig:
        config = super().configure_client(config)
        return self._tracing.configure_client(config) if self._tracing else config

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        config = super().configure_replayer(config)
        converter = replaying_data_converter(config["data_converter"])
        config["data_converter"] = worker_data_converter(converter)
        config["workflow_runner"] = sandboxed(config.get("workflow_runner"), self.strict_sandbox)
        return self._tracing.configure_replayer(config) if self._tracing else config

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        if self.oma_activities is None:
            return config
        config["client"] = _decoding_as_a_worker(config["client"])
        config["max_cached_workflows"] = max(
            config.get("max_cached_workflows", 0), CACHED_WORKFLOWS
        )
        config["max_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        config["default_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        if config.get("task_queue") == self.oma_activities.session_task_queue:
            served = self.oma_activities.session_activities()
        else:
            config = super().configure_worker(config)
            served = self.oma_activities.all()
        config["activities"] = [*config.get("activities", ()), *served]
        from oma.worker._redaction import CredentialRedaction
        from oma.worker.activity_errors import ActivityErrors

        config["interceptors"] = [*config.get("interceptors", ()), CredentialRedaction()]
        if self.payload_store is not None:  # the workflows' budget: oma.worker.store_known
            from oma.worker.store_known import StoreKnown

            config["interceptors"] = [*config["interceptors"], StoreKnown()]
        config = self._tracing.configure_worker(config) if self._tracing else config
        # innermost: what the interceptors above see is the failure recorded
        config["interceptors"] = [*config.get("interceptors", ()), ActivityErrors()]
        if config.get("task_queue") != self.oma_activities.session_task_queue:
            runner = sandboxed(config.get("workflow_runner"), self.strict_sandbox)
            config["workflow_runner"] = runner
        return config


def sandboxed(runner: WorkflowRunner | None, strict: bool) -> WorkflowRunner:
    """The sandbox OMA's workflows run in: ``runner`` (by default the SDK's
    ``SandboxedWorkflowRunner``) passing the ``oma`` package through.

    The sandbox imports a workflow's module anew for every run it creates,
    and every module it imports that is not passed through: for OMA, the
    workflows' modules, their classes and ``@workflow.defn`` cost 2 to 3 ms of
    CPU per ``AgentRun``, a fifth of what a worker spends on one
    (``bench/dag_overhead.py``).
    Passed through, a run uses the modules the worker loaded once: OMA's
    workflow code keeps no state in a module (a run's state is its workflow
    instance's), and loaded once it is also the code the worker started with,
    whatever changes on disk under it (temporalio/sdk-python#607). What it
    gives up is the sandbox's check of OMA's own code for calls a workflow
    must not make (``datetime.now``, I/O): ``strict`` keeps that check (each
    run re-imports OMA's modules, compiled once: ``oma.worker.workflow_code``),
    as the test suite's replay of every run it made does. A runner that is no
    sandbox (``UnsandboxedWorkflowRunner``) is returned as it is."""
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

    runner = runner or SandboxedWorkflowRunner()
    if not isinstance(runner, SandboxedWorkflowRunner):
        return runner
    if strict:
        workflow_code.pin()
        return runner
    passed = runner.restrictions.with_passthrough_modules(workflow_code.PACKAGE)
    return dataclasses.replace(runner, restrictions=passed)


def _decoding_as_a_worker(client: Client) -> Client:
    """``client`` with its data converter as a worker decodes
    (``worker_data_converter``): the same connection, namespace and
    interceptors. The SDK takes a worker's data converter from its client
    (``Worker`` reads ``config["client"]``), and the caller's client keeps its
    own, whose codec never raises, for what it reads itself."""
    import temporalio.client

    config = client.config(active_config=True)
    converter = worker_data_converter(config["data_converter"])
    if converter is config["data_converter"]:
        return client
    # its plugins configured it already: built again without them, so that
    # none puts its own converter back
    return temporalio.client.Client(
        config["service_client"],
        namespace=config["namespace"],
        data_converter=converter,
        interceptors=config["interceptors"],
        default_workflow_query_reject_condition=config["default_workflow_query_reject_condition"],
        header_codec_behavior=config["header_codec_behavior"],
    )


def replayer(
    codec_keys: Sequence[CodecKey] | Literal["env"] | None = "env",
    *,
    payload_store: PayloadStore | Literal["env"] | None = "env",
    strict_sandbox: bool = False,
) -> Replayer:
    """A ``Replayer`` of every OMA workflow, with the product's data converter
    (decrypting with ``codec_keys``, by default those of ``OMA_CODEC_KEYS``;
    reading stored payloads from ``payload_store``, by default
    ``OMA_PAYLOAD_STORE``'s), in the sandbox a worker runs them in
    (``strict_sandbox``: ``sandboxed``)."""
    from temporalio.worker import Replayer

    plugin = OmaPlugin(
        codec_keys=codec_keys, payload_store=payload_store, strict_sandbox=strict_sandbox
    )
    return Replayer(workflows=[], plugins=[plugin])
