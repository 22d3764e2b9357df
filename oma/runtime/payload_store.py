"""Where large payloads go: Temporal's External Storage, configured by ``OMA_PAYLOAD_STORE``.

A payload of ``THRESHOLD_BYTES`` or more (after the codec: what is stored is
what would have been sent, encrypted when ``OMA_CODEC_KEYS`` is set) is put
in a blob store and the history keeps a small reference to it
(``temporalio.converter.ExternalStorage``:
https://docs.temporal.io/develop/python/data-handling/external-storage).
Every process that reads such a history (workers, the ``oma`` CLI, the
Python client, ``oma replay``, the codec server) needs the same store:

- ``file:///absolute/path``: a directory every client and worker can read
  (``oma.runtime._file_store``: one file per payload, named by its SHA-256);
- ``s3://bucket[/prefix]``: S3 or any S3-compatible server, through the SDK's
  S3 driver (``temporalio.contrib.aws.s3driver``) over boto3 (the ``[s3]``
  extra, imported at the first payload stored or read:
  ``oma.runtime._s3_store``); the endpoint, region and credentials are the
  standard AWS ones (``AWS_ENDPOINT_URL``, ``AWS_REGION``,
  ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, profiles).

The embedded dev server (``oma run``, ``oma dev`` and whatever connects to
the default address with no ``TEMPORAL_ADDRESS``) keeps payloads in
``payloads/`` beside its database, ``.oma/payloads``, unless
``OMA_PAYLOAD_STORE`` says otherwise (``PayloadStore.beside``).

A process with no store still reads every history whose payloads are all
inline; one that meets a reference it cannot follow says so with an OMA
error (``PayloadStoreMissingError``, ``StoredPayloadMissingError``,
``StoredPayloadInvalidError``) rather than the SDK's ``TMPRL1105``: every
data converter the product builds carries an ``ExternalStorage`` whose
drivers include a stand-in (``_Absent``) for each kind of store it lacks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from temporalio.api.common.v1 import Payload
from temporalio.api.sdk.v1 import ExternalStorageReference
from temporalio.converter import (
    ExternalStorage,
    JSONProtoPayloadConverter,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverSelectContext,
    StorageDriverStoreContext,
)

from oma.core.schema.errors import PayloadStoreInvalidError, PayloadStoreMissingError

ENV = "OMA_PAYLOAD_STORE"
"""The variable that names the store of every client and worker."""

THRESHOLD_BYTES = 256 * 1024
"""The size from which a payload is stored rather than carried in the
history: the SDK's default (``ExternalStorage.payload_size_threshold``),
about an eighth of Temporal's 2 MB payload limit. Below it a payload costs
nothing more than it did; a small run stores nothing."""

EMBEDDED_STORE = "payloads"
"""The embedded dev server's store: this directory beside its database
(``.oma/payloads`` beside ``.oma/temporal.db``)."""

FILE_DRIVER = "oma.file"
"""The name of the directory store's driver, recorded in every reference it makes."""

S3_DRIVER = "aws.s3driver"
"""The name of the SDK's S3 driver (its default), recorded in every reference it makes."""

ACCEPTED = (
    "file:///absolute/path (a directory every client and worker can read) or "
    "s3://bucket/prefix (S3 or an S3-compatible server; endpoint and credentials "
    "from the AWS_* variables)"
)

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
"""An S3 bucket name (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html)."""


@dataclass(frozen=True)
class PayloadStore:
    """One payload store: a directory (``directory``) or an S3 bucket and key
    prefix (``bucket``, ``prefix``: empty, or ending in ``/``). ``url`` is
    how messages name it; ``create`` makes the directory at the first payload
    stored (the embedded default's; a configured directory must exist, so a
    share that is not mounted is not written beside)."""

    url: str
    directory: Path | None = None
    bucket: str | None = None
    prefix: str = ""
    create: bool = False
    threshold_bytes: int = THRESHOLD_BYTES

    @property
    def kind(self) -> Literal["file", "s3"]:
        return "file" if self.directory is not None else "s3"

    @classmethod
    def parse(cls, text: str, source: str = ENV) -> PayloadStore:
        """The store ``text`` names (``file:///absolute/path`` or
        ``s3://bucket[/prefix]``). Raises ``PayloadStoreInvalidError`` naming
        ``source`` and the accepted forms for anything else: another scheme,
        a relative path or a host in a ``file:`` URL, a query or fragment, a
        user or password (credentials come from the AWS variables), a bucket
        name S3 refuses, or a prefix with an empty, ``.`` or ``..`` segment."""
        shown = text if "@" not in text else "(a URL with a user or password)"

        def refused(why: str) -> PayloadStoreInvalidError:
            return PayloadStoreInvalidError(f"{source}={shown!r} {why}; give {ACCEPTED}")

        parts = urlsplit(text.strip())
        if parts.query or parts.fragment or "@" in parts.netloc:
            raise refused("has a query, a fragment, a user or a password")
        if parts.scheme == "file":
            if parts.netloc not in ("", "localhost"):
                raise refused(f"names the host {parts.netloc!r}: write three slashes")
            path = unquote(parts.path)
            if not path.startswith("/") or "\0" in path:
                raise refused("is not an absolute path")
            return cls(url=f"file://{path}", directory=Path(path))
        if parts.scheme == "s3":
            bucket = parts.netloc
            if not _BUCKET.fullmatch(bucket) or ".." in bucket:
                raise refused(f"names the bucket {bucket!r}, which is not an S3 bucket name")
            path = parts.path.strip("/")
            segments = path.split("/") if path else []
            if any(s in ("", ".", "..") for s in segments):
                raise refused("has an empty, '.' or '..' segment in its prefix")
            prefix = "".join(f"{s}/" for s in segments)
            return cls(url=f"s3://{bucket}/{prefix}", bucket=bucket, prefix=prefix)
        raise refused("is not a payload store")

    @classmethod
    def beside(cls, db_file: Path) -> PayloadStore:
        """The embedded dev server's store: ``EMBEDDED_STORE`` beside
        ``db_file``, as an absolute path, made at the first payload stored."""
        directory = (db_file.parent / EMBEDDED_STORE).absolute()
        return cls(url=f"file://{directory}", directory=directory, create=True)

    @cached_property
    def driver(self) -> StorageDriver:
        """This store's driver (built once: the S3 one holds its client)."""
        if self.directory is not None:
            from oma.runtime._file_store import FileStorageDriver

            return FileStorageDriver(self)
        from oma.runtime._s3_store import S3PayloadDriver

        return S3PayloadDriver(self)


