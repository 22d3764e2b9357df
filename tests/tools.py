"""Custom tools that test workers load by import path (tests.tools:...)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from oma import consequential


def add(a: int, b: int = 1) -> int:
    """Add two integers and return the sum."""
    return a + b


class Lookup(BaseModel):
    key: str = Field(description="What to look up.")


async def lookup(query: Lookup) -> dict[str, str]:
    """Look a key up in a tiny table."""
    await asyncio.sleep(0)
    return {"key": query.key, "value": query.key.upper()}


def explode(reason: str) -> str:
    """Always fails, saying why."""
    raise RuntimeError(reason)


async def nap(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds:g} s"


def loud() -> str:
    """Takes no input; answers with a lot of text."""
    return "x" * 50_000


def page(number: int) -> str:
    """Page ``number`` of a long document (about 12 KB of text)."""
    return f"page {number}\n" + "lorem ipsum " * 1000


@consequential
def deploy(environment: str) -> str:
    """Deploy the current build to ``environment``."""
    return f"deployed to {environment}"
