"""The product's data converter: pydantic JSON payloads, lenient for untyped
arguments, with the AES-GCM payload codec when ``OMA_CODEC_KEYS`` is set.

Every process that talks to Temporal uses it, through ``OmaClientPlugin``
(a client) or ``OmaPlugin`` (a worker, a replayer). It is a module of its own
so that a client imports no part of the Temporal worker
(``temporalio.worker``, which ``temporalio.plugin`` pulls in).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

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

from oma.core.schema.errors import CodecKeyMissingError, PayloadNotEncryptedError
from oma.core.schema.validation import UndecodableInput
from oma.runtime.codec import (
    PLAINTEXT_METADATA,
    AesGcmCodec,
    CodecKey,
    undecryptable_reason,
)


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


KEY_ERROR_CODES = frozenset({CodecKeyMissingError.code, PayloadNotEncryptedError.code})
"""The codes of the errors a process that lacks a run's key raises."""


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
        if isinstance(exception, ApplicationError) and exception.type in KEY_ERROR_CODES:
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