def store_from_env(environ: Mapping[str, str] | None = None) -> PayloadStore | None:
    """The store ``OMA_PAYLOAD_STORE`` names, or ``None`` when it is unset or
    empty. Raises ``PayloadStoreInvalidError`` for a malformed value."""
    env = os.environ if environ is None else environ
    text = env.get(ENV, "").strip()
    return PayloadStore.parse(text) if text else None


def external_storage(store: PayloadStore | None) -> ExternalStorage:
    """The SDK's ``ExternalStorage`` for ``store``: payloads of
    ``store.threshold_bytes`` or more go to its driver; references read back
    through it. ``None`` (no store) stores nothing. Beside the store's own driver, a
    stand-in for each kind this process lacks raises
    ``PayloadStoreMissingError`` for a reference of that kind."""
    active = store.driver if store is not None else None
    drivers: dict[str, StorageDriver] = {
        name: _Absent(name, store) for name in (FILE_DRIVER, S3_DRIVER)
    }
    if active is not None:
        drivers[active.name()] = active

    def select(context: StorageDriverSelectContext, payload: Payload) -> StorageDriver | None:
        return active

    return ExternalStorage(
        drivers=list(drivers.values()),
        driver_selector=select,
        payload_size_threshold=store.threshold_bytes if store is not None else THRESHOLD_BYTES,
    )


REFERENCE_TYPE = ExternalStorageReference.DESCRIPTOR.full_name.encode()
"""The ``messageType`` of a reference to a stored payload (``reference_of``)."""
_REFERENCES = JSONProtoPayloadConverter()


def reference_of(payload: Payload) -> ExternalStorageReference | None:
    """The reference ``payload`` is (what the history holds of a stored
    payload: ``json/protobuf`` of ``temporal.api.sdk.v1.ExternalStorageReference``,
    the driver's name and its claim), or ``None`` for any other payload."""
    if payload.metadata.get("encoding") != b"json/protobuf":
        return None
    if payload.metadata.get("messageType") != REFERENCE_TYPE:
        return None
    try:
        found = _REFERENCES.from_payload(payload, ExternalStorageReference)
    except Exception:
        return None
    return found if isinstance(found, ExternalStorageReference) else None


async def retrieve(storage: ExternalStorage, payloads: Sequence[Payload]) -> list[Payload]:
    """``payloads`` with every reference replaced by the payload it refers to,
    read through ``storage``'s drivers (as stored: still encrypted when it was),
    the others as they are. For the codec server, which reads payloads, not
    values. Raises what the driver raises (``StoredPayloadMissingError``,
    ``StoredPayloadInvalidError``, ``PayloadStoreMissingError``)."""
    drivers = {driver.name(): driver for driver in storage.drivers}
    out: list[Payload] = []
    for payload in payloads:
        reference = reference_of(payload)
        driver = drivers.get(reference.driver_name) if reference is not None else None
        if reference is None:
            out.append(payload)
            continue
        if driver is None:
            raise PayloadStoreMissingError(
                f"a payload is stored by a driver named {reference.driver_name!r}, which OMA "
                f"does not have (it has {FILE_DRIVER!r} and {S3_DRIVER!r})"
            )
        claim = StorageDriverClaim(claim_data=dict(reference.claim_data))
        [stored] = await driver.retrieve(StorageDriverRetrieveContext(), [claim])
        out.append(stored)
    return out


class _Absent(StorageDriver):
    """A stand-in for a kind of store this process does not have: it never
    stores, and a reference to a payload of that kind raises
    ``PayloadStoreMissingError`` saying where the payload is and what this
    process has instead."""

    def __init__(self, name: str, store: PayloadStore | None) -> None:
        self._name = name
        self._store = store

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return "oma.absent"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        raise AssertionError("a stand-in for a missing payload store is never selected")

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        claim = claims[0].claim_data if claims else {}
        if self._name == S3_DRIVER:
            where = (
                f"an S3 payload store (bucket {claim.get('bucket')!r}, key {claim.get('key')!r})"
            )
        else:
            where = f"a directory payload store (key {claim.get('key')!r})"
        have = (
            "this process has no payload store"
            if self._store is None
            else f"this process's payload store is {self._store.url}"
        )
        raise PayloadStoreMissingError(
            f"a payload of this history is kept in {where} and {have}: set {ENV} to the "
            "store every client and worker of the namespace shares (file:///path or "
            's3://bucket/prefix; docs/orchestration.md, "Where large payloads go")'
        )
