"""The product's data converter: pydantic JSON payloads, lenient for untyped
arguments, with the AES-GCM payload codec when ``OMA_CODEC_KEYS`` is set and
payloads over the threshold kept in the payload store (``OMA_PAYLOAD_STORE``,
``oma.runtime.payload_store``).

Every process that talks to Temporal uses it, through ``OmaClientPlugin``
(a client) or ``OmaPlugin`` (a worker, a replayer, which decode through
``worker_data_converter``). It is a module of its own so that a client imports
no part of the Temporal worker (``temporalio.worker``, which
``temporalio.plugin`` pulls in).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, TypeGuard

from pydantic import ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadConverter,
    StorageDriver,
    StorageDriverSelectContext,
)
from temporalio.exceptions import ApplicationError, FailureError

from oma.core.schema.errors import (
    ERRORS,
    CiphertextInvalidError,
    CodecKeyMissingError,
    PayloadStoreMissingError,
    StoredPayloadInvalidError,
    StoredPayloadMissingError,
)
from oma.core.schema.validation import UndecodableInput
from oma.runtime.codec import (
    AesGcmCodec,
    CodecKey,
    WorkerCodec,
    malformed_reason,
    missing_key_reason,
    undecryptable_reason,
)
from oma.runtime.collection import collection_held
from oma.runtime.payload_store import PayloadStore, external_storage


class OmaPayloadConverter(PydanticPayloadConverter):
    """The pydantic payload converter, except that a payload decoded without a
    type hint that cannot be decoded becomes an ``UndecodableInput``.

    OMA's workflows and handlers take their arguments untyped (``*args``)
    and validate them themselves, so any bytes a client sends end in a clear
    ``INVALID_RUN_INPUT`` (or an ``approval_refused`` event) rather than a
    workflow task that fails and is retried forever ("Failed decoding
    arguments"). Typed decodes (results, queries) raise as before.

    An encrypted payload left unread becomes, carried by the
    ``UndecodableInput`` of an untyped argument or raised for a typed decode,
    ``CodecKeyMissingError`` when this process lacks its key (a client: a
    worker's codec, ``WorkerCodec``, fails the workflow task before any
    workflow code sees it) and ``CiphertextInvalidError`` when no key can read
    it (``oma.runtime.codec.malformed_reason``). A plaintext payload is read as
    it is, with or without encryption on.
    """

    def from_payloads(
        self, payloads: Sequence[Payload], type_hints: list[type] | None = None
    ) -> list[Any]:
        # a 100,000-task input is two million objects, the collector walking
        # them all again and again as they are made: most of the decode's CPU
        with collection_held():
            return self._from_payloads(payloads, type_hints)

    def _from_payloads(
        self, payloads: Sequence[Payload], type_hints: list[type] | None
    ) -> list[Any]:
        if type_hints is not None:
            for payload in payloads:
                if (error := _unreadable(payload)) is not None:
                    raise error
            return super().from_payloads(payloads, type_hints)
        return [self._decoded(payload) for payload in payloads]

    def _decoded(self, payload: Payload) -> Any:
        if (error := _unreadable(payload)) is not None:
            return UndecodableInput(error.message, error)
        try:
            return super().from_payloads([payload])[0]
        except ValidationError as err:  # pydantic's JSON parser: "Invalid JSON: ..."
            return UndecodableInput("; ".join(e["msg"] for e in err.errors()))
        except Exception as err:  # any bytes at all: say what is wrong, do not fail
            return UndecodableInput(str(err) or type(err).__name__)


def _unreadable(payload: Payload) -> CodecKeyMissingError | CiphertextInvalidError | None:
    if (reason := missing_key_reason(payload)) is not None:
        return CodecKeyMissingError(_missing_key(reason))
    if (reason := malformed_reason(payload)) is not None:
        return CiphertextInvalidError(reason)
    return None


KEY_ERROR_CODES = frozenset({CodecKeyMissingError.code, CiphertextInvalidError.code})
"""The codes of the errors about a payload a process cannot decrypt: their
messages hold key ids and advice only, and stay readable without the key."""

STORE_ERRORS = (PayloadStoreMissingError, StoredPayloadMissingError, StoredPayloadInvalidError)
"""The errors about a stored payload a process cannot read: a worker fails
the workflow task with them (the SDK reads references before any workflow
code runs), and their messages name the store, the file or the bucket and
key (what the history's reference holds in plaintext already) and advice,
so they stay readable without the key too."""

CONVERTER_ERRORS = (CodecKeyMissingError, CiphertextInvalidError, *STORE_ERRORS)
"""The errors the data converter itself raises, in whatever process code
decodes a payload (an activity reading a run's query answer or result):
this failure converter gives them their failure (``to_failure``), retryable,
so that a worker that holds the key or reaches the store takes the next
attempt; ``oma.worker.activity_errors`` leaves them to it."""

_PLAIN_MESSAGE_CODES = KEY_ERROR_CODES | {e.code for e in STORE_ERRORS}


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
    (the OMA error code) is never encrypted, so a caller still learns it.

    A ``CodecKeyMissingError`` a worker's codec raised (``WorkerCodec``)
    becomes a failure of type ``CODEC_KEY_MISSING`` whose message is the
    error's ``CODEC_KEY_MISSING: ...`` line: the failed workflow task's
    failure, as ``temporal workflow describe`` and the Web UI show it.

    An ``ApplicationError`` typed with an OMA error code (``ERRORS``: a
    ``TeamRun`` that did not succeed, an invalid input, a provider's error)
    is an outcome OMA reports, not a crash of its code: its failure carries
    the message, the type and the details, and its causes', and no Python
    stack trace (which Temporal records from the frames that raised it, and
    the Web UI and ``temporal workflow result`` show before the details).
    Any other exception keeps its stack."""

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

    def to_failure(
        self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure
    ) -> None:
        if _reported(exception):
            exception = _without_stack(exception)
        super().to_failure(exception, payload_converter, failure)
        if isinstance(exception, (CodecKeyMissingError, *STORE_ERRORS)):
            failure.application_failure_info.type = exception.code
        message = _key_error_message(exception)
        if message is not None and failure.HasField("encoded_attributes"):
            # key ids and advice only, for the very process that lacks the key
            failure.ClearField("encoded_attributes")
            failure.message = message


def _reported(exception: BaseException) -> TypeGuard[ApplicationError]:
    """Whether ``exception`` is an OMA error raised as the failure it reports
    (not one read back from a failure, which keeps what it carries)."""
    return (
        isinstance(exception, ApplicationError)
        and exception.failure is None
        and exception.type in ERRORS
    )


BARE_CAUSES = 20
"""How deep ``_without_stack`` follows a chain of causes (the rest is left out)."""


def _without_stack(err: ApplicationError) -> ApplicationError:
    """``err`` as a failure with no stack trace, nor any in its causes: the
    same messages, types, details and retry settings, never raised (Temporal's
    failure converter records a stack from an exception's ``__traceback__``
    only; a provider SDK's chain of causes with theirs grows past the size the
    server keeps of a pending activity's last failure, 4 KB, which then keeps
    none of their messages encrypted). The causes keep their messages and
    types, which say what went wrong; the error's own message is written for
    a user."""
    bare = _bare(err, BARE_CAUSES)
    assert isinstance(bare, ApplicationError)
    return bare


def _bare(exc: BaseException | None, depth: int) -> BaseException | None:
    if exc is None or depth <= 0:
        return None
    if isinstance(exc, FailureError) and (
        exc.failure is not None or not isinstance(exc, ApplicationError)
    ):
        return exc  # read back from a failure, or Temporal's own: as it is
    if isinstance(exc, ApplicationError):
        bare = ApplicationError(
            exc.message,
            *exc.details,
            type=exc.type,
            non_retryable=exc.non_retryable,
            next_retry_delay=exc.next_retry_delay,
            category=exc.category,
        )
    else:  # as Temporal's converter makes one of any exception, its stack aside
        bare = ApplicationError(str(exc), type=type(exc).__name__)
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    bare.__cause__ = _bare(cause, depth - 1)
    bare.__suppress_context__ = True
    return bare


def _key_error_message(exception: BaseException) -> str | None:
    """The message of a failure about a payload that cannot be decrypted."""
    if isinstance(exception, (CodecKeyMissingError, *STORE_ERRORS)):
        return str(exception)
    if isinstance(exception, ApplicationError) and exception.type in _PLAIN_MESSAGE_CODES:
        return exception.message
    return None


class OmaEncryptingFailureConverter(
    OmaFailureConverter, DefaultFailureConverterWithEncodedAttributes
):
    """``OmaFailureConverter`` that also moves failure messages and stack
    traces into an encoded payload, so the codec encrypts them; except the
    messages of ``CODEC_KEY_MISSING`` and ``CIPHERTEXT_INVALID``, which hold
    key ids and advice only and must be readable by the very process that
    lacks the key (the client that started the run, the operator reading a
    failed workflow task), and those of the stored payload errors
    (``STORE_ERRORS``)."""


DATA_CONVERTER = DataConverter(
    payload_converter_class=OmaPayloadConverter,
    failure_converter_class=OmaFailureConverter,
    external_storage=external_storage(None),
)
"""The product's data converter without encryption and without a payload
store: pydantic JSON, lenient for untyped arguments; a stored payload met
raises ``PayloadStoreMissingError``."""


def data_converter(
    keys: Sequence[CodecKey] | None, store: PayloadStore | None = None
) -> DataConverter:
    """``DATA_CONVERTER`` when ``keys`` and ``store`` are ``None``; otherwise
    the same with the AES-GCM payload codec of ``keys`` (``oma.runtime.codec``)
    and the failure converter that moves failure messages and stack traces
    into an encoded payload
    (``temporalio.converter.DefaultFailureConverterWithEncodedAttributes``),
    and payloads of ``store.threshold_bytes`` or more kept in ``store``
    (``oma.runtime.payload_store.external_storage``; the SDK encodes first,
    so what is stored is encrypted)."""
    converter = DATA_CONVERTER
    if store is not None:
        converter = dataclasses.replace(converter, external_storage=external_storage(store))
    if keys is None:
        return converter
    return dataclasses.replace(
        converter,
        payload_codec=AesGcmCodec(keys),
        failure_converter_class=OmaEncryptingFailureConverter,
    )


def replaying_data_converter(converter: DataConverter) -> DataConverter:
    """``converter`` for a replayer: it reads stored payloads from the store as
    a worker does, and stores none (a replay sends nothing anywhere)."""
    storage = converter.external_storage
    if storage is None:
        return converter
    return dataclasses.replace(
        converter, external_storage=dataclasses.replace(storage, driver_selector=_store_none)
    )


def _store_none(context: StorageDriverSelectContext, payload: Payload) -> StorageDriver | None:
    return None


def worker_data_converter(converter: DataConverter) -> DataConverter:
    """``converter`` as a worker (or a replayer) decodes with it: its codec
    wrapped in ``oma.runtime.codec.WorkerCodec``, which fails the workflow task,
    never the run, on a payload this process holds no key for. A client keeps
    ``converter`` itself, whose codec never raises, to show what it can."""
    if isinstance(converter.payload_codec, WorkerCodec):
        return converter
    return dataclasses.replace(converter, payload_codec=WorkerCodec(converter.payload_codec))
