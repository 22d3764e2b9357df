"""Where the worker's credentials may go: only to the origins its operator
allowed (``OMA_CREDENTIALS`` and the providers' own hosts), whatever a run
input says — the real ``openai``/``anthropic`` SDKs against the local API
servers, a real HTTP MCP endpoint, real runs on the dev server."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from oma.activities.providers.anthropic import AnthropicProvider
from oma.activities.providers.openai import OpenAIProvider
from oma.core.contracts.llm import LlmTurnInput
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.errors import CredentialNotAllowedError, CredentialsConfigError, ProviderError
from oma.core.schema.messages import user_text
from oma.runtime.credentials import CREDENTIALS_ENV, CredentialPolicy
from tests.support.anthropic_server import AnthropicServer
from tests.support.cli import oma_blocking
from tests.support.openai_server import OpenAIServer
from tests.support.runs import OPENAI_TEST_KEY, assert_replays, run_team, task

WORKER_KEY = "sk-proj-worker-key-0123456789abcdef"
TEMPORAL_KEY = "temporal-cloud-api-key-0123456789abcdef"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (CREDENTIALS_ENV, "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def stranger() -> Iterator[OpenAIServer]:
    """A Chat Completions server the worker's operator allowed nothing for."""
    with OpenAIServer() as server:
        yield server


