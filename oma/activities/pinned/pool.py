"""``PinnedPool``: a worker's live resources of one kind, keyed by run.

One lock per key, so that two first uses of a resource at once open one,
not two; a held resource that has died is replaced by the next use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

PinKey = tuple[str, ...]
"""``(run_key, *names)``: the run first (``"<workflow id>/<Temporal run id>"``), then
what names the resource in the run: ``(run_key, agent)`` for an ACP session,
``(run_key, agent, server name)`` for an MCP server."""


class Pinned(Protocol):
    """What a pool holds: a resource that can tell it has died, and be closed."""

    @property
    def alive(self) -> bool:
        """Whether it can serve another use (``False`` once closed or exited)."""
        ...

    async def close(self) -> None:
        """End it (its process tree, its connection); idempotent."""
        ...


R = TypeVar("R", bound=Pinned)


class PinnedPool(Generic[R]):
    """A worker's live resources of one kind; one pool per worker process
    (or per in-process ``Agent``).

    ``len(pool)`` is the number held; ``spawn_count`` the number opened so far.
    """

    def __init__(self) -> None:
        self._held: dict[PinKey, R] = {}
        self._locks: dict[PinKey, asyncio.Lock] = {}
        self.spawn_count = 0

    def __len__(self) -> int:
        return len(self._held)

    def run_keys(self) -> set[str]:
        """The runs this pool holds resources for."""
        return {key[0] for key in self._held}

    async def acquire(self, key: PinKey, open_new: Callable[[], Awaitable[R]]) -> tuple[R, bool]:
        """The live resource held for ``key``, or a new one from ``open_new()``.

        Returns ``(resource, new)``: ``new`` is ``True`` when this call opened
        it. A held resource that is no longer ``alive`` is closed and
        replaced. Raises what ``open_new`` raises (nothing is held then).
        """
        async with self._locks.setdefault(key, asyncio.Lock()):
            held = self._held.get(key)
            if held is not None:
                if held.alive:
                    return held, False
                del self._held[key]
                await held.close()
            held = await open_new()
            self._held[key] = held
            self.spawn_count += 1
            return held, True

    def forget(self, key: PinKey, resource: R) -> None:
        """Stop holding ``resource`` if it is still the one held for ``key``
        (the caller closes it)."""
        if self._held.get(key) is resource:
            del self._held[key]

    async def close_run(self, run_key: str) -> int:
        """Close every resource of ``run_key``. Waits for one of the run that
        is being opened. Returns how many were closed."""
        closing = []
        for key in [key for key in self._locks if key[0] == run_key]:
            async with self._locks[key]:
                held = self._held.pop(key, None)
            self._locks.pop(key, None)
            if held is not None:
                closing.append(held)
        await asyncio.gather(*(held.close() for held in closing))
        return len(closing)

    async def close_all(self) -> int:
        """Close every resource (at worker shutdown). Returns how many were closed."""
        closing = list(self._held.values())
        self._held.clear()
        self._locks.clear()
        await asyncio.gather(*(held.close() for held in closing))
        return len(closing)
