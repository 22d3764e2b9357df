"""The before_run hook contract (oma/before_run.py; the reference's "beforeRun semantics")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from oma.core.schema.before_run import BeforeRunContext, apply_before_run, load_hook
from oma.core.schema.errors import InvalidHookError, InvalidMessageError
from oma.core.schema.message_guard import latest_user_prompt, validate_messages
from oma.core.schema.messages import (
    Base64ImageSource,
    ImageBlock,
    LLMMessage,
    TextBlock,
    URLImageSource,
    user_text,
)
from tests.support.paths import TESTS

IMAGE_1 = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
IMAGE_2 = ImageBlock(source=URLImageSource(url="https://example.com/2.png"))


def context(*messages: LLMMessage) -> BeforeRunContext:
    checked = validate_messages(list(messages))
    return BeforeRunContext(agent="vision", messages=checked, prompt=latest_user_prompt(checked))


def user(*content: Any) -> LLMMessage:
    return LLMMessage(role="user", content=list(content))


def assistant(*content: Any) -> LLMMessage:
    return LLMMessage(role="assistant", content=list(content))


def text(t: str) -> TextBlock:
    return TextBlock(text=t)


# --- prompt and messages --------------------------------------------------------


async def test_a_hook_returning_none_changes_nothing() -> None:
    ctx = context(user(text("a")))

    assert await apply_before_run(lambda c: None, ctx, external=False) == [user_text("a")]


async def test_a_prompt_change_replaces_interleaved_text_blocks_with_one() -> None:
    ctx = context(user(text("A"), IMAGE_1, text("B"), IMAGE_2))

    messages = await apply_before_run(lambda c: {"prompt": "NEW"}, ctx, external=False)

    assert messages == [user(text("NEW"), IMAGE_1, IMAGE_2)]


async def test_the_new_text_takes_the_place_of_the_first_text_block() -> None:
    ctx = context(user(IMAGE_1, text("A"), IMAGE_2, text("B")))

    messages = await apply_before_run(lambda c: {"prompt": "NEW"}, ctx, external=False)

    assert messages == [user(IMAGE_1, text("NEW"), IMAGE_2)]


async def test_an_image_only_turn_has_an_empty_prompt() -> None:
    seen: list[str] = []
    ctx = context(user(text("old")), assistant(text("ok")), user(IMAGE_1))

    await apply_before_run(lambda c: seen.append(c.prompt), ctx, external=False)

    assert seen == [""]


async def test_a_prompt_for_an_image_only_turn_goes_first() -> None:
    ctx = context(user(IMAGE_1, IMAGE_2))

    messages = await apply_before_run(lambda c: {"prompt": "Describe both."}, ctx, external=False)

    assert messages == [user(text("Describe both."), IMAGE_1, IMAGE_2)]


async def test_only_the_latest_user_message_gets_the_prompt() -> None:
    ctx = context(user(text("first")), assistant(text("ok")), user(text("second")))

    messages = await apply_before_run(lambda c: {"prompt": "NEW"}, ctx, external=False)

    assert messages == [user(text("first")), assistant(text("ok")), user(text("NEW"))]


async def test_returned_messages_replace_the_complete_input() -> None:
    ctx = context(user(text("a")), assistant(text("b")), user(text("c")))

    messages = await apply_before_run(
        lambda c: {"messages": [user_text("only this")]}, ctx, external=False
    )

    assert messages == [user_text("only this")]


async def test_messages_are_replaced_before_the_prompt_is_applied() -> None:
    ctx = context(user(text("original")))

    def hook(c: BeforeRunContext) -> dict[str, Any]:
        new = [user(text("x"), IMAGE_1), assistant(text("y")), user(IMAGE_2, text("old text"))]
        return {"messages": new, "prompt": "NEW"}

    messages = await apply_before_run(hook, ctx, external=False)

    assert messages == [user(text("x"), IMAGE_1), assistant(text("y")), user(IMAGE_2, text("NEW"))]


async def test_new_messages_with_the_unchanged_prompt_keep_their_own_text() -> None:
    ctx = context(user(text("original")))

    def hook(c: BeforeRunContext) -> BeforeRunContext:
        return c.model_copy(update={"messages": [user_text("replaced")]})

    assert await apply_before_run(hook, ctx, external=False) == [user_text("replaced")]


async def test_a_returned_context_with_an_edited_prompt_is_applied() -> None:
    ctx = context(user(text("a"), IMAGE_1))

    def hook(c: BeforeRunContext) -> BeforeRunContext:
        c.prompt = "b"
        return c

    assert await apply_before_run(hook, ctx, external=False) == [user(text("b"), IMAGE_1)]


async def test_an_async_hook_is_awaited() -> None:
    ctx = context(user(text("a")))

    async def hook(c: BeforeRunContext) -> dict[str, Any]:
        return {"prompt": c.prompt.upper()}

    assert await apply_before_run(hook, ctx, external=False) == [user_text("A")]


async def test_returned_messages_are_validated_with_their_path() -> None:
    ctx = context(user(text("a")))
    bad = [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "x"}}]}]

    with pytest.raises(InvalidMessageError) as err:
        await apply_before_run(lambda c: {"messages": bad}, ctx, external=False)

    assert err.value.message == (
        "before_run.messages[0].content[0].source.url: should be an http or https URL, got 'x'"
    )


async def test_a_returned_value_of_another_kind_is_rejected() -> None:
    ctx = context(user(text("a")))

    with pytest.raises(InvalidMessageError) as err:
        await apply_before_run(lambda c: "new prompt", ctx, external=False)  # type: ignore[arg-type,return-value]

    assert err.value.message == (
        "before_run: a hook returns None, a BeforeRunContext or a dict with messages and/or "
        "prompt, got str"
    )


async def test_an_unknown_key_in_the_returned_dict_is_rejected() -> None:
    ctx = context(user(text("a")))

    with pytest.raises(InvalidMessageError) as err:
        await apply_before_run(lambda c: {"system": "be brief"}, ctx, external=False)

    assert err.value.message == (
        "before_run: unknown key 'system'; a hook returns messages and/or prompt"
    )


async def test_a_prompt_that_is_not_a_string_is_rejected() -> None:
    ctx = context(user(text("a")))

    with pytest.raises(InvalidMessageError) as err:
        await apply_before_run(lambda c: {"prompt": ["a"]}, ctx, external=False)

    assert err.value.message == "before_run.prompt: should be a string, got list"


# --- copies ---------------------------------------------------------------------


async def test_a_hook_editing_its_copy_does_not_reach_the_callers_messages() -> None:
    ctx = context(user(text("a"), IMAGE_1))
    before = ctx.model_copy(deep=True)

    def hook(c: BeforeRunContext) -> None:
        c.messages[0].content.append(text("injected"))
        c.messages[0].content[1].source.media_type = "image/gif"  # type: ignore[union-attr]
        c.messages.append(assistant(text("x")))
        c.prompt = "edited"

    messages = await apply_before_run(hook, ctx, external=False)

    assert ctx == before
    assert messages == before.messages


async def test_messages_the_hook_keeps_do_not_reach_the_run() -> None:
    kept: list[LLMMessage] = []
    ctx = context(user(text("a")))

    def hook(c: BeforeRunContext) -> dict[str, Any]:
        kept.extend(c.messages)
        return {"messages": kept}

    messages = await apply_before_run(hook, ctx, external=False)
    kept[0].content[0] = text("changed later")

    assert messages == [user_text("a")]


async def test_the_result_shares_nothing_with_the_context() -> None:
    ctx = context(user(text("a")))

    messages = await apply_before_run(lambda c: None, ctx, external=False)
    messages[0].content.append(text("b"))

    assert ctx.messages == [user_text("a")]


# --- external agents ------------------------------------------------------------


async def test_an_external_agents_hook_may_change_the_prompt() -> None:
    ctx = context(user(text("a")))

    messages = await apply_before_run(lambda c: {"prompt": "b"}, ctx, external=True)

    assert messages == [user_text("b")]


async def test_an_external_agents_hook_may_return_the_unchanged_messages() -> None:
    ctx = context(user(text("a")))

    def hook(c: BeforeRunContext) -> dict[str, Any]:
        return {"messages": c.messages, "prompt": "b"}

    assert await apply_before_run(hook, ctx, external=True) == [user_text("b")]


async def test_an_external_agents_hook_may_not_change_messages() -> None:
    ctx = context(user(text("a")))

    with pytest.raises(InvalidMessageError) as err:
        await apply_before_run(lambda c: {"messages": [user_text("b")]}, ctx, external=True)

    assert err.value.message == (
        "before_run.messages: agent 'vision' is external (a text prompt transport); an "
        "external agent's before_run may change prompt, not messages"
    )


# --- load_hook ------------------------------------------------------------------


def shout(ctx: BeforeRunContext) -> dict[str, Any]:
    return {"prompt": ctx.prompt.upper()}


NOT_CALLABLE = 42


def test_load_hook_imports_the_function() -> None:
    assert load_hook("tests.core.test_before_run:shout") is shout


def test_load_hook_imports_once() -> None:
    assert load_hook("json:dumps") is load_hook("json:dumps")


@pytest.mark.parametrize(
    "path", ["tests.core.test_before_run", "mod:", ":f", "a-b:f", "m:f.g", "m:f:g"]
)
def test_a_malformed_hook_path_is_rejected(path: str) -> None:
    with pytest.raises(InvalidHookError) as err:
        load_hook(path)

    assert err.value.code == "INVALID_HOOK"
    assert err.value.message == f"hook {path!r} should look like 'package.module:function'"


def test_a_missing_module_is_named_with_where_the_worker_looked_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installation = (sys.prefix, sys.base_prefix, sys.exec_prefix)
    installed = [p for p in sys.path if p and p.startswith(installation)]
    monkeypatch.setattr(sys, "path", [str(tmp_path), "", *installed])
    with pytest.raises(InvalidHookError) as err:
        load_hook("oma_no_such_package.hooks:f")

    assert err.value.message == (
        "hook 'oma_no_such_package.hooks:f': no module named 'oma_no_such_package' on this "
        f"worker, which looked in {tmp_path}, the working directory, the installed packages; "
        "start the worker (`oma run`, `oma dev`, `oma worker`) in the directory that holds "
        "'oma_no_such_package', or name that directory with --path DIR or OMA_PATH (or install "
        "it as a package)"
    )


def test_a_missing_module_of_a_package_names_where_the_package_is() -> None:
    with pytest.raises(InvalidHookError) as err:
        load_hook("tests.no_such_module:f")

    assert err.value.message == (
        "hook 'tests.no_such_module:f': no module named 'tests.no_such_module' on this worker "
        f"(package 'tests' is in {TESTS})"
    )


def test_a_missing_attribute_is_named() -> None:
    with pytest.raises(InvalidHookError) as err:
        load_hook("tests.core.test_before_run:whisper")

    assert err.value.message == (
        "hook 'tests.core.test_before_run:whisper': module 'tests.core.test_before_run' has no "
        "attribute 'whisper'"
    )


def test_an_attribute_that_is_not_callable_is_rejected() -> None:
    with pytest.raises(InvalidHookError) as err:
        load_hook("tests.core.test_before_run:NOT_CALLABLE")

    assert err.value.message == (
        "hook 'tests.core.test_before_run:NOT_CALLABLE': 'NOT_CALLABLE' is a int, not a callable"
    )


def test_a_module_that_fails_to_import_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "oma_broken_hooks.py").write_text("raise RuntimeError('no config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    with pytest.raises(InvalidHookError) as err:
        load_hook("oma_broken_hooks:f")

    assert err.value.message == (
        "hook 'oma_broken_hooks:f': importing 'oma_broken_hooks' failed: RuntimeError: no config"
    )


def test_a_missing_dependency_of_the_module_is_not_mistaken_for_the_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "oma_needy_hooks.py").write_text("import oma_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    with pytest.raises(InvalidHookError) as err:
        load_hook("oma_needy_hooks:f")

    assert err.value.message == (
        "hook 'oma_needy_hooks:f': importing 'oma_needy_hooks' failed: "
        "No module named 'oma_no_such_dependency'"
    )
