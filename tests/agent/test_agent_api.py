"""The Python Agent API: every row of structured-input.md's API table, input
validation and copying, before_run, progress events."""

from __future__ import annotations

import asyncio
import base64
import sys
from pathlib import Path
from typing import Any

import pytest

from oma.activities.providers.anthropic import AnthropicProvider
from oma.activities.providers.scripted import ScriptedProvider
from oma.agent import Agent
from oma.core.schema.errors import InvalidHookError, InvalidMessageError
from oma.core.schema.messages import LLMMessage
from tests.support.anthropic_server import AnthropicServer
from tests.support.paths import ACP_AGENT

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-a-tiny-png-").decode()


def image(data: str = PNG) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def seeded_history() -> list[dict[str, Any]]:
    """Two earlier turns, as AgentConfig.history restores them."""
    return [
        {"role": "user", "content": [text("earlier")]},
        {"role": "assistant", "content": [text("noted")]},
    ]


def claude(anthropic_api: AnthropicServer, **config: Any) -> Agent:
    providers = {
        "anthropic": AnthropicProvider(api_key="sk-ant-test", base_url=anthropic_api.base_url),
        "scripted": ScriptedProvider(),
    }
    hooks = {k: config.pop(k) for k in ("before_run", "on_progress") if k in config}
    return Agent({"name": "vision", "model": "claude-test", **config}, providers=providers, **hooks)


def sent_messages(anthropic_api: AnthropicServer) -> list[Any]:
    return [r.body["messages"] for r in anthropic_api.requests]


async def test_run_with_a_string_sends_one_user_text_message(
    anthropic_api: AnthropicServer,
) -> None:
    anthropic_api.reply_text("Hello.")
    result = await claude(anthropic_api).run("Say hello.")
    assert (result.status, result.output) == ("completed", "Hello.")
    assert sent_messages(anthropic_api) == [[{"role": "user", "content": [text("Say hello.")]}]]


async def test_run_with_messages_sends_the_complete_conversation_with_the_image(
    anthropic_api: AnthropicServer,
) -> None:
    conversation = [
        {"role": "user", "content": [text("Keep answers concise.")]},
        {"role": "assistant", "content": [text("Understood.")]},
        {"role": "user", "content": [text("What is shown here?"), image()]},
    ]
    anthropic_api.reply_text("A tiny PNG.")
    result = await claude(anthropic_api).run(conversation)
    assert result.output == "A tiny PNG."
    assert sent_messages(anthropic_api) == [conversation]
    sent_image = anthropic_api.requests[0].body["messages"][2]["content"][1]["source"]["data"]
    assert base64.b64decode(sent_image) == base64.b64decode(PNG)


async def test_run_is_fresh_it_neither_reads_nor_updates_the_history(
    anthropic_api: AnthropicServer,
) -> None:
    seeded = seeded_history()
    agent = claude(anthropic_api, history=seeded)
    anthropic_api.reply_text("fresh")
    await agent.run("now")
    assert sent_messages(anthropic_api) == [[{"role": "user", "content": [text("now")]}]]
    assert [m.model_dump() for m in agent.get_history()] == seeded


async def test_prompt_appends_the_turn_and_the_answer_to_the_seeded_history(
    anthropic_api: AnthropicServer,
) -> None:
    seeded = seeded_history()
    agent = claude(anthropic_api, history=seeded)
    anthropic_api.reply_text("first answer")
    anthropic_api.reply_text("second answer")
    await agent.prompt("one")
    await agent.prompt([text("two"), image()])
    assert sent_messages(anthropic_api)[1] == [
        *seeded,
        {"role": "user", "content": [text("one")]},
        {"role": "assistant", "content": [text("first answer")]},
        {"role": "user", "content": [text("two"), image()]},
    ]
    assert len(agent.get_history()) == 6
    assert agent.get_history()[-1].model_dump() == {
        "role": "assistant",
        "content": [text("second answer")],
    }


async def test_invalid_prompt_input_is_not_appended_to_the_history(
    anthropic_api: AnthropicServer,
) -> None:
    agent = claude(anthropic_api)
    with pytest.raises(InvalidMessageError) as info:
        await agent.prompt([text("look"), image(data="not base64!")])
    assert "input[1].source.data" in info.value.message
    assert agent.get_history() == []
    assert anthropic_api.requests == []


async def test_get_history_returns_a_deep_copy(anthropic_api: AnthropicServer) -> None:
    agent = claude(anthropic_api)
    anthropic_api.reply_text("ok")
    await agent.prompt("hi")
    copy = agent.get_history()
    copy[0].content.clear()
    copy.append(LLMMessage(role="user", content=[]))
    assert [len(m.content) for m in agent.get_history()] == [1, 1]


