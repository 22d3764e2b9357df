"""Token usage, named as in the Anthropic Messages API ``usage`` object."""

from __future__ import annotations

from pydantic import BaseModel, Field


class TokenUsage(BaseModel):
    """Tokens consumed by a model turn, an agent run or a whole team run."""

    input_tokens: int = Field(default=0, ge=0, description="Input (prompt) tokens.")
    output_tokens: int = Field(default=0, ge=0, description="Output (completion) tokens.")

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )
