"""Where OMA connects: Temporal's environment configuration, read in one place.

The worker, the ``oma`` CLI and the Python client all connect through
``Connection.from_env()``, which reads Temporal's own client configuration
(``temporalio.envconfig``: https://docs.temporal.io/develop/environment-configuration):
the TOML profile file (``TEMPORAL_CONFIG_FILE``, default
``~/.config/temporalio/temporal.toml``; profile ``TEMPORAL_PROFILE``, default
``default``) overridden by ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*`` and ``TEMPORAL_GRPC_META_*``. So a
Temporal Cloud namespace (an API key, or mTLS certificates) works as it does
for the ``temporal`` CLI. With nothing configured: ``localhost:7233``,
namespace ``default``. The task queue is OMA's own setting,
``OMA_TASK_QUEUE`` (default ``oma``), and so is the payload store,
``OMA_PAYLOAD_STORE`` (``oma.runtime.payload_store``): with none, a process
that talks to the embedded dev server (no address configured, or the server
it started) keeps large payloads beside that server's database.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.envconfig import ClientConfig, ClientConnectConfig

from oma.core.schema.errors import TemporalConfigError, TemporalUnavailableError
from oma.runtime.client_plugin import OmaClientPlugin
from oma.runtime.payload_store import PayloadStore, store_from_env

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "oma"

EMBEDDED_DB = Path(".oma") / "temporal.db"
"""Where the embedded dev server keeps its histories (relative to the working
directory: the file ``oma run`` and ``oma dev`` use); its payload store is
beside it (``PayloadStore.beside``)."""

STARTING_SERVER_WAIT_S = 15.0
"""How long ``Connection.connect`` waits for a server that is still starting."""


@dataclass(frozen=True)
class Connection:
    """A Temporal server, a namespace, its credentials, and OMA's task queue.

    ``config`` holds the keyword arguments of ``temporalio.client.Client.connect``
    (``target_host``, ``namespace``, and ``api_key``, ``tls``,
    ``rpc_metadata`` when configured). ``payload_store`` is the store
    ``OMA_PAYLOAD_STORE`` names; ``embedded_db``, the database of the
    embedded dev server this connection talks to (when it does), beside which
    its payloads go when no store is named (``store``).
    """

    config: Mapping[str, Any]
    task_queue: str = DEFAULT_TASK_QUEUE
    payload_store: PayloadStore | None = None
    embedded_db: Path | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Connection:
        """The connection the environment (and its profile file) configures.
        With no address configured, or the address of the embedded dev server
        started in this directory (the lock file beside ``EMBEDDED_DB`` names
        it), it is that server's (``embedded_db``: its payload store too).

        Raises ``TemporalConfigError`` when the profile file cannot be read
        or parsed, or names no such profile; ``PayloadStoreInvalidError`` for a
        malformed ``OMA_PAYLOAD_STORE``.
        """
        env = os.environ if environ is None else environ
        try:
            loaded: ClientConnectConfig = ClientConfig.load_client_connect_config(
                override_env_vars={k: v for k, v in env.items() if _utf8(k) and _utf8(v)}
            )
        except Exception as err:  # the SDK's ConfigError is not importable by name
            where = env.get("TEMPORAL_CONFIG_FILE") or "~/.config/temporalio/temporal.toml"
            profile = env.get("TEMPORAL_PROFILE") or "default"
            raise TemporalConfigError(
                f"cannot load the Temporal client configuration (profile {profile!r} of "
                f"{where}, and the TEMPORAL_* environment): {err}"
            ) from None
        config: dict[str, Any] = {
            "target_host": DEFAULT_ADDRESS,
            "namespace": DEFAULT_NAMESPACE,
            **loaded,
        }
        return cls(
            config,
            env.get("OMA_TASK_QUEUE") or DEFAULT_TASK_QUEUE,
            payload_store=store_from_env(env),
            embedded_db=EMBEDDED_DB if _embedded(loaded.get("target_host")) else None,
        )

    @classmethod
    def local(
        cls, address: str, task_queue: str = DEFAULT_TASK_QUEUE, namespace: str = DEFAULT_NAMESPACE
    ) -> Connection:
        """A local server at ``address`` (plain TCP, no credentials), e.g. the
        embedded dev server."""
        return cls({"target_host": address, "namespace": namespace}, task_queue)

    @property
    def address(self) -> str:
        """``host:port`` of the Temporal frontend."""
        return str(self.config["target_host"])

    @property
    def namespace(self) -> str:
        return str(self.config["namespace"])

    @property
    def store(self) -> PayloadStore | None:
        """The payload store of this connection's processes: ``payload_store``,
        else the embedded dev server's beside ``embedded_db``, else none."""
        if self.payload_store is not None or self.embedded_db is None:
            return self.payload_store
        return PayloadStore.beside(self.embedded_db)

    def at(self, address: str, embedded_db: Path = EMBEDDED_DB) -> Connection:
        """The same namespace, task queue and payload store on the embedded dev
        server at ``address`` (plain TCP, no credentials) whose histories are
        in ``embedded_db``."""
        local = Connection.local(address, self.task_queue, self.namespace)
        return replace(local, payload_store=self.payload_store, embedded_db=embedded_db)

    async def connect(self, **kwargs: Any) -> Client:
        """A client with ``OmaClientPlugin`` (the product's data converter).

        A server that answers "Frontend is not healthy yet" (one that just
        started: it listens a moment before it serves) is asked again for up
        to ``STARTING_SERVER_WAIT_S`` seconds. ``kwargs`` go to
        ``Client.connect`` (e.g. more ``plugins``; an ``OmaClientPlugin`` or
        ``OmaPlugin`` among them,
        e.g. one with its own ``codec_keys``, replaces the default one, which
        reads ``OMA_CODEC_KEYS``, and whose payload store is ``store``, or
        ``OMA_PAYLOAD_STORE``'s). Raises ``TemporalUnavailableError`` when no
        server answers at ``address`` (one line: the address and what to
        start), ``CodecKeysInvalidError`` for a malformed key list,
        ``PayloadStoreInvalidError`` for a malformed store.
        """
        given = list(kwargs.pop("plugins", ()))
        if not any(isinstance(p, OmaClientPlugin) for p in given):
            store = self.store
            given = [OmaClientPlugin(payload_store=store if store is not None else "env"), *given]
        deadline = time.monotonic() + STARTING_SERVER_WAIT_S
        while True:
            try:
                return await Client.connect(**self.config, plugins=given, **kwargs)
            except RuntimeError as err:
                if "not healthy yet" not in str(err) or time.monotonic() > deadline:
                    raise TemporalUnavailableError(
                        f"no Temporal server answers at {self.address} (namespace "
                        f"{self.namespace!r}): start one with `oma dev`, or point "
                        f"TEMPORAL_ADDRESS at yours ({_first_line(err)})"
                    ) from None
            await asyncio.sleep(0.25)


_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def _embedded(address: str | None) -> bool:
    """Whether ``address`` (``None``: none configured) is the embedded dev
    server's: the default, or the address the lock file beside ``EMBEDDED_DB``
    names (``oma dev --port N`` in this directory; ``oma.runtime.dev_server``
    writes it)."""
    if not address:
        return True
    try:
        held = json.loads(EMBEDDED_DB.with_name(EMBEDDED_DB.name + ".lock").read_text())
        embedded = str(held["address"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    host, _, port = address.rpartition(":")
    its_host, _, its_port = embedded.rpartition(":")
    return port == its_port and (host == its_host or {host, its_host} <= _LOOPBACK)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _utf8(text: str) -> bool:
    """Whether ``text`` is valid UTF-8 text: a variable of other bytes (which
    Python holds as surrogates) would make the SDK refuse the whole
    environment, though it cannot be one of Temporal's."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
