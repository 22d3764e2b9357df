"""The message shape guard (oma/core/schema/message_guard.py; the behaviour:
docs/structured-input.md)."""

from __future__ import annotations

from typing import Any

import pytest

from oma.core.schema.errors import InvalidMessageError
from oma.core.schema.message_guard import (
    latest_user_prompt,
    to_messages,
    validate_content_blocks,
    validate_messages,
)
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

PNG = "iVBORw0KGgo="  # the 8-byte PNG signature


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def image(media_type: str = "image/png", data: str = PNG) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def tool_use(id: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "search", "input": input}


def tool_result(tool_use_id: str, content: Any = "found") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}


def user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(content)}


def assistant(*content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


def error_of(value: object) -> str:
    with pytest.raises(InvalidMessageError) as err:
        validate_messages(value)
    assert err.value.code == "INVALID_MESSAGE"
    return err.value.message


# --- shapes -------------------------------------------------------------------


def test_a_conversation_becomes_llm_messages() -> None:
    messages = validate_messages(
        [user(text("Hi")), assistant(text("Hello")), user(text("What is this?"), image())]
    )

    assert messages == [
        LLMMessage(role="user", content=[TextBlock(text="Hi")]),
        LLMMessage(role="assistant", content=[TextBlock(text="Hello")]),
        LLMMessage(
            role="user",
            content=[
                TextBlock(text="What is this?"),
                ImageBlock(source=Base64ImageSource(media_type="image/png", data=PNG)),
            ],
        ),
    ]


def test_model_instances_and_dicts_mix() -> None:
    messages = validate_messages(
        [LLMMessage(role="user", content=[TextBlock(text="a")]), user(TextBlock(text="b"))]
    )

    assert messages == [user_text("a"), user_text("b")]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("hi", "input: should be a list of messages, got str", id="not-a-list"),
        pytest.param(
            (user(text("a")),), "input: should be a list of messages, got tuple", id="tuple"
        ),
        pytest.param([], "input: should hold at least one message", id="empty-list"),
        pytest.param(
            [user(text("a")), "hi"],
            "input[1]: should be a message object with role and content, got str",
            id="message-not-an-object",
        ),
        pytest.param([{"content": [text("a")]}], "input[0].role: Field required", id="no-role"),
        pytest.param(
            [{"role": "system", "content": [text("a")]}],
            "input[0].role: should be 'user' or 'assistant', got 'system'",
            id="bad-role",
        ),
        pytest.param([{"role": "user"}], "input[0].content: Field required", id="no-content"),
        pytest.param(
            [{"role": "user", "content": "hi"}],
            "input[0].content: should be a list of content blocks, got str",
            id="content-not-a-list",
        ),
        pytest.param(
            [user()], "input[0].content: should hold at least one content block", id="no-blocks"
        ),
        pytest.param(
            [{"role": "user", "content": [text("a")], "name": "bob"}],
            "input[0].name: Extra inputs are not permitted",
            id="extra-message-field",
        ),
        pytest.param(
            [user(text("a"), "b")],
            "input[0].content[1]: should be a content block object, got str",
            id="block-not-an-object",
        ),
        pytest.param(
            [user({"text": "a"})], "input[0].content[0].type: Field required", id="no-type"
        ),
        pytest.param(
            [user(text("a"), {"type": "video"})],
            "input[0].content[1].type: unknown content block type 'video'; expected 'text', "
            "'image', 'tool_use' or 'tool_result'",
            id="unknown-type",
        ),
        pytest.param(
            [user({"type": "text"})], "input[0].content[0].text: Field required", id="no-text"
        ),
        pytest.param(
            [user(text(5))],  # type: ignore[arg-type]
            "input[0].content[0].text: Input should be a valid string",
            id="text-not-a-string",
        ),
        pytest.param(
            [user({"type": "text", "text": "a", "cache": True})],
            "input[0].content[0].cache: Extra inputs are not permitted",
            id="extra-block-field",
        ),
        pytest.param(
            [user({"type": "image"})], "input[0].content[0].source: Field required", id="no-source"
        ),
        pytest.param(
            [user({"type": "image", "source": "cat.png"})],
            "input[0].content[0].source: should be an image source object, got str",
            id="source-not-an-object",
        ),
        pytest.param(
            [user({"type": "image", "source": {"type": "file", "file_id": "f1"}})],
            "input[0].content[0].source.type: should be 'base64' or 'url', got 'file'",
            id="unknown-source-type",
        ),
        pytest.param(
            [user({"type": "image", "source": {"type": "base64", "media_type": "image/png"}})],
            "input[0].content[0].source.data: Field required",
            id="no-data",
        ),
        pytest.param(
            [user(text("a"), assistant(text("b")))],
            "input[0].content[1].type: Field required",
            id="message-where-a-block-belongs",
        ),
    ],
)
def test_invalid_shape_names_the_bad_field(value: object, message: str) -> None:
    assert error_of(value) == message


