"""`oma` as a user's shell runs it, on a pseudo-terminal: what the live view
draws, read back without its ANSI sequences; and a slow build to watch."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import threading
from pathlib import Path
from typing import Any

from oma.runtime.dev_server import DevServer
from tests.support.cli import OMA, cli_env, input_file
from tests.support.runs import process, task

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\r")


class Terminal:
    """`oma ARGS` with stdout and stderr on a pseudo-terminal of ``columns``x40
    (150 by default), as a user's shell runs it; ``screen`` is everything it
    wrote, ANSI sequences removed."""

    def __init__(
        self,
        dev_server: DevServer,
        *args: str,
        env: dict[str, str] | None = None,
        columns: int = 150,
    ) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        env = {**(env or cli_env(dev_server)), "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen(
            [OMA, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env
        )
        os.close(slave)
        self._master = master
        self._raw = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: the last writer has closed the terminal
                return
            if not chunk:
                return
            self._raw += chunk

    @property
    def screen(self) -> str:
        return ANSI.sub("", bytes(self._raw).decode("utf-8", errors="replace"))

    async def wait_for(self, pattern: str, timeout_s: float = 60) -> re.Match[str]:
        """The first match of ``pattern`` on one line of the screen, waiting for it."""
        regex = re.compile(pattern)
        for _ in range(int(timeout_s / 0.05)):
            if match := regex.search(self.screen):
                return match
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            await asyncio.sleep(0.05)
        raise AssertionError(f"{pattern!r} never appeared; the screen:\n{self.screen}")

    async def exit_code(self) -> int:
        code = await asyncio.to_thread(self.proc.wait, 60)
        await asyncio.to_thread(self._reader.join, 10)
        os.close(self._master)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()


def slow_process(name: str, go: Path) -> dict[str, Any]:
    """A process agent that prints a line, then waits until ``go`` exists."""
    code = (
        "import os, time\n"
        "print('compiling module 1 of 3', flush=True)\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    time.sleep(0.05)\n"
        "print('all done')\n"
    )
    return process(name, code)


def building(tmp_path: Path) -> tuple[Path, str]:
    """A run input file of one task, "Build the thing", by a ``slow_process``
    builder, and the file that lets it finish."""
    go = tmp_path / "go"
    run_input = {
        "team": {"name": "live", "agents": [slow_process("builder", go)]},
        "tasks": [{**task("build", "builder"), "title": "Build the thing"}],
    }
    return go, input_file(tmp_path, run_input)
