"""``OmaClientPlugin``: the product's data converter on a Temporal client.

A client (``oma`` CLI, the Python client) needs the data converter every OMA
payload uses (``oma.runtime.converter``) and, with tracing on, the
OpenTelemetry interceptor; it serves no workflow and no activity. So it is a
``temporalio.client.Plugin`` only: ``temporalio.plugin.SimplePlugin``, which
``OmaPlugin`` (a worker's, a replayer's) builds on, imports
``temporalio.worker``, which a client would otherwise pay for on every start.
(The SDK's plugin interface:
https://docs.temporal.io/develop/python/temporal-client#plugins.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Literal

import temporalio.client

from oma.runtime.codec import CodecKey, keys_from_env
from oma.runtime.converter import data_converter
from oma.runtime.payload_store import PayloadStore, store_from_env
from oma.runtime.tracing import enabled_by_env, tracing_plugin

if TYPE_CHECKING:
    from temporalio.client import ClientConfig
    from temporalio.service import ConnectConfig, ServiceClient


class OmaClientPlugin(temporalio.client.Plugin):
    """The data converter (``oma.runtime.converter.data_converter``) and, with
    tracing on, OpenTelemetry spans, on a client.

    ``codec_keys`` are the encryption keys (``oma.runtime.codec``); by default those
    of ``OMA_CODEC_KEYS`` / ``OMA_CODEC_KEYS_FILE``, none when neither is set.
    ``payload_store`` is where payloads over the threshold go
    (``oma.runtime.payload_store``); by default the one ``OMA_PAYLOAD_STORE``
    names, none when it is unset (``Connection.connect`` gives the embedded
    server's). ``tracing`` adds OpenTelemetry spans (``oma.runtime.tracing``): by default when
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (exporting there); with ``True``,
    through the global tracer provider the caller set. Raises
    ``CodecKeysInvalidError`` for a malformed key list, ``PayloadStoreInvalidError``
    for a malformed store, ``TracingUnavailableError``
    when tracing is on without the ``[otel]`` extra.
    """

    def __init__(
        self,
        *,
        codec_keys: Sequence[CodecKey] | Literal["env"] | None = "env",
        payload_store: PayloadStore | Literal["env"] | None = "env",
        tracing: bool | Literal["env"] = "env",
    ) -> None:
        self.codec_keys = keys_from_env() if codec_keys == "env" else codec_keys
        self.payload_store = store_from_env() if payload_store == "env" else payload_store
        self.tracing = enabled_by_env() if tracing == "env" else tracing
        self._tracing = tracing_plugin(from_env=tracing == "env") if self.tracing else None

    def name(self) -> str:
        return "oma"

    def configure_client(self, config: ClientConfig) -> ClientConfig:
        config["data_converter"] = data_converter(self.codec_keys, self.payload_store)
        return self._tracing.configure_client(config) if self._tracing else config

    async def connect_service_client(
        self, config: ConnectConfig, next: Callable[[ConnectConfig], Awaitable[ServiceClient]]
    ) -> ServiceClient:
        return await next(config)


def stores_payloads(client: temporalio.client.Client) -> bool:
    """Whether ``client`` keeps payloads past the threshold in a payload
    store (its ``OmaClientPlugin``'s ``payload_store``): then a run it
    starts may be given, and carry, far more than Temporal's 2 MB
    (``oma.core.schema.limits.state_budget``)."""
    plugins = client.config().get("plugins", ())
    return any(isinstance(p, OmaClientPlugin) and p.payload_store is not None for p in plugins)
