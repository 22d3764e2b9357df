"""The ``oma`` command's forkserver: one background process per installation
that has imported the Temporal SDK and OMA's models once, and forks a child
for each command, so a command does not spend a second importing them.

Why: importing ``temporalio.client`` and building OMA's pydantic models takes
about a second of CPU, several times what a warm ``oma run`` spends talking to
Temporal. Python's ``multiprocessing`` "forkserver" start method and
Android's zygote answer the same cost the same way; Gradle's and Bazel's
command-line clients keep a warm server for it too.

How it runs:

- ``oma COMMAND`` (``main``, standard library only) connects to the server's
  Unix socket and sends its argv, working directory, environment and umask,
  with its stdin, stdout and stderr as file descriptors (``SCM_RIGHTS``). The
  server forks; the child takes those descriptors as its own 0, 1 and 2 (a
  terminal stays a terminal: the live view and colours work), takes the
  environment, directory and argv, rebuilds ``sys.stdin``/``stdout``/``stderr``
  as the client had them, and runs ``oma.cli.main`` as a fresh process would.
  The child's pid comes back first; the client forwards SIGINT, SIGTERM,
  SIGHUP and SIGQUIT to it (Ctrl-C cancels the run as always), stops and
  continues it with itself (Ctrl-Z, ``fg``), and leaves with the child's exit
  status, or by the signal that ended it. A client killed outright (SIGKILL)
  takes its child with it.
- With no server answering, the command runs in its own process as before and
  starts one in the background for the next commands. ``oma dev``, ``oma
  worker`` and ``oma codec-server`` (long-lived) always run in their own
  process; ``OMA_FORKSERVER=0`` turns the forkserver off for any command.
- A server serves one interpreter, one ``sys.path`` and one state of the code:
  its socket's name is a digest of the interpreter, ``sys.path``, the
  modification times of ``sys.path``'s directories (an install or upgrade
  changes them) and of every ``.py`` file of the ``oma`` package. Edited or upgraded
  code gets a new server; the old one, unused, leaves after ``IDLE_S``.
- Its socket lives in ``$XDG_RUNTIME_DIR/oma`` (else ``/tmp/oma-<uid>``), a
  directory only its user may enter (checked; anything else turns the
  forkserver off); on Linux the server also checks that the peer is that user.
- Forking is safe because the server starts no event loop, no Temporal
  runtime and no thread (the thread count is checked after the imports), and
  imports nothing that keeps terminal state (``oma.cli`` and its consoles are
  imported by each child).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import stat
import struct
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

SWITCH = "OMA_FORKSERVER"
"""Set to ``0`` to run every command in its own process."""

IDLE_S = 15 * 60.0
"""How long the server waits for a command, with none running, before it leaves."""

OWN_PROCESS_COMMANDS = frozenset({"dev", "worker", "codec-server"})
"""Commands that run for hours: never forked, and they start no server."""

PRELOAD = (
    "temporalio.client",
    "temporalio.service",
    "temporalio.api.enums.v1",
    "temporalio.api.taskqueue.v1",
    "temporalio.api.workflowservice.v1",
    "oma.client",
    "oma.codec",
    "oma.connection",
    "oma.dev_server",
    "oma._logging",
    "oma.core.results",
    "oma.core.run_events",
    "oma.core.run_input",
    "typer",
    "rich.console",
    "rich.live",
    "rich.progress",
    "rich.table",
    "rich.text",
)
"""What the server imports before it forks: the Temporal client and OMA's
models (the slow part), typer and rich. Not ``oma.cli`` nor its
``oma._cli_*`` modules, whose consoles look at the terminal when created."""

SOCKET_PATH_MAX = 104
"""The longest Unix socket path, in bytes, every platform takes (macOS's; Linux takes 108)."""

PID_TIMEOUT_S = 10.0
"""How long a client waits for its child's pid once the server took the command."""

_STREAMS = ("stdin", "stdout", "stderr")


# -- the client: ``oma`` ---------------------------------------------------


def main() -> None:
    """The ``oma`` console script: the command in a forked child of a warm
    server when one answers, else in this process (starting a server for the
    next commands). Never returns."""
    command = _command(sys.argv[1:])
    if _enabled() and command not in OWN_PROCESS_COMMANDS:
        home = runtime_dir()
        if home is not None:
            path = socket_path(home)
            _run_forked(path)  # returns only when no server took the command
            if command is not None and not {"--help", "-h"} & set(sys.argv[1:]):
                _start_server(path)
    from oma.cli import main as cli_main

    cli_main()


def _enabled() -> bool:
    return (
        os.environ.get(SWITCH, "1") != "0"
        and hasattr(os, "fork")
        and hasattr(socket, "send_fds")
        and hasattr(socket, "AF_UNIX")
    )


def _command(args: list[str]) -> str | None:
    """The command's name: the first argument not an option (``oma -v run``)."""
    return next((a for a in args if not a.startswith("-")), None)


def runtime_dir() -> Path | None:
    """``$XDG_RUNTIME_DIR/oma`` (else ``/tmp/oma-<uid>``), created 0700 if
    missing; ``None`` (the forkserver is then off) when it is not a directory
    of this user's that only they may enter, or too long a path for a Unix
    socket's name."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    home = Path(base) / "oma" if base else Path(f"/tmp/oma-{os.getuid()}")
    try:
        home.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(home)
    except OSError:
        return None
    private = st.st_uid == os.getuid() and st.st_mode & 0o077 == 0
    fits = len(os.fsencode(home)) + len("/0123456789abcdef01234567.sock") < SOCKET_PATH_MAX
    return home if private and stat.S_ISDIR(st.st_mode) and fits else None


def socket_path(home: Path) -> Path:
    """The socket of the server for this interpreter, ``sys.path`` and code."""
    import hashlib

    package = Path(__file__).resolve().parent
    stamps: list[Any] = [sys.executable, sys.version, sys.path]
    for entry in sys.path:
        with contextlib.suppress(OSError):
            stamps.append(os.stat(entry or ".").st_mtime_ns)
    for root, _, files in os.walk(package, followlinks=True):
        for name in files:
            if name.endswith(".py"):
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(root, name))
                    stamps.append((root, name, st.st_mtime_ns, st.st_size))
    digest = hashlib.sha256(json.dumps(stamps).encode()).hexdigest()[:24]
    return home / f"{digest}.sock"


FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def _run_forked(path: Path) -> None:
    """Run the command in a child of the server at ``path`` and leave with its
    status; return when no server took it (none listens, or the child could
    not begin it), the command not having run."""
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)  # a closed stdin cannot be passed on: run here
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(1.0)
        sock.connect(str(path))
    except OSError:
        return
    # a signal before the child's pid is known waits for it
    target: list[int] = []
    pending: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        if not target:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(target[0], signum)

    defaults = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    try:
        socket.send_fds(sock, [b"\0"], [0, 1, 2])
        sock.sendall(_frame(_request()))
        sock.settimeout(PID_TIMEOUT_S)
        replies = sock.makefile("rb")
        first = json.loads(replies.readline() or b"{}")
    except TimeoutError:
        # a child that has not said its pid yet cannot now (its write fails):
        # the command does not run twice, but it does not run here either
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        print(
            f"error: the oma forkserver ({path}) took the command but did not start it "
            f"within {PID_TIMEOUT_S:.0f} s; {SWITCH}=0 runs commands in their own process.",
            file=sys.stderr,
        )
        os._exit(1)
    except (OSError, ValueError):
        first = {}  # no child began the command
    if "pid" not in first:
        for signum, handler in defaults.items():
            signal.signal(signum, handler)
        if pending:
            os._exit(130)
        return
    pid = int(first["pid"])
    target.append(pid)
    for early in pending:
        forward(early, None)
    signal.signal(signal.SIGTSTP, lambda *_: _suspend(pid))
    sock.settimeout(None)
    try:
        last = json.loads(replies.readline() or b"{}")
    except (OSError, ValueError):
        last = {}
    if "status" not in last:
        _wait_gone(pid)
        print(
            f"error: the oma forkserver ({path}) ended before the command (pid {pid}) did; "
            f"its exit status is unknown. {SWITCH}=0 runs commands in their own process.",
            file=sys.stderr,
        )
        os._exit(1)
    _exit_like(int(last["status"]))


def _request() -> dict[str, Any]:
    streams = [getattr(sys, name) for name in _STREAMS]
    return {
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "umask": _umask(),
        "stdio": [
            {
                "encoding": s.encoding,
                "errors": s.errors,
                "line_buffering": s.line_buffering,
            }
            for s in streams
        ],
    }


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _suspend(pid: int) -> None:
    """Ctrl-Z: stop the child with this process; continue it with this one
    (``fg``, ``bg``)."""
    handler = signal.signal(signal.SIGTSTP, signal.SIG_DFL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGSTOP)
    os.kill(os.getpid(), signal.SIGTSTP)  # stops here, until SIGCONT
    signal.signal(signal.SIGTSTP, handler)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def _wait_gone(pid: int) -> None:
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:  # the pid was reused by someone else's process
            return
        time.sleep(0.1)


def _exit_like(status: int) -> NoReturn:
    """Leave as the child did: its exit code, or the signal that ended it."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)


def _start_server(path: Path) -> None:
    """Start the server for ``path`` in the background, in its own session,
    detached from this command's terminal and output."""
    import subprocess

    code = (
        "import json, sys; sys.path[:] = json.loads(sys.argv[2]); "
        "from oma._forkserver import serve; serve(sys.argv[1])"
    )
    log = path.with_suffix(".log")
    with contextlib.suppress(OSError), open(log, "ab") as out:
        subprocess.Popen(
            [sys.executable, "-c", code, str(path), json.dumps(sys.path)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return struct.pack("!I", len(body)) + body


# -- the server ------------------------------------------------------------


def serve(path: str | Path, idle_s: float = IDLE_S) -> None:
    """Serve commands on the Unix socket ``path`` until ``idle_s`` seconds pass
    with no command running and none arriving, or SIGTERM. Leaves at once when
    another server holds ``path`` (its ``.lock``) or when the imports started a
    thread (forking would not be safe)."""
    import fcntl
    import importlib

    path = Path(path)
    lock = open(path.with_suffix(".lock"), "w")  # noqa: SIM115 (held for life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another server serves this socket
    for module in PRELOAD:
        importlib.import_module(module)
    if (threads := _threads()) != 1:
        print(f"not serving: the imports started {threads - 1} thread(s)", file=sys.stderr)
        return
    _Server(path, lock.fileno()).run(idle_s)


class _Server:
    def __init__(self, path: Path, lock_fd: int) -> None:
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        staging = path.with_suffix(f".{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            staging.unlink()
        self.listener.bind(str(staging))
        self.listener.listen(64)
        os.replace(staging, path)  # a stale socket of a dead server is replaced
        self.inode = os.stat(path).st_ino
        path.with_suffix(".pid").write_text(f"{os.getpid()}\n")
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.own_fds = [self.listener.fileno(), self.wake_r, self.wake_w, lock_fd]
        self.children: dict[int, socket.socket] = {}
        """pid -> the connection of the client that waits for it"""
        self.killed: set[int] = set()

    def run(self, idle_s: float) -> None:
        import select

        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, _leave)
        idle_since = time.monotonic()
        try:
            while True:
                if self.children:
                    idle_since, timeout = time.monotonic(), None
                else:
                    timeout = idle_s - (time.monotonic() - idle_since)
                    if timeout <= 0:
                        return
                watched: list[Any] = [self.listener, self.wake_r]
                watched += [c for p, c in self.children.items() if p not in self.killed]
                ready, _, _ = select.select(watched, [], [], timeout)
                if self.wake_r in ready:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(self.wake_r, 512):
                            pass
                    self._reap()
                for pid, conn in list(self.children.items()):
                    if conn in ready:
                        # its client went away (killed): so does the command
                        self.killed.add(pid)
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                if self.listener in ready:
                    self._accept()
        finally:
            with contextlib.suppress(OSError):
                if os.stat(self.path).st_ino == self.inode:
                    self.path.unlink()
                    self.path.with_suffix(".pid").unlink()
            self.listener.close()

    def _reap(self) -> None:
        """Tell each client whose child has ended how it ended."""
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.killed.discard(pid)
            conn = self.children.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"status": status}).encode() + b"\n")
                conn.close()

    def _accept(self) -> None:
        """Take one command and fork its child; a request that is not one is
        dropped (its client then runs the command itself)."""
        conn, _ = self.listener.accept()
        fds: list[int] = []
        try:
            conn.settimeout(2.0)
            if not _same_user(conn):
                raise ValueError("another user")
            _, fds, _, _ = socket.recv_fds(conn, 1, 3)
            (size,) = struct.unpack("!I", _read_exactly(conn, 4))
            request = json.loads(_read_exactly(conn, size))
            if len(fds) != 3:
                raise ValueError("expected stdin, stdout and stderr")
            conn.settimeout(None)
        except (OSError, ValueError):
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        others = [c.fileno() for c in self.children.values()]
        pid = os.fork()
        if pid == 0:
            _child(conn, fds, request, self.own_fds + others, self.path.with_suffix(".log"))
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn


