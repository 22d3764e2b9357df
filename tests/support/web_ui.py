"""`oma dev` and its Web UI as a person meets them: a dev server of its own,
outside the suite's settings, and the UI's pages in a real headless Chromium
(Debian's, `make chromium`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path

from oma.runtime.dev_server import is_listening


def dev_env(queue: str, **extra: str) -> dict[str, str]:
    """This environment without the suite's Temporal and OMA settings, on ``queue``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "OMA_CODEC"))}
    return {**env, "OMA_TASK_QUEUE": queue, **extra}


async def wait_listening(address: str, dev: subprocess.Popen[str], within_s: float) -> None:
    """Wait until something listens on ``address``; fail if ``dev`` exits first."""
    deadline = time.monotonic() + within_s
    while not is_listening(address):
        assert dev.poll() is None, f"oma dev exited with {dev.returncode}"
        assert time.monotonic() < deadline, f"nothing listens on {address}"
        await asyncio.sleep(0.2)


def chromium_command(profile: Path) -> list[str]:
    """Headless Chromium with its own profile in ``profile``; add the page and what to do."""
    found = shutil.which("chromium")
    assert found, "Debian's chromium is not installed: run `make chromium`"
    return [
        found,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ]
