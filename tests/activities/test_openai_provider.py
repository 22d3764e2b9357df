"""``OpenAIProvider`` against a local Chat Completions API, through the real ``openai`` SDK,
directly and as the ``llm_turn`` of real runs on the dev server."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from oma.activities.providers.openai import OpenAIProvider
from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.agent_events import TextDelta, ToolCallEvent
from oma.core.schema.errors import InvalidMessageError, MissingCredentialsError, ProviderError
from oma.core.schema.messages import (
    Base64ImageSource,
    ImageBlock,
    LLMMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
    user_text,
)
from oma.core.schema.usage import TokenUsage
from tests.support.openai_server import OpenAIServer, ToolCallsReply
from tests.support.runs import OPENAI_TEST_KEY, agent_result, assert_replays, run_team, task

API_KEY = "sk-proj-test-key-0123456789"


@pytest.fixture
def openai_provider(openai_api: OpenAIServer) -> OpenAIProvider:
    return OpenAIProvider(api_key=API_KEY, base_url=openai_api.base_url)


def turn_input(*messages: LLMMessage, **agent: object) -> LlmTurnInput:
    config = AgentConfig.model_validate(
        {"name": "writer", "provider": "openai", "model": "gpt-test", **agent}
    )
    return LlmTurnInput(agent=config, messages=list(messages) or [user_text("Hi")], turn=0)


async def provider_error(openai_provider: OpenAIProvider) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await openai_provider.turn(turn_input())
    return caught.value


# -- one turn, directly ------------------------------------------------------------


async def test_text_answer_becomes_the_turn_output(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_api.reply_text("Hello there.", prompt_tokens=21, completion_tokens=4)

    out = await openai_provider.turn(turn_input(system_prompt="Be brief.", max_tokens=99))

    assert out == LlmTurnOutput(
        content=[TextBlock(text="Hello there.")],
        stop_reason="end_turn",
        usage=TokenUsage(input_tokens=21, output_tokens=4),
        model="gpt-test",
    )
    (request,) = openai_api.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "max_tokens": 99,  # not OpenAI's own host: the name compatible servers know
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_cached_prompt_tokens_are_cache_reads_not_input_tokens(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_api.reply_text("ok", prompt_tokens=1200, cached_tokens=1024, completion_tokens=7)

    out = await openai_provider.turn(turn_input())

    assert out.usage == TokenUsage(input_tokens=176, cache_read_input_tokens=1024, output_tokens=7)
    assert out.usage.total_tokens == 1207


@pytest.mark.parametrize(
    ("finish_reason", "stop_reason"),
    [("length", "max_tokens"), ("content_filter", "content_filter")],
)
async def test_finish_reason_maps_onto_stop_reason(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider, finish_reason: str, stop_reason: str
) -> None:
    openai_api.reply_text("cut", finish_reason=finish_reason)

    out = await openai_provider.turn(turn_input())

    assert out.stop_reason == stop_reason


async def test_text_deltas_and_tool_calls_reach_on_event_in_order(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    args = {"query": "temporal workflows", "filters": {"lang": ["en", "fr"]}}
    openai_api.reply(
        ToolCallsReply(
            (("call_a", "search", args), ("call_b", "grep", {"pattern": "x"})),
            text="Looking it up.",
            pieces=4,
        )
    )
    events: list[TextDelta | ToolCallEvent] = []

    out = await openai_provider.turn(turn_input(), on_event=events.append)

    sent = [c["choices"][0]["delta"] for c in openai_api.requests[0].chunks if c["choices"]]
    pieces = [d["content"] for d in sent if d.get("content")]
    assert len(pieces) == 4
    assert sum(len(d.get("tool_calls", [])) for d in sent) == 8  # arguments in pieces
    assert events == [
        *(TextDelta(text=p) for p in pieces),
        ToolCallEvent(id="call_a", name="search", input=args),
        ToolCallEvent(id="call_b", name="grep", input={"pattern": "x"}),
    ]
    assert out.stop_reason == "tool_use"
    assert out.content == [
        TextBlock(text="Looking it up."),
        ToolUseBlock(id="call_a", name="search", input=args),
        ToolUseBlock(id="call_b", name="grep", input={"pattern": "x"}),
    ]


async def test_tool_calls_with_finish_reason_stop_still_ask_for_tools(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    # some Ollama versions end a tool-calling answer with "stop"
    openai_api.reply(
        ToolCallsReply((("call_1", "glob", {"pattern": "*.py"}),), finish_reason="stop")
    )

    out = await openai_provider.turn(turn_input())

    assert out.stop_reason == "tool_use"


async def test_tool_arguments_that_are_not_json_fail_the_turn(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_api.reply_tool_call("search", '{"query": "unterminated')

    err = await provider_error(openai_provider)

    assert (err.error_type, err.retryable) == ("invalid_tool_arguments", False)
    assert "tool 'search'" in err.message


async def test_conversation_maps_onto_chat_completions_messages(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    png = bytes(range(256)) * 4
    data = base64.b64encode(png).decode()
    messages = [
        LLMMessage(
            role="user",
            content=[
                TextBlock(text="What is in these?"),
                ImageBlock(source=Base64ImageSource(media_type="image/png", data=data)),
                ImageBlock(source=URLImageSource(url="https://example.com/a.png?v=1&s=2")),
            ],
        ),
        LLMMessage(
            role="assistant",
            content=[
                TextBlock(text="Let me look."),
                ToolUseBlock(id="call_1", name="file_read", input={"path": "a.txt"}),
                ToolUseBlock(id="call_2", name="glob", input={}),
            ],
        ),
        LLMMessage(
            role="user",
            content=[
                ToolResultBlock(tool_use_id="call_1", content=[TextBlock(text="hello")]),
                ToolResultBlock(tool_use_id="call_2", content="pattern missing", is_error=True),
                TextBlock(text="And now?"),
            ],
        ),
        LLMMessage(role="assistant", content=[ToolUseBlock(id="call_3", name="glob")]),
        LLMMessage(role="user", content=[ToolResultBlock(tool_use_id="call_3", content="")]),
    ]

    await openai_provider.turn(turn_input(*messages))

    sent = openai_api.requests[0].body["messages"]
    assert sent == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png?v=1&s=2"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "file_read", "arguments": '{"path": "a.txt"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "glob", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: pattern missing"},
        {"role": "user", "content": "And now?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_3",
                    "type": "function",
                    "function": {"name": "glob", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_3", "content": ""},
    ]
    url = sent[0]["content"][1]["image_url"]["url"]
    assert base64.b64decode(url.removeprefix("data:image/png;base64,")) == png


async def test_an_image_in_a_tool_result_is_refused_before_any_request(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    image = ImageBlock(source=URLImageSource(url="https://example.com/shot.png"))
    messages = [
        user_text("Take a screenshot."),
        LLMMessage(role="assistant", content=[ToolUseBlock(id="call_1", name="shot")]),
        LLMMessage(
            role="user",
            content=[ToolResultBlock(tool_use_id="call_1", content=[TextBlock(text="ok"), image])],
        ),
    ]

    with pytest.raises(InvalidMessageError, match=r"messages\[2\]: the tool_result for 'call_1'"):
        await openai_provider.turn(turn_input(*messages))
    assert openai_api.requests == []


async def test_tools_are_sent_as_function_tools(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    await openai_provider.turn(turn_input(tools=["tests.support.tools:explode", "glob"]))

    tools = openai_api.requests[0].body["tools"]
    assert [t["type"] for t in tools] == ["function", "function"]
    explode = next(t["function"] for t in tools if t["function"]["name"] == "explode")
    assert explode["description"] == "Always fails, saying why."
    assert explode["parameters"]["required"] == ["reason"]


async def test_rate_limit_is_retryable_and_carries_retry_after_and_request_id(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_api.reply_error(
        429,
        "Rate limit reached for gpt-test.",
        code="rate_limit_exceeded",
        headers={"retry-after-ms": "1500", "x-request-id": "req_429"},
    )

    err = await provider_error(openai_provider)

    assert (err.error_type, err.status, err.retryable, err.retry_after_s, err.request_id) == (
        "rate_limit_exceeded",
        429,
        True,
        1.5,
        "req_429",
    )


@pytest.mark.parametrize("status", [500, 503])
async def test_server_errors_are_retryable(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider, status: int
) -> None:
    openai_api.reply_error(status, "The server had an error", headers={"retry-after": "2"})

    err = await provider_error(openai_provider)

    assert (err.status, err.retryable, err.retry_after_s) == (status, True, 2.0)


async def test_bad_request_is_not_retryable_and_carries_the_api_message(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_api.reply_error(400, "Invalid 'messages[1].content': string too long.")

    err = await provider_error(openai_provider)

    assert (err.status, err.retryable, err.error_type) == (400, False, "invalid_request_error")
    assert err.message == (
        f"Chat Completions API at {openai_api.base_url}/chat/completions answered HTTP 400 "
        "invalid_request_error: Invalid 'messages[1].content': string too long."
    )


async def test_an_error_echoing_the_key_is_redacted(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_api.reply_error(401, f"Incorrect API key provided: {API_KEY}.")

    err = await provider_error(openai_provider)

    assert (err.status, err.retryable) == (401, False)
    assert API_KEY not in str(err)
    assert "Incorrect API key provided: [redacted]." in err.message


async def test_an_error_sent_mid_stream_is_retryable(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_api.reply_error(500, "The model crashed.", mid_stream=True)

    err = await provider_error(openai_provider)

    assert (err.status, err.retryable, err.error_type) == (None, True, "server_error")
    assert err.message.endswith("sent an error mid-stream (server_error): The model crashed.")


async def test_a_stream_chunk_that_is_not_json_is_a_retryable_provider_error(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_api.reply_malformed("{not json")

    err = await provider_error(openai_provider)

    assert (err.status, err.retryable, err.error_type) == (None, True, "malformed_stream")
    assert err.message == (
        f"the Chat Completions API at {openai_api.base_url} sent a stream chunk that is not "
        "JSON: '{not json'"
    )


async def test_a_malformed_chunk_echoing_the_key_is_redacted(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_api.reply_malformed(f"key={API_KEY} {{")

    err = await provider_error(openai_provider)

    assert API_KEY not in str(err)
    assert "[redacted]" in err.message


@pytest.mark.parametrize("data", ['{"choices": "x"}', "[1, 2]", '{"choices": [{"delta": 7}]}'])
async def test_a_stream_chunk_of_another_shape_is_a_retryable_provider_error(
    openai_api: OpenAIServer, openai_provider: OpenAIProvider, data: str
) -> None:
    openai_api.reply_malformed(data)

    err = await provider_error(openai_provider)

    assert (err.status, err.retryable, err.error_type) == (None, True, "malformed_stream")
    assert err.message.startswith(
        f"the Chat Completions API at {openai_api.base_url} sent a stream chunk it cannot read ("
    )


async def test_a_named_api_key_env_is_read_from_the_worker_environment(
    monkeypatch: pytest.MonkeyPatch, openai_api: OpenAIServer
) -> None:
    monkeypatch.setenv("OMA_TEST_GROQ_KEY", "gsk_from_the_environment_0123")
    monkeypatch.setenv("OMA_CREDENTIALS", f"OMA_TEST_GROQ_KEY={openai_api.origin}")

    await OpenAIProvider().turn(
        turn_input(base_url=openai_api.base_url, api_key_env="OMA_TEST_GROQ_KEY")
    )

    assert openai_api.requests[0].headers["authorization"] == "Bearer gsk_from_the_environment_0123"


async def test_a_named_api_key_env_that_is_unset_is_missing_credentials(
    monkeypatch: pytest.MonkeyPatch, openai_api: OpenAIServer, openai_provider: OpenAIProvider
) -> None:
    monkeypatch.delenv("OMA_TEST_UNSET_KEY", raising=False)
    monkeypatch.setenv("OMA_CREDENTIALS", f"OMA_TEST_UNSET_KEY={openai_api.origin}")

    with pytest.raises(MissingCredentialsError, match="set OMA_TEST_UNSET_KEY"):
        await openai_provider.turn(turn_input(api_key_env="OMA_TEST_UNSET_KEY"))
    assert openai_api.requests == []


async def test_no_key_at_openai_is_missing_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    with pytest.raises(MissingCredentialsError, match="set OPENAI_API_KEY in the worker's"):
        await OpenAIProvider().turn(turn_input())


async def test_a_local_server_is_called_without_a_key_and_without_authorization(
    monkeypatch: pytest.MonkeyPatch, openai_api: OpenAIServer
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", openai_api.base_url)
    openai_api.reply_text("from llama")

    out = await OpenAIProvider().turn(turn_input(model="llama3.2"))

    assert out.content == [TextBlock(text="from llama")]
    assert "authorization" not in openai_api.requests[0].headers


async def test_max_tokens_is_max_completion_tokens_at_openai() -> None:
    from oma.activities.providers.openai import _request

    request = _request(turn_input(max_tokens=50), at_openai=True)

    assert (request["max_completion_tokens"], "max_tokens" in request) == (50, False)


# -- config -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["sk-proj-abcdefghijklmnop0123", "gsk_0123456789abcdefghij", "a1b2c3d4" * 5]
)
def test_an_api_key_given_as_api_key_env_is_refused_without_repeating_it(value: str) -> None:
    with pytest.raises(ValueError, match="api_key_env looks like an API key") as caught:
        AgentConfig(name="a", provider="openai", model="m", api_key_env=value)
    message = caught.value.errors()[0]["msg"]  # type: ignore[attr-defined]
    assert value not in message


def test_base_url_is_for_the_openai_provider_only() -> None:
    with pytest.raises(ValueError, match="base_url applies to provider 'openai' only"):
        AgentConfig(name="a", provider="anthropic", base_url="http://localhost:11434/v1")


def test_an_openai_agent_names_its_model() -> None:
    with pytest.raises(ValueError, match="which has no default model"):
        AgentConfig(name="a", provider="openai")


# -- real runs on the dev server ----------------------------------------------------


def gpt(name: str = "gpt", **extra: Any) -> dict[str, Any]:
    return {"name": name, "provider": "openai", "model": "gpt-test", **extra}


def team(*agents: dict[str, Any], **run: Any) -> dict[str, Any]:
    return {"team": {"name": "t", "agents": list(agents)}, **run}


@pytest.mark.usefixtures("worker")
async def test_a_tool_loop_of_two_turns_runs_through_a_team_run(
    client: Client, workflow_id: str, openai_api: OpenAIServer, tmp_path: Path
) -> None:
    (tmp_path / "a.py").write_text("print('hi')\n")
    openai_api.reply_tool_call("grep", {"pattern": "print"}, id="call_a", text="Looking.")
    openai_api.reply_text("a.py prints hi", prompt_tokens=40, cached_tokens=30, completion_tokens=5)
    agent = gpt(tools=["readonly"], cwd=str(tmp_path))

    result = await run_team(client, workflow_id, team(agent, tasks=[task("ask", "gpt")]))

    assert (result.task("ask").status, result.task("ask").output) == ("completed", "a.py prints hi")
    first, second = openai_api.requests
    assert first.headers["authorization"] == f"Bearer {OPENAI_TEST_KEY}"
    assert {t["function"]["name"] for t in first.body["tools"]} == {"file_read", "glob", "grep"}
    assert second.body["messages"][-2:] == [
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "grep", "arguments": json.dumps({"pattern": "print"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "a.py:1:print('hi')"},
    ]
    run = await agent_result(client, workflow_id, "ask")
    assert [c.name for c in run.tool_calls] == ["grep"]
    assert run.token_usage.cache_read_input_tokens == 30
    assert run.token_usage.input_tokens == 10 + 10
    await assert_replays(client, workflow_id)


@pytest.mark.usefixtures("worker")
async def test_a_rate_limited_turn_is_retried_by_temporal_then_succeeds(
    client: Client, workflow_id: str, openai_api: OpenAIServer
) -> None:
    openai_api.reply_error(429, "slow down", headers={"retry-after-ms": "100"})
    openai_api.reply_text("second time lucky")

    result = await run_team(client, workflow_id, team(gpt(), tasks=[task("ask", "gpt")]))

    assert result.task("ask").output == "second time lucky"
    assert len(openai_api.requests) == 2
    child = await client.get_workflow_handle(f"{workflow_id}/ask").fetch_history()
    [started] = [
        e for e in child.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert started.activity_task_started_event_attributes.attempt == 2
    await assert_replays(client, workflow_id)


@pytest.mark.usefixtures("worker")
async def test_a_bad_request_fails_the_task_with_the_providers_message(
    client: Client, workflow_id: str, openai_api: OpenAIServer
) -> None:
    openai_api.reply_error(400, "model 'gpt-test' does not support tools")

    result = await run_team(client, workflow_id, team(gpt(), tasks=[task("ask", "gpt")]))

    failed = result.task("ask")
    assert (failed.status, failed.error_code) == ("failed", "PROVIDER_ERROR")
    assert "HTTP 400 invalid_request_error: model 'gpt-test' does not support tools" in (
        failed.error or ""
    )
    assert len(openai_api.requests) == 1
    await assert_replays(client, workflow_id)


@pytest.mark.usefixtures("worker")
async def test_a_missing_key_fails_the_task_naming_the_variable(
    client: Client, workflow_id: str, openai_api: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMA_TEST_MISSING_KEY", raising=False)
    monkeypatch.setenv("OMA_CREDENTIALS", f"OMA_TEST_MISSING_KEY={openai_api.origin}")
    agent = gpt(api_key_env="OMA_TEST_MISSING_KEY")

    result = await run_team(client, workflow_id, team(agent, tasks=[task("ask", "gpt")]))

    failed = result.task("ask")
    assert (failed.status, failed.error_code) == ("failed", "MISSING_CREDENTIALS")
    assert "set OMA_TEST_MISSING_KEY" in (failed.error or "")
    assert openai_api.requests == []
    await assert_replays(client, workflow_id)


@pytest.mark.usefixtures("worker")
async def test_an_openai_coordinator_plans_and_synthesizes_at_the_agents_endpoint(
    client: Client, workflow_id: str, openai_api: OpenAIServer
) -> None:
    plan = [{"title": "Greet", "description": "Say hi.", "assignee": "gpt"}]
    openai_api.reply_text(json.dumps(plan))
    openai_api.reply_text("hi")
    openai_api.reply_text("The team said hi.")

    result = await run_team(
        client, workflow_id, team(gpt(base_url=openai_api.base_url), goal="Greet")
    )

    assert result.final_output == "The team said hi."
    assert [r.body["model"] for r in openai_api.requests] == ["gpt-test"] * 3
    await assert_replays(client, workflow_id)


# -- the in-process Agent -----------------------------------------------------------


async def test_the_in_process_agent_streams_an_openai_answer_with_default_adapters(
    monkeypatch: pytest.MonkeyPatch, openai_api: OpenAIServer
) -> None:
    from oma import Agent

    monkeypatch.setenv("OMA_TEST_AGENT_KEY", "sk-agent-test-key-0123456789")
    monkeypatch.setenv("OMA_CREDENTIALS", f"OMA_TEST_AGENT_KEY={openai_api.origin}")
    openai_api.reply_text("one two three", pieces=3)
    agent = Agent(gpt(base_url=openai_api.base_url, api_key_env="OMA_TEST_AGENT_KEY"))

    events = [e async for e in agent.stream("go")]

    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == ["one t", "wo th", "ree"]
    assert openai_api.requests[0].headers["authorization"] == "Bearer sk-agent-test-key-0123456789"
