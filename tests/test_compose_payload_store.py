"""docker-compose's payload store: the workers keep large payloads in the
``minio`` service's bucket (parsed, not run: no Docker engine is needed)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from oma.runtime.payload_store import PayloadStore

COMPOSE_FILE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    return services


def default_of(value: str) -> str:
    """``s3://b/p`` of ``${OMA_PAYLOAD_STORE:-s3://b/p}``; a plain value as it is."""
    found = re.fullmatch(r"\$\{\w+:-(.*)\}", value)
    return found.group(1) if found else value


def test_the_workers_store_is_the_bucket_the_minio_service_makes(
    services: dict[str, Any],
) -> None:
    env = services["worker"]["environment"]
    store = PayloadStore.parse(default_of(env["OMA_PAYLOAD_STORE"]))
    [entrypoint] = [part for part in services["minio"]["entrypoint"] if "minio server" in part]

    assert f"mkdir -p /data/{store.bucket} " in entrypoint
    assert "exec minio server /data" in entrypoint
    assert env["AWS_ENDPOINT_URL"] == "http://minio:9000"
    assert "9000:9000" in services["minio"]["ports"]


def test_the_workers_s3_key_is_minios_own_and_comes_from_the_host(
    services: dict[str, Any],
) -> None:
    worker, minio = services["worker"]["environment"], services["minio"]["environment"]

    assert worker["AWS_ACCESS_KEY_ID"] == minio["MINIO_ROOT_USER"] == "${AWS_ACCESS_KEY_ID:-}"
    assert (
        worker["AWS_SECRET_ACCESS_KEY"]
        == minio["MINIO_ROOT_PASSWORD"]
        == "${AWS_SECRET_ACCESS_KEY:-}"
    )
