"""A warm ``oma`` forkserver of a test's own (``oma.cli.forkserver``), and the
ancestry a process agent reports, which says which process ran the command."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from oma.runtime.dev_server import free_port
from tests.support.procs import alive

OMA = str(Path(sys.executable).parent / "oma")

ANCESTRY = (
    "import os\n"
    "pid, chain = os.getpid(), []\n"
    "while pid > 1:\n"
    "    stat = open(f'/proc/{pid}/stat').read()\n"
    "    pid = int(stat.rpartition(')')[2].split()[1])\n"
    "    chain.append(pid)\n"
    "print(' '.join(map(str, chain)))\n"
)
"""A process agent's code that prints its ancestors' pids, parent first."""


class Forkserver:
    """A runtime directory (``XDG_RUNTIME_DIR``) of the test's own, so its
    forkserver serves that test only; ``stop`` ends every server started in it
    and checks that each is gone."""

    def __init__(self) -> None:
        # short: a Unix socket's path has at most 104 bytes
        self.runtime = Path(tempfile.mkdtemp(prefix="oma-fs-", dir="/tmp"))
        self.home = self.runtime / "oma"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the forkserver on."""
        return {
            **(base if base is not None else os.environ),
            "OMA_FORKSERVER": "1",
            "XDG_RUNTIME_DIR": str(self.runtime),
        }

    def warm(self) -> int:
        """Start a server as a user's first command in a context does, wait
        until it listens, and return its pid. The command that starts it fails
        at once (nothing listens where it looks), and the server keeps the
        environment of that command, not of the commands it serves later."""
        before = set(self.home.glob("*.sock"))
        nowhere = {**self.env(), "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}"}
        command = [OMA, "approvals", "no-such-run"]
        first = subprocess.run(command, env=nowhere, capture_output=True, text=True, timeout=60)
        assert first.returncode == 1, first.stderr
        deadline = time.monotonic() + 60
        while True:
            for sock in set(self.home.glob("*.sock")) - before:
                with contextlib.suppress(OSError, ValueError):
                    return int(sock.with_suffix(".pid").read_text())
            assert time.monotonic() < deadline, f"no forkserver listens; its log: {self.log()}"
            time.sleep(0.05)

    def pids(self) -> list[int]:
        """The pids of the servers that say they listen in this directory."""
        found = []
        for pid_file in self.home.glob("*.pid"):
            text = pid_file.read_text().strip()
            if text and alive(int(text)):
                found.append(int(text))
        return found

    def log(self) -> str:
        return "\n".join(p.read_text() for p in self.home.glob("*.log"))

    def stop(self) -> None:
        pids = self.pids()
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while any(map(alive, pids)):
            assert time.monotonic() < deadline, f"a forkserver outlived SIGTERM: {pids}"
            time.sleep(0.05)
        shutil.rmtree(self.runtime, ignore_errors=True)