def test_the_first_bad_field_is_named() -> None:
    value = [
        user(text("a")),
        assistant(text("b")),
        user(text("c"), image(media_type="image/bmp")),
        user({"type": "text"}),
    ]

    assert error_of(value) == (
        "input[2].content[1].source.media_type: should be one of image/jpeg, image/png, "
        "image/gif, image/webp, got 'image/bmp'"
    )


def test_the_path_is_rooted_where_the_caller_says() -> None:
    with pytest.raises(InvalidMessageError) as err:
        validate_messages([user()], path="before_run.messages")

    assert (
        err.value.message
        == "before_run.messages[0].content: should hold at least one content block"
    )


def test_the_conversation_must_end_with_a_user_message() -> None:
    assert error_of([user(text("a")), assistant(text("b"))]) == (
        "input[1].role: the conversation should end with a user message (the turn the agent "
        "answers), got 'assistant'"
    )


def test_a_mutated_model_instance_is_checked_again() -> None:
    message = user_text("a")
    message.content[0].text = 5  # type: ignore[union-attr]

    assert error_of([message]) == "input[0].content[0].text: Input should be a valid string"


# --- images ---------------------------------------------------------------------


@pytest.mark.parametrize("media_type", ["image/jpeg", "image/png", "image/gif", "image/webp"])
def test_each_allowed_image_media_type_is_accepted(media_type: str) -> None:
    [message] = validate_messages([user(image(media_type=media_type))])

    assert message.content == [
        ImageBlock(source=Base64ImageSource(media_type=media_type, data=PNG))
    ]


def test_base64_that_does_not_decode_is_rejected() -> None:
    assert error_of([user(image(data="iVBORw0KGgo"))]) == (
        "input[0].content[0].source.data: is not valid base64"
    )


def test_base64_with_characters_outside_the_alphabet_is_rejected() -> None:
    assert error_of([user(image(data="iVBOR w0KGgo="))]) == (
        "input[0].content[0].source.data: is not valid base64"
    )


def test_empty_image_data_is_rejected() -> None:
    assert error_of([user(image(data=""))]) == (
        "input[0].content[0].source.data: is empty; expected the base64-encoded image"
    )


def test_an_http_url_source_is_accepted() -> None:
    block = {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}

    [message] = validate_messages([user(block)])

    assert message.content == [ImageBlock(source=URLImageSource(url="https://example.com/cat.png"))]


def test_a_url_source_that_is_not_http_is_rejected() -> None:
    block = {"type": "image", "source": {"type": "url", "url": "file:///etc/passwd"}}

    assert error_of([user(block)]) == (
        "input[0].content[0].source.url: should be an http or https URL, got 'file:///etc/passwd'"
    )


# --- tools ----------------------------------------------------------------------


def test_a_tool_result_answering_an_earlier_tool_use_is_accepted() -> None:
    messages = validate_messages(
        [
            user(text("find it")),
            assistant(tool_use("toolu_1", q="cats")),
            user(tool_result("toolu_1")),
        ]
    )

    assert messages[1].content == [ToolUseBlock(id="toolu_1", name="search", input={"q": "cats"})]
    assert messages[2].content == [ToolResultBlock(tool_use_id="toolu_1", content="found")]


def test_a_tool_result_without_an_earlier_tool_use_is_rejected() -> None:
    value = [assistant(tool_use("toolu_1")), user(tool_result("toolu_2"))]

    assert error_of(value) == (
        "input[1].content[0].tool_use_id: 'toolu_2' matches no tool_use block earlier in the "
        "conversation"
    )


def test_a_tool_result_before_its_tool_use_is_rejected() -> None:
    value = [user(tool_result("toolu_1")), assistant(tool_use("toolu_1")), user(text("a"))]

    assert error_of(value) == (
        "input[0].content[0].tool_use_id: 'toolu_1' matches no tool_use block earlier in the "
        "conversation"
    )


