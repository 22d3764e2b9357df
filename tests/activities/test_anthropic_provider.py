"""``AnthropicProvider`` against a local Messages API, through the real ``anthropic`` SDK."""

from __future__ import annotations

import base64
import itertools
import json
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from temporalio.testing import ActivityEnvironment

from oma.activities._heartbeat import PROGRESS_HEARTBEAT_GAP_S
from oma.activities.providers import anthropic as anthropic_provider
from oma.activities.providers.anthropic import AnthropicProvider
from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.agent_events import TextDelta, ToolCallEvent
from oma.core.schema.errors import MissingCredentialsError, ProviderError
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
from tests.support.anthropic_server import AnthropicServer

API_KEY = "sk-ant-test-key-0123456789"


@pytest.fixture(scope="module")
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as srv:
        yield srv


@pytest.fixture
def api(server: AnthropicServer) -> AnthropicServer:
    server.reset()
    return server


@pytest.fixture
def provider(api: AnthropicServer) -> AnthropicProvider:
    return AnthropicProvider(api_key=API_KEY, base_url=api.base_url)


def turn_input(*messages: LLMMessage, **agent: object) -> LlmTurnInput:
    config = AgentConfig.model_validate({"name": "writer", **agent})
    return LlmTurnInput(agent=config, messages=list(messages) or [user_text("Hi")], turn=0)


async def provider_error(provider: AnthropicProvider) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await provider.turn(turn_input())
    return caught.value


async def test_text_reply_becomes_the_turn_output(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    api.reply_text("Hello there.", stop_reason="max_tokens", input_tokens=21, output_tokens=4)

    out = await provider.turn(turn_input(model="claude-test-1"))

    assert out == LlmTurnOutput(
        content=[TextBlock(text="Hello there.")],
        stop_reason="max_tokens",
        usage=TokenUsage(input_tokens=21, output_tokens=4),
        model="claude-test-1",
    )


async def test_request_body_uses_the_messages_api_fields(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    messages = [
        user_text("Plan it."),
        LLMMessage(
            role="assistant",
            content=[ToolUseBlock(id="toolu_9", name="search", input={"q": "dag"})],
        ),
    ]

    await provider.turn(
        turn_input(
            *messages,
            model="claude-test-1",
            system_prompt="You plan.",
            max_tokens=321,
        )
    )

    (request,) = api.requests
    assert request.path == "/v1/messages"
    assert request.body == {
        "model": "claude-test-1",
        "max_tokens": 321,
        "system": "You plan.",
        "stream": True,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Plan it."}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_9", "name": "search", "input": {"q": "dag"}}
                ],
            },
        ],
    }


