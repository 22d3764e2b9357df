"""Messages and content blocks, named as in the Anthropic Messages API.

``LLMMessage`` is ``{role: "user" | "assistant", content: [ContentBlock]}``; a
content block is ``text``, ``image``, ``tool_use`` or ``tool_result``, told
apart by its ``type`` field exactly as on the wire.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextBlock(_Block):
    type: Literal["text"] = "text"
    text: str


class Base64ImageSource(_Block):
    type: Literal["base64"] = "base64"
    media_type: str
    data: str


class URLImageSource(_Block):
    type: Literal["url"] = "url"
    url: str


ImageSource = Annotated[Base64ImageSource | URLImageSource, Field(discriminator="type")]


class ImageBlock(_Block):
    type: Literal["image"] = "image"
    source: ImageSource


class ToolUseBlock(_Block):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(_Block):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str | list[TextBlock | ImageBlock] = ""
    is_error: bool = False


ContentBlock = Annotated[
    TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")
]


class LLMMessage(_Block):
    """One conversation turn: ``role`` and a non-empty list of content blocks."""

    role: Literal["user", "assistant"]
    content: list[ContentBlock]


def user_text(text: str) -> LLMMessage:
    """The string shorthand: one user message with one text block."""
    return LLMMessage(role="user", content=[TextBlock(text=text)])


def text_of(blocks: list[ContentBlock]) -> str:
    """Concatenate the text blocks of ``blocks`` in order (other blocks are skipped)."""
    return "".join(b.text for b in blocks if isinstance(b, TextBlock))
