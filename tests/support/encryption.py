"""Encrypted runs on the session's dev server: their task queue and namespace
(``ENCRYPTED_NAMESPACE``), two keys, and a client that holds the keys given."""

from __future__ import annotations

from temporalio.client import Client

from oma.runtime.codec import CodecKey, new_key
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer
from oma.worker.plugin import OmaPlugin
from tests.support.runs import ENCRYPTED_NAMESPACE

QUEUE = "oma-encrypted"
KEY_A = new_key("key-a")
KEY_B = new_key("key-b")


async def connect(dev_server: DevServer, keys: list[CodecKey] | None) -> Client:
    """A client of ``ENCRYPTED_NAMESPACE`` on ``QUEUE`` whose codec holds ``keys``
    (none: it sees the payloads as stored)."""
    return await Connection.local(dev_server.address, QUEUE, ENCRYPTED_NAMESPACE).connect(
        plugins=[OmaPlugin(codec_keys=keys)]
    )