async def test_invalid_messages_fail_before_the_hook_the_provider_and_any_progress(
    anthropic_api: AnthropicServer,
) -> None:
    seen: list[str] = []
    agent = claude(
        anthropic_api,
        before_run=lambda ctx: seen.append("hook"),
        on_progress=lambda e: seen.append(e.type),
    )
    bad = [
        {
            "role": "user",
            "content": [
                text("a"),
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/tiff", "data": PNG},
                },
            ],
        }
    ]
    with pytest.raises(InvalidMessageError) as info:
        await agent.run(bad)
    assert info.value.code == "INVALID_MESSAGE"
    assert "input[0].content[1].source.media_type" in info.value.message
    assert (seen, anthropic_api.requests) == ([], [])


async def test_stream_validates_when_called_before_iteration(
    anthropic_api: AnthropicServer,
) -> None:
    agent = claude(anthropic_api)
    with pytest.raises(InvalidMessageError):
        agent.stream([{"role": "user", "content": []}])


async def test_stream_yields_start_text_deltas_and_done(anthropic_api: AnthropicServer) -> None:
    anthropic_api.reply_text("streamed answer", pieces=3)
    events = [e async for e in claude(anthropic_api).stream("go")]
    assert events[0].type == "agent_start"
    assert events[0].payload == {"prompt": "go"}
    deltas = [e.text for e in events if e.type == "text_delta"]
    assert len(deltas) == 3 and "".join(deltas) == "streamed answer"
    assert events[-1].type == "done" and events[-1].result.output == "streamed answer"


async def test_stream_raises_what_the_before_run_hook_raised_instead_of_hanging(
    anthropic_api: AnthropicServer,
) -> None:
    def hook(ctx: Any) -> None:
        raise RuntimeError("the hook broke")

    stream = claude(anthropic_api, before_run=hook).stream("go")
    with pytest.raises(RuntimeError, match="the hook broke"):
        await asyncio.wait_for(anext(stream), timeout=5)
    assert anthropic_api.requests == []


async def test_mutating_the_callers_data_during_the_run_changes_nothing(
    anthropic_api: AnthropicServer,
) -> None:
    conversation = [{"role": "user", "content": [text("describe"), image()]}]

    def meddle(event: Any) -> None:  # the caller mutates its own data mid-run
        conversation[0]["content"][1]["source"]["data"] = base64.b64encode(b"other").decode()
        conversation[0]["content"].append(text("injected"))
        event.payload.clear()

    anthropic_api.reply_text("ok")
    await claude(anthropic_api, on_progress=meddle).run(conversation)
    assert sent_messages(anthropic_api) == [
        [{"role": "user", "content": [text("describe"), image()]}]
    ]


async def test_before_run_prompt_change_replaces_text_blocks_keeping_images_in_order(
    anthropic_api: AnthropicServer,
) -> None:
    seen: dict[str, Any] = {}

    def hook(ctx: Any) -> dict[str, Any]:
        seen["prompt"] = ctx.prompt
        return {"prompt": "NEW"}

    first, second = image(), image(base64.b64encode(b"second").decode())
    anthropic_api.reply_text("ok")
    await claude(anthropic_api, before_run=hook).run(
        [{"role": "user", "content": [text("A"), first, text("B"), second]}]
    )
    assert seen["prompt"] == "AB"
    assert sent_messages(anthropic_api) == [
        [{"role": "user", "content": [text("NEW"), first, second]}]
    ]


async def test_before_run_messages_replace_the_input_before_the_prompt_applies(
    anthropic_api: AnthropicServer,
) -> None:
    replaced = [{"role": "user", "content": [image(), text("old")]}]
    anthropic_api.reply_text("ok")
    await claude(
        anthropic_api, before_run=lambda ctx: {"messages": replaced, "prompt": "final"}
    ).run("x")
    assert sent_messages(anthropic_api) == [[{"role": "user", "content": [image(), text("final")]}]]


async def test_image_only_turn_has_an_empty_prompt(anthropic_api: AnthropicServer) -> None:
    prompts: list[str] = []
    anthropic_api.reply_text("a picture")
    await claude(anthropic_api, before_run=lambda ctx: prompts.append(ctx.prompt)).run(
        [{"role": "user", "content": [image()]}]
    )
    assert prompts == [""]


async def test_progress_payload_is_the_prompt_for_strings_and_messages_for_lists(
    anthropic_api: AnthropicServer,
) -> None:
    starts: list[dict[str, Any]] = []
    agent = claude(
        anthropic_api,
        on_progress=lambda e: starts.append(e.payload) if e.type == "agent_start" else None,
    )
    anthropic_api.reply_text("1")
    anthropic_api.reply_text("2")
    await agent.run("plain")
    await agent.run([{"role": "user", "content": [text("structured")]}])
    assert starts == [
        {"prompt": "plain"},
        {"messages": [{"role": "user", "content": [text("structured")]}]},
    ]


async def test_a_progress_callback_that_raises_does_not_fail_the_run(
    anthropic_api: AnthropicServer,
) -> None:
    def boom(event: Any) -> None:
        raise RuntimeError("callback bug")

    anthropic_api.reply_text("fine")
    assert (await claude(anthropic_api, on_progress=boom).run("go")).output == "fine"


