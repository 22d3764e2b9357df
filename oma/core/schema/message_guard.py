"""The one shape guard for structured input (docs/structured-input.md).

Every boundary that takes messages — the Python API, the workflow input, a
provider adapter, a ``before_run`` hook's answer — passes them through
``validate_messages`` (or ``validate_content_blocks`` for one ``prompt()`` turn).
The guard does three things at once:

- it checks the Anthropic Messages API shape and fails on the first bad field
  with ``InvalidMessageError`` naming its path, e.g.
  ``input[2].content[1].source.media_type``;
- it copies: what it returns shares nothing with what it was given, so the
  caller mutating its lists, blocks, image source or tool input afterwards
  changes nothing;
- it keeps to JSON data, so the copy survives a Temporal payload unchanged.

Pure Python without I/O, threads or clocks, so workflow code may call it.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError

from oma.core.schema.errors import InvalidMessageError
from oma.core.schema.messages import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    LLMMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
    text_of,
    user_text,
)

M = TypeVar("M", bound=BaseModel)

#: The image types the Anthropic Messages API accepts (``source.media_type``).
IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")

_BLOCK_MODELS: dict[str, type[TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock]] = {
    "text": TextBlock,
    "image": ImageBlock,
    "tool_use": ToolUseBlock,
    "tool_result": ToolResultBlock,
}
_SOURCE_MODELS: dict[str, type[Base64ImageSource | URLImageSource]] = {
    "base64": Base64ImageSource,
    "url": URLImageSource,
}
# Our own models are read as the JSON they stand for, wherever they occur.
_MODELS = (LLMMessage, *_BLOCK_MODELS.values(), *_SOURCE_MODELS.values())


def validate_messages(value: object, path: str = "input") -> list[LLMMessage]:
    """Check a complete conversation and return a deep copy of it as ``LLMMessage``s.

    ``value`` is a non-empty list whose items are message dicts
    (``{"role": "user" | "assistant", "content": [block, ...]}``) or
    ``LLMMessage`` instances; blocks and image sources may be dicts or model
    instances too. Beyond the field shapes it enforces:

    - ``content`` is a non-empty list;
    - ``tool_use`` blocks only in assistant messages, ``tool_result`` blocks only
      in user messages (as the Messages API requires), and a ``tool_result``'s
      ``tool_use_id`` names a ``tool_use`` block earlier in the conversation;
    - image sources: ``base64`` with a media type in ``IMAGE_MEDIA_TYPES`` and
      non-empty ``data`` that ``base64.b64decode(data, validate=True)`` accepts,
      or ``url`` with an ``http``/``https`` URL;
    - only JSON data (dicts with string keys, lists, str, int, finite float,
      bool, None — exactly these types, no subclasses) anywhere, e.g. in a
      ``tool_use`` block's ``input``;
    - the last message is a user message: the run answers that turn, and
      ``before_run``'s ``prompt`` is read from it. (The Messages API would take a
      trailing assistant message as a prefill to continue, which an agent run
      has no use for.)

    Raises ``InvalidMessageError`` for the first problem, message by message,
    block by block; its message is ``"<path>: <what is wrong>"`` with the path
    rooted at ``path``.
    """
    if not isinstance(value, list):
        raise _invalid(path, f"should be a list of messages, got {_kind(value)}")
    if not value:
        raise _invalid(path, "should hold at least one message")
    tool_use_ids: set[str] = set()
    messages = []
    for i, raw in enumerate(value):
        item = f"{path}[{i}]"
        messages.append(_message(_json_copy(raw, item, ()), item, tool_use_ids))
    if messages[-1].role != "user":
        raise _invalid(
            f"{path}[{len(messages) - 1}].role",
            "the conversation should end with a user message (the turn the agent "
            "answers), got 'assistant'",
        )
    return messages


def validate_content_blocks(
    value: object, path: str = "input", *, history: Sequence[LLMMessage] = ()
) -> list[ContentBlock]:
    """Check the blocks of one user turn (``Agent.prompt(blocks)``) and return a deep copy.

    The same rules as ``validate_messages`` for a user message: a non-empty
    list, no ``tool_use`` blocks, and each ``tool_result`` answering a
    ``tool_use`` block in ``history`` (the conversation the turn is appended to,
    already validated). Raises ``InvalidMessageError`` naming the first bad
    field, e.g. ``input[1].source.data``.
    """
    if not isinstance(value, list):
        raise _invalid(path, f"should be a list of content blocks, got {_kind(value)}")
    if not value:
        raise _invalid(path, "should hold at least one content block")
    tool_use_ids = {b.id for m in history for b in m.content if isinstance(b, ToolUseBlock)}
    blocks = []
    for i, raw in enumerate(value):
        item = f"{path}[{i}]"
        blocks.append(_block(_json_copy(raw, item, ()), item, "user", tool_use_ids))
    return blocks


def to_messages(value: object, path: str = "input") -> tuple[list[LLMMessage], bool]:
    """The messages a run input stands for, and whether it was structured.

    A string is the shorthand for one user text message (``structured`` is
    ``False``); a list is a complete conversation checked and copied by
    ``validate_messages`` (``structured`` is ``True``). Anything else raises
    ``InvalidMessageError``.
    """
    if isinstance(value, str):
        return [user_text(value)], False
    if isinstance(value, list):
        return validate_messages(value, path), True
    raise _invalid(path, f"should be a string or a list of messages, got {_kind(value)}")


def latest_user_prompt(messages: Sequence[LLMMessage]) -> str:
    """The text blocks of the latest user message, concatenated in order.

    ``""`` for an image-only turn or when there is no user message; text inside
    ``tool_result`` blocks does not count (the reference's ``ctx.prompt``).
    """
    for message in reversed(messages):
        if message.role == "user":
            return text_of(message.content)
    return ""


def _message(data: Any, path: str, tool_use_ids: set[str]) -> LLMMessage:
    if not isinstance(data, dict):
        raise _invalid(path, f"should be a message object with role and content, got {_kind(data)}")
    if "role" not in data:
        raise _invalid(f"{path}.role", "Field required")
    role = data["role"]
    if role not in ("user", "assistant"):
        raise _invalid(f"{path}.role", f"should be 'user' or 'assistant', got {_show(role)}")
    if "content" not in data:
        raise _invalid(f"{path}.content", "Field required")
    content = data["content"]
    if not isinstance(content, list):
        raise _invalid(
            f"{path}.content", f"should be a list of content blocks, got {_kind(content)}"
        )
    if not content:
        raise _invalid(f"{path}.content", "should hold at least one content block")
    blocks = [
        _block(raw, f"{path}.content[{i}]", role, tool_use_ids) for i, raw in enumerate(content)
    ]
    extra = next((key for key in data if key not in ("role", "content")), None)
    if extra is not None:
        raise _invalid(_member(path, extra), "Extra inputs are not permitted")
    return LLMMessage(role=role, content=blocks)


def _block(data: Any, path: str, within: str, tool_use_ids: set[str]) -> ContentBlock:
    """One content block; ``within`` is the role of its message, or ``"tool_result"``
    for the blocks inside a tool result's content."""
    if not isinstance(data, dict):
        raise _invalid(path, f"should be a content block object, got {_kind(data)}")
    kind = _block_type(data, path, within)
    if kind == "image" and "source" in data:
        data = {**data, "source": _image_source(data["source"], f"{path}.source")}
    if kind == "tool_result" and "content" in data:
        content = data["content"]
        if isinstance(content, list):
            nested = [
                _block(raw, f"{path}.content[{i}]", "tool_result", tool_use_ids)
                for i, raw in enumerate(content)
            ]
            data = {**data, "content": nested}
        elif not isinstance(content, str):
            raise _invalid(
                f"{path}.content",
                f"should be a string or a list of text and image blocks, got {_kind(content)}",
            )
    block = _parse(_BLOCK_MODELS[kind], data, path)
    if isinstance(block, ToolUseBlock):
        tool_use_ids.add(block.id)
    if isinstance(block, ToolResultBlock) and block.tool_use_id not in tool_use_ids:
        raise _invalid(
            f"{path}.tool_use_id",
            f"{_show(block.tool_use_id)} matches no tool_use block earlier in the conversation",
        )
    return block


def _block_type(data: dict[str, Any], path: str, within: str) -> str:
    if "type" not in data:
        raise _invalid(f"{path}.type", "Field required")
    kind = data["type"]
    if not isinstance(kind, str) or kind not in _BLOCK_MODELS:
        raise _invalid(
            f"{path}.type",
            f"unknown content block type {_show(kind)}; expected 'text', 'image', "
            "'tool_use' or 'tool_result'",
        )
    if within == "tool_result" and kind not in ("text", "image"):
        raise _invalid(
            f"{path}.type",
            f"a tool_result's content holds only text and image blocks, got {_show(kind)}",
        )
    if within == "user" and kind == "tool_use":
        raise _invalid(f"{path}.type", "a tool_use block belongs in an assistant message")
    if within == "assistant" and kind == "tool_result":
        raise _invalid(f"{path}.type", "a tool_result block belongs in a user message")
    return kind


def _image_source(data: Any, path: str) -> Base64ImageSource | URLImageSource:
    if not isinstance(data, dict):
        raise _invalid(path, f"should be an image source object, got {_kind(data)}")
    if "type" not in data:
        raise _invalid(f"{path}.type", "Field required")
    kind = data["type"]
    if not isinstance(kind, str) or kind not in _SOURCE_MODELS:
        raise _invalid(f"{path}.type", f"should be 'base64' or 'url', got {_show(kind)}")
    source = _parse(_SOURCE_MODELS[kind], data, path)
    if isinstance(source, URLImageSource):
        parts = urlsplit(source.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise _invalid(
                f"{path}.url", f"should be an http or https URL, got {_show(source.url)}"
            )
        return source
    if source.media_type not in IMAGE_MEDIA_TYPES:
        raise _invalid(
            f"{path}.media_type",
            f"should be one of {', '.join(IMAGE_MEDIA_TYPES)}, got {_show(source.media_type)}",
        )
    if not source.data:
        raise _invalid(f"{path}.data", "is empty; expected the base64-encoded image")
    try:
        base64.b64decode(source.data, validate=True)
    except binascii.Error:
        raise _invalid(f"{path}.data", "is not valid base64") from None
    return source


def _parse(model: type[M], data: dict[str, Any], path: str) -> M:
    # Strict: a JSON number is not a string and 1 is not True. The nested parts
    # are already checked, so every error location here is one field name.
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise _invalid(f"{path}.{field}" if field else path, first["msg"]) from None


def _json_copy(value: Any, path: str, parents: tuple[int, ...]) -> Any:
    """A fresh copy of ``value`` made of plain JSON data; our models become dicts."""
    if isinstance(value, _MODELS):
        value = {name: getattr(value, name) for name in type(value).model_fields}
    elif isinstance(value, dict | list) and id(value) in parents:
        raise _invalid(path, "contains itself; JSON data cannot be circular")
    if isinstance(value, dict):
        copy = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _invalid(path, f"object key {_show(key)} is not a string")
            copy[key] = _json_copy(item, _member(path, key), (*parents, id(value)))
        return copy
    if isinstance(value, list):
        return [
            _json_copy(item, f"{path}[{i}]", (*parents, id(value))) for i, item in enumerate(value)
        ]
    if type(value) is float and not math.isfinite(value):
        raise _invalid(path, f"{value!r} is not JSON data (numbers must be finite)")
    if value is None or type(value) in (str, int, float, bool):
        return value
    raise _invalid(path, f"{type(value).__name__} is not JSON data")


def _member(path: str, key: str) -> str:
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{key!r}]"


def _kind(value: object) -> str:
    return type(value).__name__


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _invalid(path: str, problem: str) -> InvalidMessageError:
    return InvalidMessageError(f"{path}: {problem}")
