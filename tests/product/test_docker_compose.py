"""The docker-compose deployment's invariants: what must hold between
docker-compose.yml, the Dockerfile, the examples, the code and the docs for
`docker compose up` to give a cluster the README's commands run on, whose
workers keep large payloads in the ``minio`` service's bucket.

No container engine is needed: the files are parsed (tests/support/compose.py,
tests/support/image.py) and the one-shot service's command runs against the dev
server. tests/product/test_worker_image.py runs the worker itself.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
import uuid
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from oma.core.contracts.visibility import SEARCH_ATTRIBUTES
from oma.runtime.connection import DEFAULT_NAMESPACE, DEFAULT_TASK_QUEUE
from oma.runtime.dev_server import (
    BUFFERED_EVENTS,
    BUFFERED_EVENTS_BYTES,
    EVENTS_CACHE_BYTES,
    DevServer,
    temporal_binary,
)
from oma.runtime.payload_store import PayloadStore
from tests.support import compose as _compose
from tests.support.image import Dockerfile, Layout, build_layout
from tests.support.paths import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
SECURITY_DOC = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

ONE_SHOT = "search-attributes"
"""The service that registers the search attributes, then exits."""


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return _compose.load()


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = compose["services"]
    return result


@pytest.fixture(scope="module")
def image_files(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """The image's files (its COPY and RUN steps, no install)."""
    return build_layout(tmp_path_factory.mktemp("image") / "app")


