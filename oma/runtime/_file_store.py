"""The directory payload store (``OMA_PAYLOAD_STORE=file:///path``): a driver on
the SDK's ``StorageDriver``.

One file per payload, named by the SHA-256 of its bytes (the serialized
``Payload``, as the codec left it): ``sha256/<first 2 hex>/<64 hex>`` under
the directory, which is the claim the history's reference holds. A payload
already there is not written again (its modification time is brought to now,
so a clean-up by age keeps what a recent run refers to); a new one is written
to a temporary file in the same directory, synced and renamed into place, so
a reader never sees half a file.

A reference comes from a history, which whoever can reach the namespace can
write: a claim that is not exactly such a key (a path that would leave the
directory, anything else) is refused before any file is opened, and the bytes
read must have the SHA-256 the key names.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from oma.core.schema.errors import (
    PayloadStoreUnavailableError,
    StoredPayloadInvalidError,
    StoredPayloadMissingError,
)

if TYPE_CHECKING:
    from oma.runtime.payload_store import PayloadStore

KEY = re.compile(r"sha256/([0-9a-f]{2})/(\1[0-9a-f]{62})")
"""A key this store writes: the digest's first two hex digits, then the digest."""

_SHOWN_KEY_CHARS = 200
"""The most of a refused claim a message repeats."""


class FileStorageDriver(StorageDriver):
    """Payloads as files under ``store.directory`` (see the module). The file
    work runs in a thread, off the event loop."""

    def __init__(self, store: PayloadStore) -> None:
        assert store.directory is not None
        self.directory: Path = store.directory
        self.url = store.url
        self.create = store.create

    def name(self) -> str:
        from oma.runtime.payload_store import FILE_DRIVER

        return FILE_DRIVER

    def type(self) -> str:
        return self.name()

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        """Write each payload (unless there already); raises
        ``PayloadStoreUnavailableError`` when the directory does not exist
        (and is not the embedded default's) or cannot be written."""
        return await asyncio.to_thread(lambda: [self._put(p) for p in payloads])

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        """Read each claimed payload; raises ``StoredPayloadInvalidError`` for a
        claim that is not a key of this store or a file whose SHA-256 differs,
        ``StoredPayloadMissingError`` for a file that is not there or cannot
        be read, naming the file and the store."""
        return await asyncio.to_thread(lambda: [self._get(c) for c in claims])

    def _put(self, payload: Payload) -> StorageDriverClaim:
        data = payload.SerializeToString()
        digest = hashlib.sha256(data).hexdigest()
        key = f"sha256/{digest[:2]}/{digest}"
        path = self.directory / key
        if self.create:
            self.directory.mkdir(parents=True, exist_ok=True)
        elif not self.directory.is_dir():
            raise PayloadStoreUnavailableError(
                f"the payload store {self.url} is not a directory this process can see: "
                "create it (or mount it) for every client and worker"
            )
        if path.exists():
            # another user's file in a shared store may refuse: it is there, that is enough
            with contextlib.suppress(OSError):
                os.utime(path)
            return StorageDriverClaim(claim_data={"key": key})
        tmp = path.with_name(f".{digest}.{secrets.token_hex(4)}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            raise PayloadStoreUnavailableError(
                f"cannot write {path} in the payload store {self.url}: {err.strerror or err}"
            ) from None
        return StorageDriverClaim(claim_data={"key": key})

    def _get(self, claim: StorageDriverClaim) -> Payload:
        key = str(claim.claim_data.get("key", ""))
        found = KEY.fullmatch(key)
        if found is None:
            raise StoredPayloadInvalidError(
                f"a stored payload's reference names the key {key[:_SHOWN_KEY_CHARS]!r}, which "
                f"is not one the payload store {self.url} writes (sha256/<2 hex>/<64 hex>): "
                "refused, nothing is read"
            )
        path = self.directory / key
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            gone = (
                "" if self.directory.is_dir() else f" (the directory {self.directory} is not there)"
            )
            raise StoredPayloadMissingError(
                f"the payload store {self.url} has no file {path}{gone}, which a reference in "
                "this history names: it was deleted, or stored in another store (every client "
                "and worker must have the same OMA_PAYLOAD_STORE)"
            ) from None
        except OSError as err:
            raise StoredPayloadMissingError(
                f"cannot read {path} of the payload store {self.url}: {err.strerror or err}"
            ) from None
        if hashlib.sha256(data).hexdigest() != found.group(2):
            raise StoredPayloadInvalidError(
                f"{path} of the payload store {self.url} does not hold the payload its "
                "reference names: its SHA-256 differs (the file was altered)"
            )
        try:
            return Payload.FromString(data)
        except DecodeError:
            raise StoredPayloadInvalidError(
                f"{path} of the payload store {self.url} holds no Temporal payload"
            ) from None