def test_a_tool_use_in_a_user_message_is_rejected() -> None:
    assert error_of([user(tool_use("toolu_1"))]) == (
        "input[0].content[0].type: a tool_use block belongs in an assistant message"
    )


def test_a_tool_result_in_an_assistant_message_is_rejected() -> None:
    value = [assistant(tool_use("toolu_1"), tool_result("toolu_1")), user(text("a"))]

    assert error_of(value) == (
        "input[0].content[1].type: a tool_result block belongs in a user message"
    )


def test_tool_result_content_blocks_are_checked_with_their_path() -> None:
    value = [
        assistant(tool_use("toolu_1")),
        user(tool_result("toolu_1", [text("a"), image("image/tiff")])),
    ]

    assert error_of(value) == (
        "input[1].content[0].content[1].source.media_type: should be one of image/jpeg, "
        "image/png, image/gif, image/webp, got 'image/tiff'"
    )


def test_tool_result_content_holds_only_text_and_image_blocks() -> None:
    value = [assistant(tool_use("toolu_1")), user(tool_result("toolu_1", [tool_use("toolu_2")]))]

    assert error_of(value) == (
        "input[1].content[0].content[0].type: a tool_result's content holds only text and "
        "image blocks, got 'tool_use'"
    )


def test_tool_result_content_is_a_string_or_a_list() -> None:
    value = [assistant(tool_use("toolu_1")), user(tool_result("toolu_1", 42))]

    assert error_of(value) == (
        "input[1].content[0].content: should be a string or a list of text and image blocks, "
        "got int"
    )


def test_tool_result_is_error_must_be_a_boolean() -> None:
    block = {**tool_result("toolu_1"), "is_error": "yes"}

    assert error_of([assistant(tool_use("toolu_1")), user(block)]) == (
        "input[1].content[0].is_error: Input should be a valid boolean"
    )


# --- JSON data ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("input", "message"),
    [
        pytest.param(
            {"tags": {"a", "b"}}, "input[0].content[0].input.tags: set is not JSON data", id="set"
        ),
        pytest.param(
            {"at": object()}, "input[0].content[0].input.at: object is not JSON data", id="object"
        ),
        pytest.param(
            {"scores": [1.0, float("nan")]},
            "input[0].content[0].input.scores[1]: nan is not JSON data (numbers must be finite)",
            id="nan",
        ),
        pytest.param(
            {"big": float("inf")},
            "input[0].content[0].input.big: inf is not JSON data (numbers must be finite)",
            id="infinity",
        ),
        pytest.param(
            {"pair": (1, 2)}, "input[0].content[0].input.pair: tuple is not JSON data", id="tuple"
        ),
        pytest.param(
            {"by id": {1: "a"}},
            "input[0].content[0].input['by id']: object key 1 is not a string",
            id="int-key",
        ),
    ],
)
def test_tool_input_that_is_not_json_data_is_rejected(input: dict[str, Any], message: str) -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": input}

    assert error_of([assistant(block), user(text("a"))]) == message


def test_circular_tool_input_is_rejected() -> None:
    loop: list[Any] = []
    loop.append(loop)

    assert error_of([assistant(tool_use("toolu_1", loop=loop)), user(text("a"))]) == (
        "input[0].content[0].input.loop[0]: contains itself; JSON data cannot be circular"
    )


def test_the_same_data_twice_is_not_circular() -> None:
    shared = {"k": 1}

    [message, _] = validate_messages(
        [assistant(tool_use("toolu_1", a=shared, b=shared)), user(text("a"))]
    )

    assert message.content == [
        ToolUseBlock(id="toolu_1", name="search", input={"a": {"k": 1}, "b": {"k": 1}})
    ]


# --- copies ---------------------------------------------------------------------


def test_changing_the_callers_list_afterwards_changes_nothing() -> None:
    value = [user(text("a"))]
    messages = validate_messages(value)

    value.append(assistant(text("b")))
    value[0]["content"].append(text("c"))

    assert messages == [user_text("a")]


def test_changing_a_block_afterwards_changes_nothing() -> None:
    block = text("a")
    messages = validate_messages([user(block)])

    block["text"] = "changed"

    assert messages == [user_text("a")]


