"""Encryption at rest: an AES-256-GCM payload codec keyed by ``OMA_CODEC_KEYS``.

Temporal stores every payload (workflow, activity, signal, update and query
inputs and results, memos, failure details) on its server. With
``OMA_CODEC_KEYS`` set, every process that talks to Temporal through
``OmaPlugin`` (worker, ``oma`` CLI, Python client, ``oma replay``, the codec
server) encrypts each payload before it leaves and decrypts it when it comes
back (``temporalio.converter.PayloadCodec``:
https://docs.temporal.io/payload-codec). Failure messages and stack traces go
into an encoded payload too (``DefaultFailureConverterWithEncodedAttributes``),
so a stderr tail in an error is not plaintext either.

Wire shape of an encrypted payload: metadata ``encoding`` =
``binary/encrypted`` and ``encryption-key-id`` = the key id; data = a 12-byte
random nonce followed by the AES-GCM ciphertext (with its 16-byte tag) of the
original ``Payload`` protobuf. The key id lets a process holding several keys
pick the right one, which is what makes rotation work.

Keys: ``OMA_CODEC_KEYS`` = ``key_id:base64_key[,key_id:base64_key...]``
(32-byte keys, standard or URL-safe base64), or ``OMA_CODEC_KEYS_FILE`` naming
a file holding the same (commas or newlines between entries). The first key
encrypts; all of them decrypt. ``oma codec-key`` prints a new entry.

A payload that arrives unencrypted is read as it is: a run recorded before
encryption was turned on goes on under a worker that encrypts. A payload this
process holds no key for is one another process may read, so a worker never
ends a run for it: its codec (``WorkerCodec``) fails the workflow task with
``CODEC_KEY_MISSING`` naming the key id, and the run waits for a worker that
holds the key. Only a ciphertext no key can read (too short to hold a nonce and
a tag, no key id, or decrypting to something that is not a payload: a client
sent it) reaches the workflow, which refuses it (``CIPHERTEXT_INVALID``).
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from oma.core.contracts.encoding import ENCRYPTED_ENCODING
from oma.core.schema.errors import CodecKeyMissingError, CodecKeysInvalidError

KEY_ID_METADATA = "encryption-key-id"
"""Metadata naming the key a payload is encrypted with."""

DECODE_ERROR_METADATA = "oma-decode-error"
"""Set by ``AesGcmCodec.decode`` on an encrypted payload no key can read (the
reason, UTF-8): the payload converter turns it into ``CiphertextInvalidError``,
which fails a run started with it and refuses a signal or update carrying it."""

MISSING_KEY_METADATA = "oma-missing-key"
"""Set by ``AesGcmCodec.decode`` on an encrypted payload this process holds no
key for, or whose key under that id does not decrypt it (the reason, UTF-8):
a client reads it as ``CodecKeyMissingError``; a worker's codec
(``WorkerCodec``) raises that instead, failing the workflow task."""

KEY_BYTES = 32
"""AES-256: 32-byte keys."""

NONCE_BYTES = 12
"""The GCM nonce size NIST SP 800-38D recommends; a fresh random one per payload."""

TAG_BYTES = 16
"""The GCM authentication tag that ends every ciphertext."""

_NOT_OURS = "it is not one OMA's codec wrote"


@dataclass(frozen=True)
class CodecKey:
    """One key: its id (stored in each payload's metadata) and 32 bytes."""

    key_id: str
    key: bytes


def new_key(key_id: str | None = None) -> str:
    """A new ``key_id:base64_key`` entry for ``OMA_CODEC_KEYS`` (32 random bytes
    from ``secrets``; the id defaults to ``k`` and 8 random hex digits).

    Raises ``CodecKeysInvalidError`` for an id ``parse_keys`` would not read
    back as it is (empty, holding ``,``, ``:`` or a newline, or blank at an
    end): the entry would be refused by every process it is given to."""
    key_id = f"k{secrets.token_hex(4)}" if key_id is None else key_id
    entry = f"{key_id}:{base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}"
    try:
        readable = [k.key_id for k in parse_keys(entry)] == [key_id]
    except CodecKeysInvalidError:
        readable = False
    if not readable:
        raise CodecKeysInvalidError(
            f"{key_id!r} cannot be a key id: OMA_CODEC_KEYS separates its entries with ',' "
            "or newlines and an id from its key with ':', and trims blanks; give a non-empty "
            "id without them"
        )
    return entry


def parse_keys(text: str, source: str = "OMA_CODEC_KEYS") -> list[CodecKey]:
    """The keys of ``text`` (``key_id:base64_key`` entries separated by commas
    or newlines), first one first. Raises ``CodecKeysInvalidError`` naming
    ``source`` and the bad entry's position (never its key) when an entry has
    no id, is not base64, is not 32 bytes, or repeats an id; or when there is
    no entry at all."""
    entries = [e.strip() for e in text.replace("\n", ",").split(",") if e.strip()]
    if not entries:
        raise CodecKeysInvalidError(f"{source} holds no key; run `oma codec-key` for one")
    keys: list[CodecKey] = []
    for n, entry in enumerate(entries, 1):
        key_id, sep, encoded = entry.partition(":")
        key_id = key_id.strip()
        if not sep or not key_id:
            raise CodecKeysInvalidError(
                f"entry {n} of {source} is not key_id:base64_key (run `oma codec-key` for one)"
            )
        try:
            key = base64.b64decode(
                encoded.strip().replace("-", "+").replace("_", "/"), validate=True
            )
        except (binascii.Error, ValueError):
            raise CodecKeysInvalidError(
                f"the key of entry {n} ({key_id!r}) of {source} is not base64"
            ) from None
        if len(key) != KEY_BYTES:
            raise CodecKeysInvalidError(
                f"the key of entry {n} ({key_id!r}) of {source} is {len(key)} bytes; "
                f"AES-256 needs {KEY_BYTES}"
            )
        if any(k.key_id == key_id for k in keys):
            raise CodecKeysInvalidError(f"{source} names key id {key_id!r} twice")
        keys.append(CodecKey(key_id, key))
    return keys


def keys_from_env(environ: Mapping[str, str] | None = None) -> list[CodecKey] | None:
    """The keys ``OMA_CODEC_KEYS`` (or else the file ``OMA_CODEC_KEYS_FILE``)
    configures, or ``None`` when neither is set (encryption off). Raises
    ``CodecKeysInvalidError`` for a malformed list or an unreadable file."""
    env = os.environ if environ is None else environ
    if env.get("OMA_CODEC_KEYS"):
        return parse_keys(env["OMA_CODEC_KEYS"])
    path = env.get("OMA_CODEC_KEYS_FILE")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        raise CodecKeysInvalidError(
            f"cannot read OMA_CODEC_KEYS_FILE {path!r}: {err.strerror}"
        ) from None
    return parse_keys(text, f"OMA_CODEC_KEYS_FILE {path!r}")


class AesGcmCodec(PayloadCodec):
    """Encrypts every payload with the first key; decrypts with the key its
    metadata names.

    ``decode`` never raises, because a client, ``oma show`` and the codec
    server must show what they can of a history whatever is in it: a payload
    that arrived unencrypted comes back as it is; an encrypted payload whose
    key id this codec does not hold, or whose tag does not verify under the
    key it holds under that id, comes back as it is with
    ``MISSING_KEY_METADATA`` saying why; one no key can read (no key id, too
    short to hold a nonce and a tag, or whose plaintext is not a ``Payload``)
    with ``DECODE_ERROR_METADATA``. The product's payload converter
    (``oma.runtime.converter``) turns them into ``CodecKeyMissingError`` and
    ``CiphertextInvalidError``; on a worker, ``WorkerCodec`` raises the first
    before any workflow code sees the payload.
    """

    def __init__(self, keys: Sequence[CodecKey]) -> None:
        if not keys:
            raise CodecKeysInvalidError("an AES-GCM codec needs at least one key")
        self.keys = list(keys)
        self._ciphers = {k.key_id: AESGCM(k.key) for k in self.keys}
        self._encrypting = self.keys[0].key_id

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(p) for p in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        """``payload`` encrypted with the first key (see the module's wire shape)."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self._encrypting].encrypt(nonce, payload.SerializeToString(), None)
        return Payload(
            metadata={
                "encoding": ENCRYPTED_ENCODING,
                KEY_ID_METADATA: self._encrypting.encode(),
            },
            data=nonce + sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        """The original payload of an encrypted one, or ``payload`` itself when
        it is not encrypted; see the class for what comes back when it cannot
        be decrypted."""
        if payload.metadata.get("encoding") != ENCRYPTED_ENCODING:
            return payload
        payload = _unmarked(payload)
        if (fault := _malformed(payload)) is not None:
            return _marked(payload, DECODE_ERROR_METADATA, fault)
        key_id = _key_id(payload)
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            held = ", ".join(repr(k.key_id) for k in self.keys)
            return _marked(
                payload,
                MISSING_KEY_METADATA,
                f"the payload is encrypted with key id {key_id!r}; OMA_CODEC_KEYS holds {held}",
            )
        data = payload.data
        try:
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], None)
        except InvalidTag:
            # another process may hold the right key under this id (a worker
            # given the wrong one): not a reason to end a run
            return _marked(
                payload,
                MISSING_KEY_METADATA,
                f"the payload does not decrypt with the key OMA_CODEC_KEYS holds as key id "
                f"{key_id!r}: that key is not the one it was encrypted with, or the payload "
                "was altered",
            )
        try:
            return Payload.FromString(plain)
        except DecodeError:
            return _marked(
                payload,
                DECODE_ERROR_METADATA,
                f"the payload decrypts with key id {key_id!r} but holds no Temporal payload: "
                f"{_NOT_OURS}",
            )


class WorkerCodec(PayloadCodec):
    """The codec of a worker and a replayer: ``codec`` (``None``: encryption
    off, payloads pass as they are), except that ``decode`` raises
    ``CodecKeyMissingError`` for an encrypted payload this process holds no key
    for (``missing_key_reason``).

    The SDK decodes a workflow activation's payloads before any workflow code
    runs, and an exception there fails the workflow task (not the run):
    ``temporalio.worker._workflow``. The server retries the task, the run waits
    untouched, and the first worker that holds the key completes it. The
    failure's message, ``CODEC_KEY_MISSING: <why>; ...``, is left unencrypted
    (``oma.runtime.converter.OmaEncryptingFailureConverter``): it is what
    ``temporal workflow describe`` and the Web UI show of the failed task. A
    legacy query's activation fails the same way: the query is answered with
    that failure and the run is left as it is.
    """

    def __init__(self, codec: PayloadCodec | None) -> None:
        self.codec = codec

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads) if self.codec is None else await self.codec.encode(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if self.codec is None:
            decoded = [_unmarked(p) for p in payloads]
        else:
            decoded = await self.codec.decode(payloads)
        for payload in decoded:
            if (reason := missing_key_reason(payload)) is not None:
                raise CodecKeyMissingError(
                    f"{reason}; this worker leaves the run to a worker that holds that key "
                    "(the workflow task is retried until one takes it): set OMA_CODEC_KEYS "
                    "(or OMA_CODEC_KEYS_FILE) to a list holding it"
                )
        return decoded


def undecryptable_reason(payload: Payload) -> str | None:
    """Why ``payload`` cannot be read here (``missing_key_reason`` or
    ``malformed_reason``), or ``None`` when it is not an encrypted payload
    left undecrypted."""
    return missing_key_reason(payload) or malformed_reason(payload)


def missing_key_reason(payload: Payload) -> str | None:
    """Why ``payload`` is encrypted with a key this process does not hold, or
    ``None``. An encrypted payload that reached here without passing an
    ``AesGcmCodec`` (a process with no ``OMA_CODEC_KEYS``) is one, unless no
    key could read it anyway (``malformed_reason``)."""
    if payload.metadata.get("encoding") != ENCRYPTED_ENCODING:
        return None
    reason = payload.metadata.get(MISSING_KEY_METADATA)
    if reason is not None:
        return reason.decode(errors="replace")
    if DECODE_ERROR_METADATA in payload.metadata or _malformed(payload) is not None:
        return None
    return (
        f"the payload is encrypted with key id {_key_id(payload)!r} and OMA_CODEC_KEYS is not set"
    )


def malformed_reason(payload: Payload) -> str | None:
    """Why no key can read ``payload``, an encrypted payload (a ciphertext a
    client made up), or ``None``."""
    if payload.metadata.get("encoding") != ENCRYPTED_ENCODING:
        return None
    reason = payload.metadata.get(DECODE_ERROR_METADATA)
    return reason.decode(errors="replace") if reason is not None else _malformed(payload)


def _key_id(payload: Payload) -> str:
    return payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace")


def _malformed(payload: Payload) -> str | None:
    """What makes the encrypted ``payload`` unreadable by any key, judged
    without one (so every process judges it alike), or ``None``."""
    key_id = _key_id(payload)
    if not key_id:
        return f"the payload is marked encrypted but names no key id: {_NOT_OURS}"
    size = len(payload.data)
    if size < NONCE_BYTES + TAG_BYTES:
        # AESGCM raises ValueError for a nonce under 8 bytes: never let any
        # bytes a client sends reach it unchecked
        return (
            f"the payload encrypted with key id {key_id!r} is {size} bytes, shorter than a "
            f"nonce and a tag ({NONCE_BYTES + TAG_BYTES} bytes): {_NOT_OURS}"
        )
    return None


def _unmarked(payload: Payload) -> Payload:
    """``payload`` without the marks only a codec sets (a client could send
    them, to put its own words in a worker's failure)."""
    if MISSING_KEY_METADATA not in payload.metadata and DECODE_ERROR_METADATA not in (
        payload.metadata
    ):
        return payload
    clean = Payload()
    clean.CopyFrom(payload)
    clean.metadata.pop(MISSING_KEY_METADATA, None)
    clean.metadata.pop(DECODE_ERROR_METADATA, None)
    return clean


def _marked(payload: Payload, mark: str, reason: str) -> Payload:
    marked = Payload()
    marked.CopyFrom(payload)
    marked.metadata[mark] = reason.encode()
    return marked
