"""``OmaPlugin``: the product on Temporal, as one SDK plugin.

Every process that talks to Temporal uses it: a client (``oma`` CLI, the
Python client, the tests) gets the data converter every OMA payload uses
(pydantic JSON, ``DATA_CONVERTER``; with ``OMA_CODEC_KEYS`` set, also the
AES-GCM payload codec of ``oma.runtime.codec`` and failure attributes encoded, see
``data_converter``); a ``Replayer`` gets the converter and
the workflows; a worker built with ``OmaPlugin(activities)`` gets the
workflows and the activities it serves, the interceptor that redacts the
worker's credential environment values from everything an activity returns,
heartbeats or raises (``oma.activities._redaction``), and the heartbeat throttle that lets
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

from pydantic import ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadConverter,
)
from temporalio.exceptions import ApplicationError
from temporalio.plugin import SimplePlugin

from oma.core.schema.errors import CodecKeyMissingError, PayloadNotEncryptedError
from oma.core.schema.validation import UndecodableInput
from oma.runtime.codec import (
    PLAINTEXT_METADATA,
    AesGcmCodec,
    CodecKey,
    keys_from_env,
    undecryptable_reason,
)
from oma.runtime.tracing import enabled_by_env, tracing_plugin

if TYPE_CHECKING:
    from temporalio.client import ClientConfig
    from temporalio.worker import Replayer, ReplayerConfig, WorkerConfig


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


HEARTBEAT_THROTTLE = timedelta(milliseconds=200)
"""Heartbeats reach the server at most this often, and at least this often when
an activity heartbeats faster (the SDK's default throttle is 30 s without a
heartbeat timeout). Short, so that progress an activity heartbeats (a
process's last line, an agent's or a model's latest text:
``oma.activities._heartbeat``) reaches the server, and ``oma run``'s live view,
within 0.5 s; activities heartbeat faster than their idle interval (0.5 s)
only while that progress changes, so an idle activity still sends two a
second, and a cancel reaches it within about half a second."""


class OmaPayloadConverter(PydanticPayloadConverter):
    """The pydantic payload converter, except that a payload decoded without a
    type hint that cannot be decoded becomes an ``UndecodableInput``.

    OMA's workflows and handlers take their arguments untyped (``*args``)
    and validate them themselves, so any bytes a client sends end in a clear
    ``INVALID_RUN_INPUT`` (or an ``approval_refused`` event) rather than a
    workflow task that fails and is retried forever ("Failed decoding
    arguments"). Typed decodes (results, queries) raise as before.

    Payloads the codec (``oma.runtime.codec.AesGcmCodec``) could not decrypt, or that
    reached a process without ``OMA_CODEC_KEYS`` still encrypted, become
    ``CodecKeyMissingError``: carried by the ``UndecodableInput`` of an untyped
    argument, raised for a typed decode. A plaintext payload the codec marked
    becomes a ``PayloadNotEncryptedError`` input when untyped: a worker with
    encryption on runs nothing a client without the key sent.
    """

    def from_payloads(
        self, payloads: Sequence[Payload], type_hints: list[type] | None = None
    ) -> list[Any]:
        if type_hints is not None:
            for payload in payloads:
                if (reason := undecryptable_reason(payload)) is not None:
                    raise CodecKeyMissingError(_missing_key(reason))
            return super().from_payloads(payloads, type_hints)
        return [self._decoded(payload) for payload in payloads]

    def _decoded(self, payload: Payload) -> Any:
        if (reason := undecryptable_reason(payload)) is not None:
            return UndecodableInput(reason, CodecKeyMissingError(_missing_key(reason)))
        if PLAINTEXT_METADATA in payload.metadata:
            return UndecodableInput(
                "not encrypted",
                PayloadNotEncryptedError(
                    "this worker encrypts every payload (OMA_CODEC_KEYS) and refuses a "
                    "plaintext input: give the client that sent it the same OMA_CODEC_KEYS "
                    "(the temporal CLI: --codec-endpoint pointed at `oma codec-server`)"
                ),
            )
        try:
            return super().from_payloads([payload])[0]
        except ValidationError as err:  # pydantic's JSON parser: "Invalid JSON: ..."
            return UndecodableInput("; ".join(e["msg"] for e in err.errors()))
        except Exception as err:  # any bytes at all: say what is wrong, do not fail
            return UndecodableInput(str(err) or type(err).__name__)


_KEY_ERROR_CODES = frozenset({CodecKeyMissingError.code, PayloadNotEncryptedError.code})


def _missing_key(reason: str) -> str:
    return f"{reason}; set OMA_CODEC_KEYS (or OMA_CODEC_KEYS_FILE) to a list holding that key"


ENCRYPTED_FAILURE = "the failure's message is encrypted: "
"""How the message of a failure this process cannot decrypt begins."""


def codec_key_error(failure: BaseException | None) -> CodecKeyMissingError | None:
    """``CodecKeyMissingError`` when ``failure`` (e.g. a ``WorkflowFailureError``'s
    cause) is one this process could not decrypt, saying which key is missing."""
    message = getattr(failure, "message", None)
    if isinstance(message, str) and message.startswith(ENCRYPTED_FAILURE):
        return CodecKeyMissingError(message.removeprefix(ENCRYPTED_FAILURE))
    return None


class OmaFailureConverter(DefaultFailureConverter):
    """Temporal's failure converter, except that a failure whose message and
    stack trace are encrypted (``encoded_attributes``) and cannot be decrypted
    here reads "the failure's message is encrypted: <why>; set OMA_CODEC_KEYS
    ..." instead of the bare "Encoded failure" Temporal shows. Its ``type``
    (the OMA error code) is never encrypted, so a caller still learns it."""

    def from_failure(self, failure: Failure, payload_converter: PayloadConverter) -> BaseException:
        if failure.HasField("encoded_attributes"):
            reason = undecryptable_reason(failure.encoded_attributes)
            if reason is not None:
                explained = Failure()
                explained.CopyFrom(failure)
                explained.ClearField("encoded_attributes")
                explained.message = f"{ENCRYPTED_FAILURE}{_missing_key(reason)}"
                failure = explained
        return super().from_failure(failure, payload_converter)


class OmaEncryptingFailureConverter(
    OmaFailureConverter, DefaultFailureConverterWithEncodedAttributes
):
    """``OmaFailureConverter`` that also moves failure messages and stack
    traces into an encoded payload, so the codec encrypts them; except the
    messages of ``CODEC_KEY_MISSING`` and ``PAYLOAD_NOT_ENCRYPTED``, which hold
    key ids and advice only and must be readable by the very process that
    lacks the key (the client that started the run)."""

    def to_failure(
        self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure
    ) -> None:
        super().to_failure(exception, payload_converter, failure)
        if isinstance(exception, ApplicationError) and exception.type in _KEY_ERROR_CODES:
            failure.ClearField("encoded_attributes")
            failure.message = exception.message


DATA_CONVERTER = DataConverter(
    payload_converter_class=OmaPayloadConverter, failure_converter_class=OmaFailureConverter
)
"""The product's data converter without encryption: pydantic JSON, lenient
for untyped arguments."""


def data_converter(keys: Sequence[CodecKey] | None) -> DataConverter:
    """``DATA_CONVERTER`` when ``keys`` is ``None``; otherwise the same with the
    AES-GCM payload codec of ``keys`` (``oma.runtime.codec``) and the failure converter
    that moves failure messages and stack traces into an encoded payload
    (``temporalio.converter.DefaultFailureConverterWithEncodedAttributes``)."""
    if keys is None:
        return DATA_CONVERTER
    return dataclasses.replace(
        DATA_CONVERTER,
        payload_codec=AesGcmCodec(keys),
        failure_converter_class=OmaEncryptingFailureConverter,
    )


class OmaPlugin(SimplePlugin):
    """The data converter and the workflows; on a worker, also its activities.

    Without ``activities`` (a client, a replayer) it leaves the workers of
    its client alone: a worker says what it serves with its own
    ``OmaPlugin(activities)``. With them, a worker on
    ``activities.session_task_queue`` (this process's own queue, where the
    later turns of its ACP sessions are routed) serves the session activities
    only; a worker on any other queue serves every workflow and activity.

    ``codec_keys`` are the encryption keys (``oma.runtime.codec``); by default those
    of ``OMA_CODEC_KEYS`` / ``OMA_CODEC_KEYS_FILE``, none when neither is set.
    ``tracing`` adds OpenTelemetry spans (``oma.runtime.tracing``): by default when
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (exporting there); with ``True``,
    through the global tracer provider the caller set. Raises
    ``CodecKeysInvalidError`` for a malformed key list, ``TracingUnavailableError``
    when tracing is on without the ``[otel]`` extra.
    """

    def __init__(
        self,
        activities: Activities | None = None,
        *,
        codec_keys: Sequence[CodecKey] | Literal["env"] | None = "env",
        tracing: bool | Literal["env"] = "env",
    ) -> None:
        keys = keys_from_env() if codec_keys == "env" else codec_keys
        super().__init__("oma", data_converter=data_converter(keys), workflows=_with_workflows)
        self.oma_activities = activities
        self.codec_keys = keys
        self.tracing = enabled_by_env() if tracing == "env" else tracing
        self._tracing = tracing_plugin(from_env=tracing == "env") if self.tracing else None

    def configure_client(self, config: ClientConfig) -> ClientConfig:
        config = super().configure_client(config)
        return self._tracing.configure_client(config) if self._tracing else config

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        config = super().configure_replayer(config)
        return self._tracing.configure_replayer(config) if self._tracing else config

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        if self.oma_activities is None:
            return config
        config["max_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        config["default_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        if config.get("task_queue") == self.oma_activities.session_task_queue:
            served = self.oma_activities.session_activities()
        else:
            config = super().configure_worker(config)
            served = self.oma_activities.all()
        config["activities"] = [*config.get("activities", ()), *served]
        from oma.activities._redaction import CredentialRedaction

        config["interceptors"] = [*config.get("interceptors", ()), CredentialRedaction()]
        config = self._tracing.configure_worker(config) if self._tracing else config
        if config.get("task_queue") != self.oma_activities.session_task_queue:
            config = _failing_runs_it_lacks_the_key_of(config)
        return config


def _failing_runs_it_lacks_the_key_of(config: WorkerConfig) -> WorkerConfig:
    """A worker that lacks the key of a run already in progress ends it with
    ``CODEC_KEY_MISSING`` (``oma.runtime.key_failure``) instead of retrying, forever,
    a workflow task its replay cannot complete."""
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

    from oma.runtime.key_failure import KeyFailureRunner

    runner = config.get("workflow_runner") or SandboxedWorkflowRunner()
    config["workflow_runner"] = KeyFailureRunner(runner, _KEY_ERROR_CODES, config["client"])
    return config


def replayer(codec_keys: Sequence[CodecKey] | Literal["env"] | None = "env") -> Replayer:
    """A ``Replayer`` of every OMA workflow, with the product's data converter
    (decrypting with ``codec_keys``, by default those of ``OMA_CODEC_KEYS``)."""
    from temporalio.worker import Replayer

    return Replayer(workflows=[], plugins=[OmaPlugin(codec_keys=codec_keys)])