def test_changing_the_image_source_afterwards_changes_nothing() -> None:
    block = image()
    [message] = validate_messages([user(block)])

    block["source"]["media_type"] = "image/gif"
    block["source"]["data"] = "R0lGODlh"

    assert message.content == [
        ImageBlock(source=Base64ImageSource(media_type="image/png", data=PNG))
    ]


def test_changing_the_tool_input_afterwards_changes_nothing() -> None:
    block = tool_use("toolu_1", q={"terms": ["cats"]})
    [message, _] = validate_messages([assistant(block), user(text("a"))])

    block["input"]["q"]["terms"].append("dogs")
    block["input"]["limit"] = 3

    assert message.content == [
        ToolUseBlock(id="toolu_1", name="search", input={"q": {"terms": ["cats"]}})
    ]


def test_changing_a_model_instance_afterwards_changes_nothing() -> None:
    source = Base64ImageSource(media_type="image/png", data=PNG)
    given = LLMMessage(role="user", content=[TextBlock(text="a"), ImageBlock(source=source)])
    [message] = validate_messages([given])

    source.media_type = "image/gif"
    given.content.append(TextBlock(text="b"))

    assert message.content == [
        TextBlock(text="a"),
        ImageBlock(source=Base64ImageSource(media_type="image/png", data=PNG)),
    ]


# --- one user turn (Agent.prompt) -----------------------------------------------


def test_content_blocks_of_one_turn_are_copied() -> None:
    blocks = [text("What is this?"), image()]
    checked = validate_content_blocks(blocks)

    blocks[1]["source"]["data"] = "R0lGODlh"

    assert checked == [
        TextBlock(text="What is this?"),
        ImageBlock(source=Base64ImageSource(media_type="image/png", data=PNG)),
    ]


def test_a_tool_use_block_is_not_allowed_in_a_prompt_turn() -> None:
    with pytest.raises(InvalidMessageError) as err:
        validate_content_blocks([text("a"), tool_use("toolu_1")])

    assert err.value.message == "input[1].type: a tool_use block belongs in an assistant message"


def test_an_empty_prompt_turn_is_rejected() -> None:
    with pytest.raises(InvalidMessageError) as err:
        validate_content_blocks([])

    assert err.value.message == "input: should hold at least one content block"


def test_a_prompt_turn_that_is_not_a_list_is_rejected() -> None:
    with pytest.raises(InvalidMessageError) as err:
        validate_content_blocks(text("a"))

    assert err.value.message == "input: should be a list of content blocks, got dict"


def test_a_prompt_turn_may_answer_a_tool_use_in_the_history() -> None:
    history = [
        user_text("find"),
        LLMMessage(role="assistant", content=[ToolUseBlock(id="toolu_1", name="search")]),
    ]

    checked = validate_content_blocks([tool_result("toolu_1")], history=history)

    assert checked == [ToolResultBlock(tool_use_id="toolu_1", content="found")]


def test_a_prompt_turn_tool_result_without_history_is_rejected() -> None:
    with pytest.raises(InvalidMessageError) as err:
        validate_content_blocks([tool_result("toolu_1")])

    assert err.value.message == (
        "input[0].tool_use_id: 'toolu_1' matches no tool_use block earlier in the conversation"
    )


# --- the string shorthand and the prompt view -----------------------------------


def test_a_string_is_one_user_text_message() -> None:
    assert to_messages("Hello") == ([user_text("Hello")], False)


def test_a_list_is_a_structured_conversation() -> None:
    assert to_messages([user(text("Hello"))]) == ([user_text("Hello")], True)


def test_other_input_is_rejected() -> None:
    with pytest.raises(InvalidMessageError) as err:
        to_messages(42)

    assert err.value.message == "input: should be a string or a list of messages, got int"


def test_prompt_is_the_text_of_the_latest_user_message() -> None:
    messages = validate_messages(
        [user(text("old")), assistant(text("b")), user(text("What "), image(), text("is this?"))]
    )

    assert latest_user_prompt(messages) == "What is this?"


def test_an_image_only_turn_has_an_empty_prompt() -> None:
    messages = validate_messages([user(text("old")), assistant(text("b")), user(image())])

    assert latest_user_prompt(messages) == ""


def test_tool_result_text_is_not_prompt() -> None:
    messages = validate_messages(
        [
            user(text("find")),
            assistant(tool_use("toolu_1")),
            user(tool_result("toolu_1", [text("r")])),
        ]
    )

    assert latest_user_prompt(messages) == ""