def _leave(_signum: int, _frame: Any) -> NoReturn:
    raise SystemExit(0)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def _same_user(conn: socket.socket) -> bool:
    if not hasattr(socket, "SO_PEERCRED"):
        return True  # the socket's directory admits its user only
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", creds)[1]
    return uid == os.getuid()


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ValueError("the request ended early")
        data += chunk
    return data


def _child(
    conn: socket.socket,
    fds: list[int],
    request: dict[str, Any],
    server_fds: list[int],
    log: Path,
) -> NoReturn:
    """In the forked child: become the client's command (its stdio, directory,
    environment, umask and argv), say so with its pid, then run it."""
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in server_fds:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        sys.argv = list(request["argv"])
        for target, (name, spec) in enumerate(zip(_STREAMS, request["stdio"], strict=True)):
            raw = io.FileIO(target, "r" if target == 0 else "w", closefd=False)
            buffered = io.BufferedReader(raw) if target == 0 else io.BufferedWriter(raw)
            stream = io.TextIOWrapper(
                buffered,
                encoding=spec["encoding"],
                errors=spec["errors"],
                line_buffering=spec["line_buffering"],
            )
            setattr(sys, name, stream)
            setattr(sys, f"__{name}__", stream)
        conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
        conn.close()
    except BaseException:
        # before the command began: its client runs it itself; why, in the log
        with contextlib.suppress(OSError), open(log, "a") as out:
            import traceback

            traceback.print_exc(file=out)
        os._exit(70)  # EX_SOFTWARE
    try:
        from oma.cli import main as cli_main

        cli_main()  # leaves with os._exit
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)