def env_of(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as compose passes it, from a host that sets nothing."""
    return {k: _compose.interpolate(v, {}) for k, v in _compose.environment(service).items()}


def examples() -> list[tuple[str, dict[str, Any]]]:
    """Every agent of every example run input, as (file name, agent)."""
    found = []
    for path in sorted((ROOT / "examples").glob("*.json")):
        for agent in json.loads(path.read_text())["team"]["agents"]:
            found.append((path.name, agent))
    return found


def working_directories(agent: dict[str, Any]) -> list[str]:
    """The ``cwd``s an agent's tools, backend and MCP servers run in."""
    places = [agent, agent.get("backend") or {}, *agent.get("mcp_servers", [])]
    return [p["cwd"] for p in places if p.get("cwd")]


# -- the wiring between services ------------------------------------------------


def test_every_service_a_service_names_exists(services: dict[str, Any]) -> None:
    for name, service in services.items():
        env = env_of(service)
        named = set(_compose.depends_on(service))
        named |= {env[k].partition(":")[0] for k in ("TEMPORAL_ADDRESS",) if k in env}
        named |= {env[k] for k in ("POSTGRES_SEEDS",) if k in env}
        assert named <= set(services), (name, named - set(services))


def test_every_temporal_address_is_the_servers_published_grpc_port(
    services: dict[str, Any],
) -> None:
    # the host's clients use the same port (README: TEMPORAL_ADDRESS=localhost:7233)
    for service in services.values():
        address = env_of(service).get("TEMPORAL_ADDRESS")
        if address:
            host, _, port = address.partition(":")
            assert (int(port), int(port)) in _compose.published_ports(services[host])
            assert f"TEMPORAL_ADDRESS=localhost:{port}" in README


def test_the_web_ui_is_published_where_the_readme_says(services: dict[str, Any]) -> None:
    [(host_port, _)] = _compose.published_ports(services["temporal-ui"])
    assert re.search(rf"the Web UI\s+\(port {host_port}\)", README)


def test_temporal_logs_in_to_postgres_with_its_credentials(services: dict[str, Any]) -> None:
    temporal, postgres = env_of(services["temporal"]), env_of(services["postgres"])
    assert temporal["DB"] == "postgres12"  # auto-setup's name for PostgreSQL 12+
    assert temporal["DB_PORT"] == "5432"  # auto-setup's own default is MySQL's 3306
    assert temporal["POSTGRES_USER"] == postgres["POSTGRES_USER"]
    assert temporal["POSTGRES_PWD"] == postgres["POSTGRES_PASSWORD"]


def test_the_server_has_the_embedded_servers_settings_for_wide_runs(
    services: dict[str, Any],
) -> None:
    # auto-setup reads DYNAMIC_CONFIG_FILE_PATH relative to its /etc/temporal
    temporal = services["temporal"]
    path = PurePosixPath("/etc/temporal") / env_of(temporal)["DYNAMIC_CONFIG_FILE_PATH"]
    [mounted] = [v for v in _compose.volumes(temporal, {}) if PurePosixPath(v.target) == path]
    assert mounted.read_only
    settings = yaml.safe_load((ROOT / mounted.source).read_text(encoding="utf-8"))
    values = {key: [entry["value"] for entry in entries] for key, entries in settings.items()}
    assert values == {
        "history.eventsCacheMaxSizeBytes": [EVENTS_CACHE_BYTES],
        "history.maximumBufferedEventsBatch": [BUFFERED_EVENTS],
        "history.maximumBufferedEventsSizeInBytes": [BUFFERED_EVENTS_BYTES],
    }
    for key, value in values.items():  # and the dev server is started with them
        assert f"{key}={value[0]}" in DevServer().command()


def test_a_service_waits_for_the_health_or_the_end_of_what_it_needs(
    services: dict[str, Any],
) -> None:
    # the server needs its database, the workers a namespace that has the attributes
    assert _compose.depends_on(services["temporal"]) == {"postgres": "service_healthy"}
    assert _compose.depends_on(services["worker"]) == {
        "temporal": "service_healthy",
        ONE_SHOT: "service_completed_successfully",
    }
    for service in services.values():
        for name, condition in _compose.depends_on(service).items():
            if condition == "service_healthy":
                assert "healthcheck" in services[name], name
            if condition == "service_completed_successfully":
                assert services[name]["restart"] == "no", name


def test_long_running_services_come_back_and_the_one_shot_does_not(
    services: dict[str, Any],
) -> None:
    for name, service in services.items():
        assert service["restart"] == ("no" if name == ONE_SHOT else "unless-stopped"), name


def test_every_image_is_pinned(services: dict[str, Any]) -> None:
    # a restart never upgrades the server (and its schema) behind our back
    for name, service in services.items():
        if "image" in service and "build" not in service:
            _, _, tag = service["image"].partition(":")
            assert tag and tag != "latest", name


def test_named_volumes_are_declared_and_keep_the_database(compose: dict[str, Any]) -> None:
    for service in compose["services"].values():
        for volume in _compose.volumes(service, {}):
            if volume.named:
                assert volume.source in compose["volumes"], volume
    [data] = _compose.volumes(compose["services"]["postgres"], {})
    assert (data.named, data.target) == (True, "/var/lib/postgresql/data")


def test_no_credential_is_written_into_the_file(services: dict[str, Any]) -> None:
    worker = services["worker"]
    assert "env_file" not in worker
    # the worker's credentials are passed through from the host, never given a value
    for name, value in _compose.environment(worker).items():
        if re.search(r"KEY|TOKEN|SECRET|PASSWORD", name):
            assert re.fullmatch(r"\$\{" + name + r"(:?-)?\}", value), (name, value)
    assert "ANTHROPIC_API_KEY" in _compose.environment(worker)
    assert "sk-ant" not in _compose.COMPOSE_FILE.read_text()


# -- the payload store -----------------------------------------------------------


def test_the_workers_store_is_the_bucket_the_minio_service_makes(
    services: dict[str, Any],
) -> None:
    store = PayloadStore.parse(env_of(services["worker"])["OMA_PAYLOAD_STORE"])
    # the bucket is a directory of minio's drive, made before the server starts on it
    [script] = [part for part in services["minio"]["entrypoint"] if "minio server" in part]
    setup, _, server = script.partition("exec minio server ")
    drive = server.split()[0]
    assert re.search(rf"\bmkdir -p {re.escape(f'{drive}/{store.bucket}')}(\s|$)", setup), script
    # on a named volume: stored payloads live as long as the histories that refer to them
    [data] = _compose.volumes(services["minio"], {})
    assert (data.named, data.target) == (True, drive)
    # the workers reach it by its service name, the host's clients on the port it publishes
    endpoint = urlsplit(env_of(services["worker"])["AWS_ENDPOINT_URL"])
    assert (endpoint.scheme, endpoint.hostname) == ("http", "minio")
    assert (endpoint.port, endpoint.port) in _compose.published_ports(services["minio"])
    assert f"AWS_ENDPOINT_URL=http://localhost:{endpoint.port}" in SECURITY_DOC


def test_the_workers_s3_key_is_minios_own_and_comes_from_the_host(
    services: dict[str, Any],
) -> None:
    worker = _compose.environment(services["worker"])
    minio = _compose.environment(services["minio"])
    host = {"AWS_ACCESS_KEY_ID": "oma", "AWS_SECRET_ACCESS_KEY": "s3cret-key"}
    for key, root in (
        ("AWS_ACCESS_KEY_ID", "MINIO_ROOT_USER"),
        ("AWS_SECRET_ACCESS_KEY", "MINIO_ROOT_PASSWORD"),
    ):
        # the host's one variable in both, and no value of the file's own when it is unset
        assert _compose.interpolate(worker[key], host) == host[key], key
        assert _compose.interpolate(minio[root], host) == host[key], root
        assert _compose.interpolate(worker[key], {}) == "", key
        assert _compose.interpolate(minio[root], {}) == "", root


# -- the search attributes ------------------------------------------------------


def test_the_one_shot_registers_every_search_attribute_in_the_workers_namespace(
    services: dict[str, Any],
) -> None:
    one_shot, worker = env_of(services[ONE_SHOT]), env_of(services["worker"])
    assert one_shot["OMA_SEARCH_ATTRIBUTES"].split() == list(SEARCH_ATTRIBUTES)
    assert set(SEARCH_ATTRIBUTES.values()) == {"Keyword"}  # the command's --type
    for name in ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE"):
        assert one_shot[name] == worker[name]
    # its CLI is the server's own
    assert services[ONE_SHOT]["image"] == services["temporal"]["image"]


def one_shot_command(services: dict[str, Any]) -> list[str]:
    """The one-shot's entrypoint and command, interpolated as compose does."""
    service = services[ONE_SHOT]
    return [
        _compose.interpolate(part, {}) for part in [*service["entrypoint"], *service["command"]]
    ]


async def test_the_one_shot_command_registers_them_and_may_run_again(
    services: dict[str, Any], dev_server: DevServer, tmp_path: Path
) -> None:
    namespace = f"oma-compose-{uuid.uuid4().hex[:8]}"
    temporal = [temporal_binary(), "--address", dev_server.address]
    created = subprocess.run(
        [*temporal, "operator", "namespace", "create", "--namespace", namespace],
        capture_output=True,
        text=True,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    # the server image's PATH has `temporal`; here the venv's does
    env = {
        **env_of(services[ONE_SHOT]),
        "PATH": f"{Path(temporal_binary()).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TEMPORAL_ADDRESS": dev_server.address,
        "TEMPORAL_NAMESPACE": namespace,
    }
    for _ in range(2):  # every `docker compose up` runs it
        ran = subprocess.run(
            one_shot_command(services), env=env, capture_output=True, text=True, check=False
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr

    listed = subprocess.run(
        [*temporal, "operator", "search-attribute", "list", "--namespace", namespace, "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    custom = json.loads(listed.stdout)["customAttributes"]
    registered = {name: kind.removeprefix("INDEXED_VALUE_TYPE_") for name, kind in custom.items()}
    assert registered == {name: kind.upper() for name, kind in SEARCH_ATTRIBUTES.items()}


# -- the worker image -----------------------------------------------------------


def test_the_worker_is_built_from_the_dockerfile_under_the_name_derived_images_use(
    services: dict[str, Any],
) -> None:
    worker = services["worker"]
    assert worker["build"] == {"context": ".", "dockerfile": "Dockerfile"}
    assert f"FROM {worker['image']}\n" in README


def test_the_image_runs_a_python_the_project_supports() -> None:
    base = Dockerfile.read().base
    version = re.fullmatch(r"python:(3\.\d+)-slim", base)
    assert version, base
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"
    assert tuple(map(int, version[1].split("."))) >= (3, 11)


def test_the_image_cmd_is_the_oma_worker_as_an_unprivileged_user() -> None:
    dockerfile = Dockerfile.read()
    # `oma worker`: OMA_PATH on the import path, SIGTERM handled (test_worker_image.py)
    assert dockerfile.cmd == ["oma", "worker"]
    assert "oma" in PYPROJECT["project"]["scripts"]
    assert dockerfile.user not in (None, "root", "0")


def test_the_image_holds_what_the_package_build_needs(image_files: Layout) -> None:
    # pyproject's readme, and what the symlinks under oma/ point at (the layers outside it)
    assert (image_files.local(PYPROJECT["project"]["readme"])).is_file()
    for link in (ROOT / "oma").iterdir():
        if link.is_symlink():
            assert image_files.local(f"oma/{link.name}").resolve().exists(), link.name


def test_every_path_the_examples_agents_use_is_in_the_image_and_writable(
    services: dict[str, Any], image_files: Layout
) -> None:
    user = image_files.dockerfile.user
    shared = {PurePosixPath(v.target) for v in _compose.volumes(services["worker"], {}) if v.named}
    for example, agent in examples():
        for cwd in working_directories(agent):
            # relative to the worker's working directory (the image's WORKDIR)
            image_path = PurePosixPath(image_files.dockerfile.workdir / cwd)
            assert image_files.local(cwd).is_dir(), (example, cwd)
            assert image_files.owner(cwd) == user, (example, cwd)
            # one volume for every worker: a task reads what the task before wrote
            assert image_path in shared, (example, cwd)
            backend = agent.get("backend") or {}
            for arg in backend.get("args", []):
                if arg.endswith(".py"):
                    assert (image_files.local(cwd) / arg).is_file(), (example, arg)


def test_the_team_directory_is_on_the_workers_import_path_and_mounted(
    services: dict[str, Any], image_files: Layout
) -> None:
    team = image_files.dockerfile.env["OMA_PATH"]
    assert image_files.local(team).is_dir()  # an OMA_PATH entry that is not a directory stops it
    [mount] = [v for v in _compose.volumes(services["worker"], {}) if v.target == team]
    assert (mount.named, mount.read_only) == (False, True)
    # by default the examples' own team code, whose package the tool example names
    default = ROOT / mount.source
    for _, agent in examples():
        for path in [*[t for t in agent.get("tools", []) if ":" in t], agent.get("before_run")]:
            if path:
                module = path.partition(":")[0].replace(".", "/")
                assert (default / f"{module}.py").is_file(), path
    # OMA_TEAM_DIR names another
    mounts = _compose.volumes(services["worker"], {"OMA_TEAM_DIR": "/srv/team"})
    assert [v.source for v in mounts if v.target == team] == ["/srv/team"]


def test_the_worker_serves_what_a_client_uses_by_default(services: dict[str, Any]) -> None:
    env = env_of(services["worker"])
    assert env["TEMPORAL_NAMESPACE"] == DEFAULT_NAMESPACE
    assert env["OMA_TASK_QUEUE"] == DEFAULT_TASK_QUEUE