async def test_defaults_send_4096_max_tokens_and_no_system(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    await provider.turn(turn_input())

    body = api.requests[0].body
    assert (body["model"], body["max_tokens"]) == ("claude-sonnet-4-6", 4096)
    assert "system" not in body


async def test_api_key_is_sent_in_a_header_not_the_body(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    await provider.turn(turn_input())

    (request,) = api.requests
    # anthropic SDK 2.x sends the key as a bearer token, not as x-api-key.
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert API_KEY not in json.dumps(request.body)


async def test_tool_use_input_streamed_in_pieces_is_joined_and_parsed(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    tool_input = {"query": "temporal workflows", "limit": 3, "filters": {"lang": ["en", "fr"]}}
    api.reply_tool_use("search", tool_input, id="toolu_42", text="Looking.", pieces=4)

    out = await provider.turn(turn_input())

    pieces = [
        data["delta"]["partial_json"]
        for name, data in api.requests[0].events
        if name == "content_block_delta" and data["delta"]["type"] == "input_json_delta"
    ]
    assert len(pieces) == 4
    assert out.stop_reason == "tool_use"
    assert out.content == [
        TextBlock(text="Looking."),
        ToolUseBlock(id="toolu_42", name="search", input=tool_input),
    ]


async def test_base64_image_reaches_the_api_byte_identical(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    png = bytes(range(256)) * 4
    data = base64.b64encode(png).decode()
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data=data))

    await provider.turn(turn_input(LLMMessage(role="user", content=[image, TextBlock(text="?")])))

    sent = api.requests[0].body["messages"][0]["content"][0]
    assert sent == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": data},
    }
    assert base64.b64decode(sent["source"]["data"]) == png


async def test_rate_limit_is_retryable_and_carries_retry_after(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    api.reply_error(
        429, "Rate limited.", headers={"retry-after-ms": "1500", "request-id": "req_429"}
    )

    err = await provider_error(provider)

    assert (err.error_type, err.status, err.retryable, err.retry_after_s, err.request_id) == (
        "rate_limit_error",
        429,
        True,
        1.5,
        "req_429",
    )


async def test_retry_after_seconds_header_is_used_without_retry_after_ms(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    api.reply_error(429, "Rate limited.", headers={"retry-after": "7"})

    err = await provider_error(provider)

    assert err.retry_after_s == 7.0


@pytest.mark.parametrize("status", [500, 529])
async def test_server_errors_are_retryable(
    api: AnthropicServer, provider: AnthropicProvider, status: int
) -> None:
    api.reply_error(status, "Overloaded" if status == 529 else "Internal server error")

    err = await provider_error(provider)

    assert (err.status, err.retryable, err.retry_after_s) == (status, True, None)


async def test_bad_request_is_not_retryable_and_carries_the_api_message(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    api.reply_error(400, "messages: roles must alternate between user and assistant")

    err = await provider_error(provider)

    assert (err.status, err.retryable) == (400, False)
    assert err.message == (
        "Anthropic Messages API answered HTTP 400 invalid_request_error: "
        "messages: roles must alternate between user and assistant"
    )


async def test_authentication_error_is_not_retryable(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    api.reply_error(401, "invalid x-api-key")

    err = await provider_error(provider)

    assert (err.status, err.retryable) == (401, False)
    assert API_KEY not in str(err)


async def test_overload_error_event_mid_stream_is_retryable(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    api.reply_error(529, "Overloaded", mid_stream=True)

    err = await provider_error(provider)

    assert (err.status, err.retryable) == (529, True)
    assert err.message == (
        "Anthropic Messages API sent an error event mid-stream (overloaded_error): Overloaded"
    )


async def test_a_stream_event_that_is_not_json_is_a_retryable_provider_error(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    api.reply_malformed("{not json")

    err = await provider_error(provider)

    assert (err.status, err.retryable, err.error_type) == (None, True, "malformed_stream")
    assert err.message == (
        f"the Anthropic Messages API at {api.base_url} sent a stream event that is not "
        "JSON: '{not json'"
    )


async def test_a_stream_event_out_of_place_is_a_retryable_provider_error(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    # a delta for a block the stream never started
    delta = {
        "type": "content_block_delta",
        "index": 3,
        "delta": {"type": "text_delta", "text": "x"},
    }
    api.reply_malformed(json.dumps(delta), event_name="content_block_delta")

    err = await provider_error(provider)

    assert (err.status, err.retryable, err.error_type) == (None, True, "malformed_stream")
    assert err.message.startswith(
        f"the Anthropic Messages API at {api.base_url} sent a stream event it cannot "
        "read (IndexError: "
    )


async def test_read_timeout_mid_stream_is_retryable_without_status(
    monkeypatch: pytest.MonkeyPatch, api: AnthropicServer
) -> None:
    monkeypatch.setattr(anthropic_provider, "TIMEOUT", anthropic.Timeout(0.1, connect=1.0))
    provider = AnthropicProvider(api_key=API_KEY, base_url=api.base_url)
    api.reply_text("slow", delay_s=0.3)

    err = await provider_error(provider)

    assert (err.status, err.retryable) == (None, True)
    assert err.message.startswith("timed out talking to the Anthropic Messages API")


async def test_connection_refused_is_retryable_without_status() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    provider = AnthropicProvider(api_key=API_KEY, base_url=f"http://127.0.0.1:{closed_port}")

    err = await provider_error(provider)

    assert (err.error_type, err.status, err.retryable, err.request_id) == (None, None, True, None)
    assert err.message.startswith(
        f"could not reach the Anthropic Messages API at http://127.0.0.1:{closed_port}"
    )


async def test_missing_api_key_raises_missing_credentials(
    monkeypatch: pytest.MonkeyPatch, api: AnthropicServer
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = AnthropicProvider(base_url=api.base_url)

    with pytest.raises(MissingCredentialsError, match="set ANTHROPIC_API_KEY in the worker's"):
        await provider.turn(turn_input())
    assert api.requests == []


async def test_key_and_base_url_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, api: AnthropicServer
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
    api.reply_text("from env")

    out = await AnthropicProvider().turn(turn_input())

    assert out.content == [TextBlock(text="from env")]


async def test_streaming_inside_an_activity_heartbeats_the_latest_text_at_most_every_gap(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    # 13 events 0.1 s apart (about 1.2 s): two text deltas to a heartbeat gap
    api.reply_text("one two three four five six seven eight", pieces=8, delay_s=0.1)
    env = ActivityEnvironment()
    beats: list[tuple[float, Any]] = []
    env.on_heartbeat = lambda *details: beats.append((time.monotonic(), details[0]))

    out = await env.run(provider.turn, turn_input())
    ended = time.monotonic()

    assert out.content == [TextBlock(text="one two three four five six seven eight")]
    gap = PROGRESS_HEARTBEAT_GAP_S
    interval = anthropic_provider.HEARTBEAT_INTERVAL_S
    times = [at for at, _ in beats]
    # the first at once, before the request reached the API, with no text yet
    assert times and times[0] < api.requests[0].received_at
    assert beats[0][1] == {"output_chars": 0, "last_text": ""}
    # then as the text streams: never sooner than the gap (deltas came twice as
    # often), never a whole idle interval apart (a late timer on a busy machine
    # is not a bug, so no tighter bound)
    gaps = [b - a for a, b in itertools.pairwise([*times, ended])]
    assert all(gap * 0.9 <= g for g in gaps[:-1]), gaps
    assert all(g < 2 * interval for g in gaps), gaps
    # each carries the text so far (a prefix of the answer), growing
    texts = [details["last_text"] for _, details in beats]
    assert all("one two three four five six seven eight".startswith(t) for t in texts), texts
    assert texts == sorted(texts, key=len)
    assert len(set(texts)) > 3, texts


def sent_deltas(api: AnthropicServer, delta_type: str, field: str) -> list[str]:
    """The ``field`` of every ``content_block_delta`` of ``delta_type`` the server sent."""
    return [
        data["delta"][field]
        for name, data in api.requests[0].events
        if name == "content_block_delta" and data["delta"]["type"] == delta_type
    ]


async def test_text_deltas_reach_on_event_in_order_and_join_to_the_answer(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    api.reply_text("one two three four", pieces=4)
    events: list[TextDelta | ToolCallEvent] = []

    out = await provider.turn(turn_input(), on_event=events.append)

    pieces = sent_deltas(api, "text_delta", "text")
    assert len(pieces) == 4
    assert events == [TextDelta(text=piece) for piece in pieces]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "one two three four"
    assert out.content == [TextBlock(text="one two three four")]


async def test_tool_use_in_json_pieces_yields_one_tool_call_event_with_parsed_input(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    tool_input = {"query": "temporal workflows", "limit": 3, "filters": {"lang": ["en", "fr"]}}
    api.reply_tool_use("search", tool_input, id="toolu_42", text="Looking.", pieces=5)
    events: list[TextDelta | ToolCallEvent] = []

    await provider.turn(turn_input(), on_event=events.append)

    assert len(sent_deltas(api, "input_json_delta", "partial_json")) == 5
    assert events == [TextDelta(text=piece) for piece in sent_deltas(api, "text_delta", "text")] + [
        ToolCallEvent(id="toolu_42", name="search", input=tool_input)
    ]


async def test_mutating_a_tool_call_event_leaves_the_turn_output_unchanged(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    api.reply_tool_use("search", {"filters": {"lang": ["en"]}}, id="toolu_7")

    def vandalize(event: TextDelta | ToolCallEvent) -> None:
        if isinstance(event, ToolCallEvent):
            event.input["filters"]["lang"].append("xx")
            event.input["extra"] = True

    out = await provider.turn(turn_input(), on_event=vandalize)

    assert out.content == [
        ToolUseBlock(id="toolu_7", name="search", input={"filters": {"lang": ["en"]}})
    ]


async def test_failing_on_event_does_not_fail_the_turn_and_still_gets_later_events(
    api: AnthropicServer, provider: AnthropicProvider, caplog: pytest.LogCaptureFixture
) -> None:
    api.reply_text("abc", pieces=3)
    received: list[str] = []

    def flaky(event: TextDelta | ToolCallEvent) -> None:
        assert isinstance(event, TextDelta)
        received.append(event.text)
        raise RuntimeError("progress sink is down")

    with caplog.at_level(logging.DEBUG, logger=anthropic_provider.__name__):
        out = await provider.turn(turn_input(), on_event=flaky)

    assert out.content == [TextBlock(text="abc")]
    assert received == ["a", "b", "c"]
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in errors] == ["a progress callback failed on a text_delta event"]


async def test_image_messages_reach_the_api_exactly(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    jpeg = bytes(range(256)) * 64 + b"\xff\xd9"
    data = base64.b64encode(jpeg).decode()
    messages = [
        LLMMessage(
            role="user",
            content=[
                TextBlock(text="Compare these."),
                ImageBlock(source=Base64ImageSource(media_type="image/jpeg", data=data)),
                ImageBlock(source=URLImageSource(url="https://example.com/a.png?v=1&s=2")),
            ],
        ),
        LLMMessage(role="assistant", content=[TextBlock(text="The first is darker.")]),
        LLMMessage(
            role="user",
            content=[ImageBlock(source=URLImageSource(url="https://example.com/b.webp"))],
        ),
    ]

    await provider.turn(turn_input(*messages))

    sent = api.requests[0].body["messages"]
    assert sent == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare these."},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": data},
                },
                {
                    "type": "image",
                    "source": {"type": "url", "url": "https://example.com/a.png?v=1&s=2"},
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "The first is darker."}]},
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "url", "url": "https://example.com/b.webp"}}
            ],
        },
    ]
    assert base64.b64decode(sent[0]["content"][1]["source"]["data"]) == jpeg


# -- prompt caching -----------------------------------------------------------


def tool_loop_turn() -> LlmTurnInput:
    """Turn 2 of a tool loop: the model asked for file_read, the result came back."""
    return turn_input(
        user_text("Read notes.txt."),
        LLMMessage(
            role="assistant",
            content=[ToolUseBlock(id="toolu_1", name="file_read", input={"path": "notes.txt"})],
        ),
        LLMMessage(
            role="user",
            content=[ToolResultBlock(tool_use_id="toolu_1", content="1\thello")],
        ),
        system_prompt="You read files.",
        tools=["file_read", "grep"],
    )


async def test_a_tool_loop_turn_caches_the_system_prompt_and_the_conversation(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    await provider.turn(tool_loop_turn())

    body = api.requests[0].body
    breakpoint_ = {"type": "ephemeral"}
    assert body["system"] == [
        {"type": "text", "text": "You read files.", "cache_control": breakpoint_}
    ]
    assert "cache_control" not in body["tools"][-1]  # the system's breakpoint covers the tools
    assert body["messages"][-1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "1\thello",
            "is_error": False,
            "cache_control": breakpoint_,
        }
    ]
    earlier = [block for message in body["messages"][:-1] for block in message["content"]]
    assert all("cache_control" not in block for block in earlier)


async def test_without_a_system_prompt_the_last_tool_carries_the_breakpoint(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    await provider.turn(turn_input(tools=["file_read", "grep"]))

    body = api.requests[0].body
    assert "system" not in body
    assert [tool.get("cache_control") for tool in body["tools"]] == [None, {"type": "ephemeral"}]
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_an_agent_without_tools_sends_no_breakpoint_unless_asked(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    await provider.turn(turn_input(system_prompt="Be brief."))
    await provider.turn(turn_input(system_prompt="Be brief.", prompt_caching=True))

    plain, asked = (request.body for request in api.requests)
    assert plain["system"] == "Be brief."
    assert "cache_control" not in json.dumps(plain)
    assert asked["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert asked["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_prompt_caching_false_turns_the_breakpoints_off(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    turn = tool_loop_turn()
    turn.agent.prompt_caching = False

    await provider.turn(turn)

    body = api.requests[0].body
    assert body["system"] == "You read files."
    assert "cache_control" not in json.dumps(body)


async def test_a_turn_reports_the_cache_reads_and_writes_the_server_returns(
    api: AnthropicServer, provider: AnthropicProvider
) -> None:
    api.reply_text(
        "Done.",
        input_tokens=7,
        output_tokens=3,
        cache_creation_input_tokens=40,
        cache_read_input_tokens=1500,
    )

    out = await provider.turn(tool_loop_turn())

    assert out.usage == TokenUsage(
        input_tokens=7,
        output_tokens=3,
        cache_creation_input_tokens=40,
        cache_read_input_tokens=1500,
    )
    assert out.usage.total_tokens == 7 + 3 + 40 + 1500
