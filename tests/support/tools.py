"""Custom tools that test workers load by import path (tests.support.tools:...)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from pydantic import BaseModel, Field

from oma import consequential, retried


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


@retried(max_attempts=3, interval_s=0.1)
def flaky(marker: str) -> str:
    """Fails until it has been tried twice (counted in the file ``marker``)."""
    return _fail_twice(marker)


@retried(max_attempts=2, interval_s=0.1)
def flakier(marker: str) -> str:
    """As ``flaky``, but declares one retry only."""
    return _fail_twice(marker)


def _fail_twice(marker: str) -> str:
    path = Path(marker)
    tries = len(path.read_text()) if path.exists() else 0
    path.write_text("x" * (tries + 1))
    if tries < 2:
        raise ConnectionError(f"attempt {tries + 1} failed")
    return f"worked on attempt {tries + 1}"


def t__pid() -> str:
    """Named like the ``pid`` tool of an MCP server ``t`` (tests/support/mcp_server.py)."""
    return "custom"


def unjsonable(marker: str) -> dict[tuple[str, str], int]:
    """Answers with a dict JSON cannot hold (its key is a tuple)."""
    _count(marker)
    return {("a", "b"): 1}


def lone_surrogate(marker: str) -> str:
    """Answers with text that has half a surrogate pair (no UTF-8 for it)."""
    _count(marker)
    return "half \ud800 a pair"


async def hog(seconds: float, marker: str) -> str:
    """Blocks the event loop for ``seconds`` (time.sleep in an async tool)."""
    _count(marker)
    time.sleep(seconds)
    return "done"


async def hog_then_wait(seconds: float, marker: str) -> str:
    """Blocks the event loop for ``seconds``, then waits a minute."""
    _count(marker)
    time.sleep(seconds)
    await asyncio.sleep(60)
    Path(marker).write_text(Path(marker).read_text() + "!")
    return "waited"


def _count(marker: str) -> None:
    path = Path(marker)
    path.write_text((path.read_text() if path.exists() else "") + "x")
