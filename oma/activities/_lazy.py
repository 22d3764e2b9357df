"""Importing an SDK where it is first used, without stopping the event loop.

The provider, ACP and MCP SDKs cost up to a second of CPU each to import
(``anthropic`` alone over one on this project's machines), and most workers
never use most of them: a run of process agents imports none. So the
activities import each where it is first used, in a thread
(``asyncio.to_thread``), while the worker's event loop goes on serving the
other activities' heartbeats; Python's import lock makes a second caller wait
for the first import to finish rather than see a half-built module.
"""

from __future__ import annotations

import asyncio
import importlib
from types import ModuleType


async def import_off_loop(module: str) -> ModuleType:
    """``module``, imported in a thread the first time (a module already
    imported costs the hop to the thread and back). Raises what importing it
    raises."""
    return await asyncio.to_thread(importlib.import_module, module)
