"""The S3 payload store (``OMA_PAYLOAD_STORE=s3://bucket/prefix``): the SDK's
``S3StorageDriver`` over a boto3 client.

The SDK's driver names each object by the payload's SHA-256 under the
namespace and the workflow or activity it belongs to
(``v0/ns/<namespace>/wt/<type>/wi/<id>/ri/<run id>/d/sha256/<hex>``, its
README), checks the SHA-256 on the way back, and records the bucket and that
key as the claim. This module gives it the client (``S3StorageDriverClient``):

- boto3, the AWS SDK, configured as the AWS tools are (``AWS_ENDPOINT_URL``
  for any S3-compatible server, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID`` /
  ``AWS_SECRET_ACCESS_KEY``, profiles, instance roles). One client per
  process, made at the first payload (boto3 imported then, in a thread: a
  process that never meets a large payload never loads it); boto3 clients
  are thread-safe, and each call runs in a thread, off the event loop. (The
  SDK's own adapter needs aioboto3, whose pinned botocore pip cannot resolve
  beside the rest of this project's dependencies.)
- the store's prefix, put before every key (the claim holds the key without
  it, so every process must have the same ``s3://bucket/prefix``);
- a claim is followed only into the configured bucket and under its prefix: a
  reference naming another bucket is a store this process does not have
  (``StoredPayloadMissingError``), and a key with an empty, ``.`` or ``..``
  segment is refused (``StoredPayloadInvalidError``).

``S3PayloadDriver`` turns what the SDK's driver raises into OMA's errors,
naming the bucket and the key.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from oma.core.schema.errors import (
    OMAError,
    PayloadStoreInvalidError,
    PayloadStoreUnavailableError,
    StoredPayloadInvalidError,
    StoredPayloadMissingError,
)

if TYPE_CHECKING:
    from oma.runtime.payload_store import PayloadStore

_NOT_FOUND = frozenset({"404", "NoSuchKey", "NotFound"})


class Boto3Client(S3StorageDriverClient):
    """The SDK driver's S3 operations on ``store``'s bucket, each key under its prefix."""

    def __init__(self, store: PayloadStore) -> None:
        assert store.bucket is not None
        self.bucket = store.bucket
        self.prefix = store.prefix
        self.url = store.url
        self._client: Any = None
        self._lock = threading.Lock()

    def describe(self) -> Mapping[str, str]:
        return {"store": self.url}

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        name = self._key(bucket, key)
        try:
            await asyncio.to_thread(
                lambda: self._s3().put_object(Bucket=self.bucket, Key=name, Body=data)
            )
        except OMAError:
            raise
        except Exception as err:
            raise PayloadStoreUnavailableError(
                f"cannot write s3://{self.bucket}/{name} of the payload store {self.url}: "
                f"{_reason(err)}"
            ) from None

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        name = self._key(bucket, key)
        try:
            await asyncio.to_thread(lambda: self._s3().head_object(Bucket=self.bucket, Key=name))
        except OMAError:
            raise
        except Exception as err:
            if _code(err) in _NOT_FOUND:
                return False
            raise PayloadStoreUnavailableError(
                f"cannot look up s3://{self.bucket}/{name} of the payload store {self.url}: "
                f"{_reason(err)}"
            ) from None
        return True

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        name = self._key(bucket, key)
        try:
            return await asyncio.to_thread(self._read, name)
        except OMAError:
            raise
        except Exception as err:
            if _code(err) in _NOT_FOUND:
                why = "there is no such object: it was deleted, or stored in another store"
            elif _code(err) == "NoSuchBucket":
                why = "the bucket does not exist"
            else:
                why = _reason(err)
            raise StoredPayloadMissingError(
                f"the payload store {self.url} cannot give s3://{self.bucket}/{name}, which a "
                f"reference in this history names: {why} (every client and worker must have "
                "the same OMA_PAYLOAD_STORE)"
            ) from None

    def _read(self, name: str) -> bytes:
        body = self._s3().get_object(Bucket=self.bucket, Key=name)["Body"]
        try:
            return bytes(body.read())
        finally:
            body.close()

    def _key(self, bucket: str, key: str) -> str:
        """The object key of the claim ``bucket``, ``key``: ``key`` under the prefix."""
        if bucket != self.bucket:
            raise StoredPayloadMissingError(
                f"a payload of this history is stored in the bucket {bucket!r} (key {key!r}) "
                f"and this process's payload store is {self.url}: give every client and "
                "worker the same OMA_PAYLOAD_STORE"
            )
        segments = key.split("/")
        if not key.startswith("v0/") or any(s in ("", ".", "..") for s in segments):
            raise StoredPayloadInvalidError(
                f"a stored payload's reference names the key {key[:200]!r}, which is not one "
                f"the payload store {self.url} writes: refused, nothing is read"
            )
        return self.prefix + key

    def _s3(self) -> Any:
        """The boto3 client, made (and boto3 imported) at the first call, in
        the calling thread: never on the event loop."""
        with self._lock:
            if self._client is None:
                try:
                    import boto3
                except ImportError:
                    raise PayloadStoreInvalidError(
                        f"OMA_PAYLOAD_STORE={self.url!r} needs boto3: install "
                        "oma-temporal[s3] (pip install 'oma-temporal[s3]')"
                    ) from None
                self._client = boto3.session.Session().client("s3")
            return self._client


def _code(err: BaseException) -> str:
    response = getattr(err, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _reason(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]


class S3PayloadDriver(StorageDriver):
    """The SDK's ``S3StorageDriver`` on ``store`` (a ``Boto3Client``), whose
    failures come out as OMA's errors: ``PayloadStoreUnavailableError`` when
    a payload cannot be stored, ``StoredPayloadMissingError`` when one cannot
    be read, ``StoredPayloadInvalidError`` when a claim is refused or the
    object's SHA-256 differs from the claim's."""

    def __init__(self, store: PayloadStore) -> None:
        from oma.runtime.payload_store import S3_DRIVER

        assert store.bucket is not None
        self._name = S3_DRIVER
        self._s3 = S3StorageDriver(Boto3Client(store), store.bucket, driver_name=S3_DRIVER)

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return self._s3.type()

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        try:
            return await self._s3.store(context, payloads)
        except (RuntimeError, ValueError) as err:
            raise _ours(err, PayloadStoreUnavailableError) from None

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        for claim in claims:
            if "bucket" not in claim.claim_data or "key" not in claim.claim_data:
                raise StoredPayloadInvalidError(
                    "a stored payload's reference names no bucket and key: refused"
                )
        try:
            return await self._s3.retrieve(context, claims)
        except (RuntimeError, ValueError) as err:
            raise _ours(err, StoredPayloadInvalidError) from None


def _ours(err: BaseException, otherwise: type[OMAError]) -> OMAError:
    """The OMA error the client raised under the SDK's wrapper, or ``otherwise``
    with the SDK's message (an integrity check that failed, a payload over
    the driver's ``max_payload_size``)."""
    cause = err.__cause__
    if isinstance(cause, OMAError):
        return cause
    if isinstance(err, OMAError):
        return err
    return otherwise(str(err))
