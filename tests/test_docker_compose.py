"""The docker-compose deployment: Postgres, Temporal, its Web UI and the OMA worker.

No Docker engine is needed: the file is parsed and its wiring checked, so a broken
service name, port or secret shows up here rather than at `docker compose up`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    result: dict[str, Any] = compose["services"]
    return result


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a mapping, whichever of the two compose syntaxes it uses."""
    env = service.get("environment", {})
    if isinstance(env, list):
        pairs = (item.split("=", 1) for item in env)
        return {pair[0]: pair[1] if len(pair) == 2 else "" for pair in pairs}
    return {key: "" if value is None else str(value) for key, value in env.items()}


def container_ports(service: dict[str, Any]) -> set[int]:
    """Container-side ports a service publishes ("7233:7233", "127.0.0.1:7233:7233", long form)."""
    ports: set[int] = set()
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            ports.add(int(entry["target"]))
        else:
            ports.add(int(str(entry).split("/")[0].rsplit(":", 1)[-1]))
    return ports


def published_ports(service: dict[str, Any]) -> set[tuple[int, int]]:
    """(host port, container port) pairs of a service's short-syntax port entries."""
    pairs: set[tuple[int, int]] = set()
    for entry in service.get("ports", []):
        parts = str(entry).split("/")[0].split(":")
        pairs.add((int(parts[-2]), int(parts[-1])))
    return pairs


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """Service name -> start condition, whichever of the two compose syntaxes is used."""
    deps = service.get("depends_on", {})
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in deps.items()}


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with comments dropped and continuation lines joined."""
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    instructions = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, args = stripped.partition(" ")
            instructions.append((keyword.upper(), args.strip()))
    return instructions


def test_the_four_services_exist(services: dict[str, Any]) -> None:
    assert set(services) == {"postgres", "temporal", "temporal-ui", "worker"}


def test_temporal_runs_a_pinned_auto_setup_image_on_postgres(services: dict[str, Any]) -> None:
    temporal = services["temporal"]
    assert temporal["image"] == "temporalio/auto-setup:1.29.1"
    env = environment(temporal)
    assert env["DB"] == "postgres12"
    assert env["DB_PORT"] == "5432"


def test_temporal_publishes_7233(services: dict[str, Any]) -> None:
    assert published_ports(services["temporal"]) == {(7233, 7233)}


def test_temporal_waits_for_postgres_to_be_healthy(services: dict[str, Any]) -> None:
    assert depends_on(services["temporal"]) == {"postgres": "service_healthy"}


def test_postgres_has_a_healthcheck(services: dict[str, Any]) -> None:
    healthcheck = services["postgres"]["healthcheck"]
    assert healthcheck["test"] == ["CMD-SHELL", "pg_isready -U temporal -d temporal"]


def test_postgres_keeps_its_data_in_a_named_volume() -> None:
    compose = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert compose["services"]["postgres"]["volumes"] == ["postgres-data:/var/lib/postgresql/data"]
    assert "postgres-data" in compose["volumes"]


def test_temporal_postgres_seeds_names_the_postgres_service(services: dict[str, Any]) -> None:
    seeds = environment(services["temporal"])["POSTGRES_SEEDS"]
    assert seeds == "postgres"
    assert seeds in services


def test_temporal_logs_in_with_the_postgres_credentials(services: dict[str, Any]) -> None:
    temporal_env = environment(services["temporal"])
    postgres_env = environment(services["postgres"])
    assert temporal_env["POSTGRES_USER"] == postgres_env["POSTGRES_USER"] == "temporal"
    assert temporal_env["POSTGRES_PWD"] == postgres_env["POSTGRES_PASSWORD"]


def test_ui_publishes_8080_and_points_at_temporal(services: dict[str, Any]) -> None:
    ui = services["temporal-ui"]
    assert ui["image"] == "temporalio/ui:2.34.0"
    assert published_ports(ui) == {(8080, 8080)}
    assert environment(ui)["TEMPORAL_ADDRESS"] == "temporal:7233"


def test_worker_builds_from_the_repo_dockerfile(services: dict[str, Any]) -> None:
    assert services["worker"]["build"] == {"context": ".", "dockerfile": "Dockerfile"}
    assert (ROOT / "Dockerfile").is_file()


def test_dockerfile_runs_worker_py_as_a_non_root_user() -> None:
    instructions = dockerfile_instructions(ROOT / "Dockerfile")
    assert instructions[0] == ("FROM", "python:3.11-slim")
    cmds = [args for keyword, args in instructions if keyword == "CMD"]
    assert [json.loads(args) for args in cmds] == [["python", "worker.py"]]
    users = [args for keyword, args in instructions if keyword == "USER"]
    assert users == ["oma"]


def test_worker_temporal_address_is_a_service_listening_on_7233(
    services: dict[str, Any],
) -> None:
    address = environment(services["worker"])["TEMPORAL_ADDRESS"]
    assert address == "temporal:7233"
    host, _, port = address.partition(":")
    assert host in services
    assert int(port) in container_ports(services[host])


def test_worker_uses_the_default_namespace_and_the_oma_task_queue(
    services: dict[str, Any],
) -> None:
    env = environment(services["worker"])
    assert env["TEMPORAL_NAMESPACE"] == "default"
    assert env["OMA_TASK_QUEUE"] == "oma"


def test_worker_starts_after_temporal_and_restarts_unless_stopped(
    services: dict[str, Any],
) -> None:
    worker = services["worker"]
    assert depends_on(worker) == {"temporal": "service_healthy"}
    assert worker["restart"] == "unless-stopped"


def test_worker_env_never_hard_codes_an_api_key(services: dict[str, Any]) -> None:
    env = environment(services["worker"])
    assert env["ANTHROPIC_API_KEY"] == "${ANTHROPIC_API_KEY:-}"
    assert "env_file" not in services["worker"]
    # Any other credential added later must be a pass-through of the same host variable too.
    for name, value in env.items():
        if re.search(r"KEY|TOKEN|SECRET|PASSWORD", name):
            assert re.fullmatch(r"\$\{" + name + r"(:?-)?\}", value), (name, value)
    assert not any("sk-ant" in value for value in env.values())