async def test_provider_error_follows_the_normal_failure_path(
    anthropic_api: AnthropicServer,
) -> None:
    anthropic_api.reply_error(400, "image too large")
    result = await claude(anthropic_api).run([{"role": "user", "content": [image()]}])
    assert (result.status, result.error_code) == ("failed", "PROVIDER_ERROR")
    assert "image too large" in (result.error or "")


async def test_a_sampled_run_is_evaluated_in_process() -> None:
    evaluation = {"evaluator": "tests.support.hooks:output_length", "sample_rate": 1.0}
    agent = Agent(
        {"name": "a", "provider": "scripted", "script": ["four"], "evaluation": evaluation}
    )
    record = (await agent.run("go")).evaluation
    assert record is not None
    assert (record.sampled, record.score, record.label) == (True, 4.0, "length")


async def test_an_evaluator_that_cannot_be_loaded_is_raised_not_returned() -> None:
    evaluation = {"evaluator": "tests.nowhere:score"}
    agent = Agent({"name": "a", "provider": "scripted", "script": ["x"], "evaluation": evaluation})
    with pytest.raises(InvalidHookError) as info:
        await agent.run("go")
    assert "tests.nowhere" in info.value.message


def marker_process(tmp_path: Path, **backend: Any) -> Agent:
    marker = tmp_path / "spawned"
    code = f"import sys; open({str(marker)!r}, 'w'); print(sys.stdin.read())"
    return Agent(
        {
            "name": "proc",
            "backend": {"kind": "process", "command": "python3", "args": ["-c", code], **backend},
        }
    )


async def test_process_agent_rejects_messages_before_spawning(tmp_path: Path) -> None:
    agent = marker_process(tmp_path)
    with pytest.raises(InvalidMessageError):
        await agent.run([{"role": "user", "content": [text("hi")]}])
    with pytest.raises(InvalidMessageError):
        await agent.prompt([text("hi")])
    with pytest.raises(InvalidMessageError):
        agent.stream([{"role": "user", "content": [text("hi")]}])
    assert not (tmp_path / "spawned").exists()


async def test_process_agent_runs_a_string_and_its_hook_may_change_the_prompt(
    tmp_path: Path,
) -> None:
    agent = Agent(
        marker_process(tmp_path).config, before_run=lambda ctx: {"prompt": ctx.prompt.upper()}
    )
    result = await agent.run("hello")
    assert (result.status, result.output) == ("completed", "HELLO\n")


async def test_a_failed_process_is_a_failed_result_with_its_code_and_stderr() -> None:
    code = "import sys; sys.stderr.write('disk full'); sys.exit(3)"
    backend = {"kind": "process", "command": "python3", "args": ["-c", code]}
    result = await Agent({"name": "proc", "backend": backend}).run("go")
    assert (result.status, result.error_code, result.turns) == ("failed", "PROCESS_FAILED", 0)
    assert "exited with status 3" in (result.error or "")
    assert "disk full" in (result.error or "")


async def test_external_agent_hook_changing_messages_is_rejected(tmp_path: Path) -> None:
    agent = Agent(
        marker_process(tmp_path).config,
        before_run=lambda ctx: {"messages": [{"role": "user", "content": [text("other")]}]},
    )
    with pytest.raises(InvalidMessageError):
        await agent.run("hello")
    assert not (tmp_path / "spawned").exists()


def acp_agent(spawn_log: Path, **env: str) -> Agent:
    """The scriptable test ACP agent (tests/support/acp_agent.py), logging its spawns."""
    return Agent(
        {
            "name": "coder",
            "backend": {
                "kind": "acp",
                "command": sys.executable,
                "args": [str(ACP_AGENT)],
                "env": {"ACP_TEST_SPAWN_LOG": str(spawn_log), **env},
            },
        }
    )


async def test_acp_agent_rejects_messages_before_opening_a_session(tmp_path: Path) -> None:
    spawn_log = tmp_path / "spawn.log"
    agent = acp_agent(spawn_log)
    with pytest.raises(InvalidMessageError):
        await agent.run([{"role": "user", "content": [text("hi")]}])
    with pytest.raises(InvalidMessageError):
        await agent.prompt([text("hi")])
    assert not spawn_log.exists()


async def test_acp_agent_runs_a_string_in_one_session_across_prompts(tmp_path: Path) -> None:
    spawn_log = tmp_path / "spawn.log"
    script = '{"turns": [{"steps": [{"text": "one"}]}, {"steps": [{"text": "two"}]}]}'
    agent = acp_agent(spawn_log, ACP_TEST_SCRIPT=script)
    try:
        outputs = [(await agent.prompt("a")).output, (await agent.run("b")).output]
    finally:
        await agent.close()
    assert outputs == ["one", "two"]
    assert len(spawn_log.read_text().splitlines()) == 1