@contextmanager
def silent_listener() -> Iterator[tuple[socket.socket, str]]:
    """A socket listening on 127.0.0.1 that never accepts, and its origin: a
    client that connects completes the handshake in the kernel's backlog, so
    ``connected(sock)`` tells whether anything reached it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


def connected(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def turn_input(**agent: object) -> LlmTurnInput:
    config = AgentConfig.model_validate(
        {"name": "writer", "provider": "openai", "model": "gpt-test", **agent}
    )
    return LlmTurnInput(agent=config, messages=[user_text("Hi")], turn=0)


async def refused(provider: OpenAIProvider, **agent: object) -> CredentialNotAllowedError:
    with pytest.raises(CredentialNotAllowedError) as caught:
        await provider.turn(turn_input(**agent))
    return caught.value


# -- the allow-list ---------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["https://api.openai.com/v1", "https://API.OpenAI.com/v1", "https://api.openai.com:443/v1"],
)
def test_a_providers_key_may_go_to_its_providers_own_host(url: str) -> None:
    CredentialPolicy.from_env({}).check("OPENAI_API_KEY", url, who="test")


@pytest.mark.parametrize(
    "url",
    [
        "http://api.openai.com/v1",  # plain HTTP: the key would cross the network in clear
        "https://api.openai.com:8443/v1",
        "https://api.openai.com./v1",  # a trailing dot is another name
        "https://api.openai.com@evil.example/v1",  # user@host: the host is evil.example
        "https://api.openai.com.evil.example/v1",
        "https://evil.example/api.openai.com/v1",
        "https://evil.example#@api.openai.com/v1",
        "https://\u0430pi.openai.com/v1",  # a Cyrillic a (U+0430): another IDNA name
        "https://\uff41pi.openai.com/v1",  # a full-width "a": not a host name at all
        "not a url",
    ],
)
def test_anything_but_the_exact_origin_is_refused(url: str) -> None:
    with pytest.raises(CredentialNotAllowedError, match="may not send OPENAI_API_KEY to"):
        CredentialPolicy.from_env({}).check("OPENAI_API_KEY", url, who="test")


def test_localhost_and_127_0_0_1_are_different_hosts() -> None:
    policy = CredentialPolicy.from_env({CREDENTIALS_ENV: "MY_KEY=http://localhost:8000"})

    policy.check("MY_KEY", "http://localhost:8000/v1", who="test")
    for url in ("http://127.0.0.1:8000/v1", "http://[::1]:8000/v1", "https://localhost:8000"):
        with pytest.raises(CredentialNotAllowedError):
            policy.check("MY_KEY", url, who="test")


def test_the_declaration_names_variables_and_their_origins() -> None:
    policy = CredentialPolicy.from_env(
        {
            CREDENTIALS_ENV: " OPENAI_API_KEY = openrouter.ai , http://localhost:11434 ;"
            "MCP_TOKEN=https://mcp.example.com:8443/\n",
            "OPENAI_BASE_URL": "http://vllm.internal:8000/v1",
        }
    )

    assert policy.origins() == {
        "ANTHROPIC_API_KEY": ["https://api.anthropic.com"],
        "MCP_TOKEN": ["https://mcp.example.com:8443"],
        "OPENAI_API_KEY": [
            "http://localhost:11434",
            "http://vllm.internal:8000",
            "https://api.openai.com",
            "https://openrouter.ai",  # a bare host is HTTPS
        ],
    }


@pytest.mark.parametrize(
    ("declaration", "error"),
    [
        ("MY_KEY", "'MY_KEY' is not VAR=origin"),
        ("MY_KEY=", "MY_KEY: give at least one origin"),
        ("1KEY=host.example", "'1KEY' is not an environment variable name"),
        ("MY_KEY=https://host.example/path", "'https://host.example/path' is not an origin"),
        ("MY_KEY=ftp://host.example", "'ftp://host.example' is not an origin"),
        ("MY_KEY=https://me@host.example", "'https://me@host.example' is not an origin"),
        ("MY_KEY=*.example.com", "'*.example.com' is not an origin"),
    ],
)
def test_a_malformed_declaration_is_a_setup_error(declaration: str, error: str) -> None:
    with pytest.raises(
        CredentialsConfigError, match=f"^CREDENTIALS_CONFIG_INVALID: {CREDENTIALS_ENV}"
    ):
        CredentialPolicy.from_env({CREDENTIALS_ENV: declaration})
    with pytest.raises(CredentialsConfigError) as caught:
        CredentialPolicy.from_env({CREDENTIALS_ENV: declaration})
    assert error in caught.value.message


def test_a_worker_with_a_malformed_declaration_does_not_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from oma.worker import Activities

    monkeypatch.setenv(CREDENTIALS_ENV, "MY_KEY=https://host.example/path")

    with pytest.raises(CredentialsConfigError):
        Activities(session_task_queue="q")


@pytest.mark.e2e
def test_oma_worker_with_a_malformed_declaration_exits_with_one_line() -> None:
    env = os.environ | {CREDENTIALS_ENV: "MY_KEY=mcp.example.com/mcp"}
    env["TEMPORAL_ADDRESS"] = "127.0.0.1:1"  # never reached: the declaration fails first

    done = oma_blocking("worker", env=env)

    assert done.returncode == 1
    assert done.stderr.startswith(
        f"error: CREDENTIALS_CONFIG_INVALID: {CREDENTIALS_ENV}: MY_KEY: 'mcp.example.com/mcp' "
        "is not an origin"
    )


# -- the openai provider, through the real SDK ---------------------------------------


async def test_the_default_key_never_reaches_a_base_url_the_worker_did_not_allow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", WORKER_KEY)

    with silent_listener() as (sock, origin):
        err = await refused(OpenAIProvider(), base_url=f"{origin}/v1")
        assert not connected(sock)

    assert err.message == (
        f"the openai provider may not send OPENAI_API_KEY to {origin}: the worker allows "
        "OPENAI_API_KEY only to https://api.openai.com, to its own base URL (OPENAI_BASE_URL) "
        f"and where {CREDENTIALS_ENV} says; to allow it, set {CREDENTIALS_ENV}="
        f"'OPENAI_API_KEY={origin}' in the worker's environment (docs/security.md)"
    )
    assert (err.code, err.retryable) == ("CREDENTIAL_NOT_ALLOWED", False)
    assert WORKER_KEY not in str(err)


async def test_an_adapters_own_key_goes_only_to_its_own_base_url(
    openai_api: OpenAIServer, stranger: OpenAIServer
) -> None:
    provider = OpenAIProvider(api_key=OPENAI_TEST_KEY, base_url=openai_api.base_url)

    await refused(provider, base_url=stranger.base_url)
    # the same server under another name is another host
    localhost = openai_api.base_url.replace("127.0.0.1", "localhost")
    await refused(provider, base_url=localhost)
    await provider.turn(turn_input(base_url=openai_api.base_url))

    assert stranger.requests == []
    (request,) = openai_api.requests
    assert request.headers["authorization"] == f"Bearer {OPENAI_TEST_KEY}"


async def test_a_worker_variable_no_one_allowed_is_refused_as_api_key_env(
    monkeypatch: pytest.MonkeyPatch, openai_api: OpenAIServer
) -> None:
    monkeypatch.setenv("TEMPORAL_API_KEY", TEMPORAL_KEY)
    provider = OpenAIProvider(api_key=OPENAI_TEST_KEY, base_url=openai_api.base_url)

    err = await refused(provider, api_key_env="TEMPORAL_API_KEY")

    assert err.message.startswith(
        f"the openai provider may not send TEMPORAL_API_KEY to {openai_api.origin}: the worker "
        "does not allow TEMPORAL_API_KEY to be sent anywhere; to allow it, set "
        f"{CREDENTIALS_ENV}='TEMPORAL_API_KEY={openai_api.origin}'"
    )
    assert TEMPORAL_KEY not in str(err)
    assert openai_api.requests == []


async def test_a_refused_variable_is_refused_whether_it_is_set_or_not(
    monkeypatch: pytest.MonkeyPatch, openai_api: OpenAIServer
) -> None:
    # MISSING_CREDENTIALS for an unset one would tell a run which variables the worker has
    monkeypatch.delenv("OMA_TEST_UNSET_SECRET", raising=False)
    provider = OpenAIProvider(api_key=OPENAI_TEST_KEY, base_url=openai_api.base_url)

    await refused(provider, api_key_env="OMA_TEST_UNSET_SECRET")


async def test_a_declared_variable_goes_to_its_declared_origin(
    monkeypatch: pytest.MonkeyPatch, openai_api: OpenAIServer, stranger: OpenAIServer
) -> None:
    monkeypatch.setenv("OMA_TEST_GROQ_KEY", "gsk_declared_key_0123456789")
    monkeypatch.setenv(CREDENTIALS_ENV, f"OMA_TEST_GROQ_KEY={stranger.origin}")
    provider = OpenAIProvider(api_key=OPENAI_TEST_KEY, base_url=openai_api.base_url)

    await provider.turn(turn_input(base_url=stranger.base_url, api_key_env="OMA_TEST_GROQ_KEY"))
    await refused(provider, api_key_env="OMA_TEST_GROQ_KEY")  # not to the adapter's server

    (request,) = stranger.requests
    assert request.headers["authorization"] == "Bearer gsk_declared_key_0123456789"
    assert openai_api.requests == []


async def test_a_key_at_an_allowed_server_does_not_follow_its_redirect(
    openai_api: OpenAIServer, stranger: OpenAIServer
) -> None:
    openai_api.reply_redirect(f"{stranger.base_url}/chat/completions")
    provider = OpenAIProvider(api_key=OPENAI_TEST_KEY, base_url=openai_api.base_url)

    with pytest.raises(ProviderError) as caught:
        await provider.turn(turn_input())

    assert (caught.value.status, caught.value.retryable) == (307, False)
    assert "a redirect to " in caught.value.message
    assert stranger.requests == []


async def test_the_anthropic_key_does_not_follow_a_redirect() -> None:
    with AnthropicServer() as api, AnthropicServer() as stranger:
        api.reply_redirect(f"{stranger.base_url}/v1/messages")
        provider = AnthropicProvider(api_key="sk-ant-worker-key-0123456789", base_url=api.base_url)

        with pytest.raises(ProviderError) as caught:
            await provider.turn(
                LlmTurnInput(agent=AgentConfig(name="writer"), messages=[user_text("Hi")], turn=0)
            )

        assert (caught.value.status, caught.value.retryable) == (307, False)
        assert "a redirect to " in caught.value.message
        assert stranger.requests == []


# -- real runs on the dev server -------------------------------------------------------


def gpt(**extra: Any) -> dict[str, Any]:
    return {"name": "gpt", "provider": "openai", "model": "gpt-test", **extra}


def team(agent: dict[str, Any]) -> dict[str, Any]:
    return {"team": {"name": "t", "agents": [agent]}, "tasks": [task("ask", agent["name"])]}


async def attempts(client: Client, workflow_id: str) -> list[int]:
    """The attempt each activity of task ``ask`` ended on (Temporal records a
    retried activity's last attempt only)."""
    child = await client.get_workflow_handle(f"{workflow_id}/ask").fetch_history()
    return [
        e.activity_task_started_event_attributes.attempt
        for e in child.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]


@pytest.mark.usefixtures("worker")
async def test_a_run_naming_another_base_url_fails_its_task_without_a_request(
    client: Client, workflow_id: str, openai_api: OpenAIServer, stranger: OpenAIServer
) -> None:
    result = await run_team(client, workflow_id, team(gpt(base_url=stranger.base_url)))

    failed = result.task("ask")
    assert (failed.status, failed.error_code) == ("failed", "CREDENTIAL_NOT_ALLOWED")
    assert f"may not send OPENAI_API_KEY to {stranger.origin}" in (failed.error or "")
    assert await attempts(client, workflow_id) == [1]  # not retried
    assert (stranger.requests, openai_api.requests) == ([], [])
    await assert_replays(client, workflow_id)


@pytest.mark.usefixtures("worker")
async def test_a_run_naming_temporal_api_key_fails_its_task_and_the_key_stays_out(
    client: Client, workflow_id: str, openai_api: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEMPORAL_API_KEY", TEMPORAL_KEY)

    result = await run_team(client, workflow_id, team(gpt(api_key_env="TEMPORAL_API_KEY")))

    failed = result.task("ask")
    assert (failed.status, failed.error_code) == ("failed", "CREDENTIAL_NOT_ALLOWED")
    assert openai_api.requests == []
    history = await client.get_workflow_handle(f"{workflow_id}/ask").fetch_history()
    assert TEMPORAL_KEY not in json.dumps(history.to_json_dict())
    await assert_replays(client, workflow_id)


# -- MCP headers -------------------------------------------------------------------


def mcp_agent(url: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "name": "clerk",
        "provider": "scripted",
        "script": ["ok"],
        "mcp_servers": [{"name": "web", "url": f"{url}/mcp", "headers": headers}],
    }


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize("declared", ["", "OMA_TEST_MCP_AUTH=http://localhost:{port}"])
async def test_an_mcp_header_not_allowed_for_its_url_fails_the_task_before_connecting(
    client: Client, workflow_id: str, monkeypatch: pytest.MonkeyPatch, declared: str
) -> None:
    monkeypatch.setenv("OMA_TEST_MCP_AUTH", "Bearer mcp-secret-0123456789")
    with silent_listener() as (sock, origin):
        port = sock.getsockname()[1]
        monkeypatch.setenv(CREDENTIALS_ENV, declared.format(port=port))
        agent = mcp_agent(origin, {"Authorization": "OMA_TEST_MCP_AUTH"})

        result = await run_team(client, workflow_id, team(agent))

        assert not connected(sock)
    failed = result.task("ask")
    assert (failed.status, failed.error_code) == ("failed", "CREDENTIAL_NOT_ALLOWED")
    assert (failed.error or "").startswith(
        f"MCP server 'web' may not send OMA_TEST_MCP_AUTH to {origin}: "
    )
    assert await attempts(client, workflow_id) == [1]  # the listing, not retried
    await assert_replays(client, workflow_id)


@pytest.mark.usefixtures("worker")
async def test_an_mcp_header_naming_temporal_api_key_is_refused_before_connecting(
    client: Client, workflow_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEMPORAL_API_KEY", TEMPORAL_KEY)
    with silent_listener() as (sock, origin):
        agent = mcp_agent(origin, {"Authorization": "TEMPORAL_API_KEY"})

        result = await run_team(client, workflow_id, team(agent))

        assert not connected(sock)
    assert result.task("ask").error_code == "CREDENTIAL_NOT_ALLOWED"
    await assert_replays(client, workflow_id)
