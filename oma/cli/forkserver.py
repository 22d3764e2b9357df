"""The ``oma`` command's forkserver, opt-in (``OMA_FORKSERVER=1``): one
background process per installation that has imported the Temporal SDK and
OMA's models once, and forks a child for each command, so a command does not
spend a second importing them. Off (the default), every command runs in its
own process and none leaves a process behind.

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
  as the client had them, and runs ``oma.cli.app.main`` as a fresh process would.
  The child's pid comes back first; the client forwards SIGINT, SIGTERM,
  SIGHUP and SIGQUIT to it (Ctrl-C cancels the run as always; a signal the
  caller ignores, as under ``nohup``, stays ignored in the child), stops and
  continues it with itself (Ctrl-Z, ``fg``), and leaves with the child's exit
  status, or by the signal that ended it. A client killed outright (SIGKILL)
  takes its child with it.
- With no server answering, the command runs in its own process as before and
  starts one in the background for the next commands (with only the
  environment variables an interpreter's start-up reads: no credential stays
  in it). ``oma dev``, ``oma worker``, ``oma codec-server`` (long-lived) and
  shell-completion set-up (which looks at the parent process) always run in
  their own process; so does every command unless ``OMA_FORKSERVER=1``.
- A server serves one context, which is in its socket's name: the
  *family* (the interpreter, its flags, ``sys.path``, and what a child cannot
  change about itself: user, groups, namespaces, cgroup, resource limits,
  niceness, ``LD_PRELOAD``) and the *code* (the modification times of the
  site-packages directories, which an install or upgrade changes, and of
  every ``.py`` file of the ``oma`` package). A caller in another context gets
  a server of its own; a new server of a family ends the older ones (after
  their running commands), so an edit or an upgrade leaves no stale server.
- Its socket lives in ``$XDG_RUNTIME_DIR/oma`` (else, or when that is not a
  directory, ``/tmp/oma-<uid>``), a directory only its user may enter
  (checked; anything else turns the forkserver off); on Linux the server also
  checks that the peer is that user. SIGTERM, or its socket removed, makes it
  stop taking commands and leave once those running have ended; so does
  ``IDLE_S`` without a command; a new server ends the oldest beyond
  ``MAX_SERVERS``.
- Forking is safe because the server starts no event loop, no Temporal
  runtime and no thread (the thread count is checked after the imports), and
  imports nothing that keeps terminal state (``oma.cli.app`` and its consoles are
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
"""Set to ``1`` to run commands in a warm forkserver's children; unset (or any
other value), every command runs in its own process and starts no server."""

IDLE_S = 15 * 60.0
"""How long the server waits for a command, with none running, before it leaves."""

OWN_PROCESS_COMMANDS = frozenset({"dev", "worker", "codec-server"})
"""Commands that run for hours: never forked, and they start no server."""

OWN_PROCESS_OPTIONS = frozenset({"--install-completion", "--show-completion"})
"""Options that look at the process's parent (the shell): never forked."""

SERVER_ENV = ("PATH", "HOME", "LANG", "TMPDIR", "LD_PRELOAD", "LD_LIBRARY_PATH", "VIRTUAL_ENV")
"""The environment variables a server keeps (with ``LC_*`` and ``PYTHON*``):
what the interpreter's start-up reads. Each child takes its caller's whole
environment instead."""

PRELOAD = (
    "temporalio.client",
    "temporalio.service",
    "temporalio.api.enums.v1",
    "temporalio.api.taskqueue.v1",
    "temporalio.api.workflowservice.v1",
    "oma.client.api",
    "oma.runtime.codec",
    "oma.runtime.connection",
    "oma.runtime.dev_server",
    "oma.runtime.logs",
    "oma.core.schema.results",
    "oma.core.schema.run_events",
    "oma.core.schema.run_input",
    "typer",
    "rich.console",
    "rich.live",
    "rich.progress",
    "rich.table",
    "rich.text",
)
"""What the server imports before it forks: the Temporal client and OMA's
models (the slow part), typer and rich. Not ``oma.cli.app`` nor its
command modules (``oma.cli.*``), whose consoles look at the terminal when created."""

SOCKET_PATH_MAX = 104
"""The longest Unix socket path, in bytes, every platform takes (macOS's; Linux takes 108)."""

PID_TIMEOUT_S = 5.0
"""How long a client waits for its child's pid once the server took the
command, before it runs the command itself (a stopped or wedged server)."""

MAX_SERVERS = 4
"""How many servers one runtime directory keeps at most (the newest)."""

CHECK_S = 30.0
"""How often, in seconds, an idle server checks that its socket is still its own."""

_STREAMS = ("stdin", "stdout", "stderr")


# -- the client: ``oma`` ---------------------------------------------------


def main() -> None:
    """The ``oma`` console script: the command in a forked child of a warm
    server when one answers, else in this process (starting a server for the
    next commands). Never returns."""
    args = sys.argv[1:]
    command = _command(args)
    if _enabled() and command not in OWN_PROCESS_COMMANDS and not OWN_PROCESS_OPTIONS & set(args):
        home = runtime_dir()
        if home is not None:
            path = socket_path(home)
            _run_forked(path)  # returns only when no server took the command
            if command is not None and not {"--help", "-h"} & set(args):
                _start_server(path)
    from oma.cli.app import main as cli_main

    cli_main()


def _enabled() -> bool:
    return (
        os.environ.get(SWITCH) == "1"
        and hasattr(os, "fork")
        and hasattr(socket, "send_fds")
        and hasattr(socket, "AF_UNIX")
    )


def _command(args: list[str]) -> str | None:
    """The command's name: the first argument not an option (``oma -v run``)."""
    return next((a for a in args if not a.startswith("-")), None)


def runtime_dir() -> Path | None:
    """``$XDG_RUNTIME_DIR/oma`` (else, or when that variable names no
    directory, ``/tmp/oma-<uid>``), created 0700 if missing; ``None`` (the
    forkserver is then off) when it is not a directory of this user's that
    only they may enter, or too long a path for a Unix socket's name."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    usable = base is not None and os.path.isdir(base)
    home = Path(base) / "oma" if base and usable else Path(f"/tmp/oma-{os.getuid()}")
    try:
        home.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(home)
    except OSError:
        return None
    private = st.st_uid == os.getuid() and st.st_mode & 0o077 == 0
    fits = len(os.fsencode(home)) + len("/0123456789ab-0123456789ab.sock") < SOCKET_PATH_MAX
    return home if private and stat.S_ISDIR(st.st_mode) and fits else None


def socket_path(home: Path) -> Path:
    """The socket of the server for this context: ``<family>-<code>.sock``
    (see the module's docstring), each a digest of 12 hex digits."""
    import hashlib

    def digest(stamps: list[Any]) -> str:
        return hashlib.sha256(json.dumps(stamps, default=str).encode()).hexdigest()[:12]

    return home / f"{digest(_family())}-{digest(_code())}.sock"


def _family() -> list[Any]:
    """What a server shares with its callers and no child can change."""
    import resource

    stamps: list[Any] = [sys.executable, sys.version, sys.path, sys.flags, sys.warnoptions]
    stamps += [sys._xoptions, os.environ.get("PYTHONHASHSEED")]
    stamps += [os.getuid(), os.getgid(), os.getegid(), sorted(os.getgroups())]
    stamps += [os.getpriority(os.PRIO_PROCESS, 0)]
    stamps += [os.environ.get(name) for name in ("LD_PRELOAD", "LD_LIBRARY_PATH")]
    stamps += [
        resource.getrlimit(getattr(resource, name))
        for name in sorted(dir(resource))
        if name.startswith("RLIMIT_")
    ]
    with contextlib.suppress(OSError):  # Linux: namespaces and cgroup
        stamps += [os.readlink(f"/proc/self/ns/{ns}") for ns in sorted(os.listdir("/proc/self/ns"))]
        stamps.append(Path("/proc/self/cgroup").read_text())
    return stamps


def _code() -> list[Any]:
    """What changes when the code does: the site-packages directories (an
    install or an upgrade) and every ``.py`` file of the ``oma`` package."""
    import site

    stamps: list[Any] = []
    sites = {*site.getsitepackages(), site.getusersitepackages()}
    for entry in sys.path:
        if entry in sites:
            with contextlib.suppress(OSError):
                stamps.append((entry, os.stat(entry).st_mtime_ns))
    package = Path(__file__).resolve().parent.parent  # oma/
    for root, _, files in os.walk(package, followlinks=True):
        for name in files:
            if name.endswith(".py"):
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(root, name))
                    stamps.append((root, name, st.st_mtime_ns, st.st_size))
    return stamps


FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def _run_forked(path: Path) -> None:
    """Run the command in a child of the server at ``path`` and leave with its
    status; return when no server took it (none listens, or no child began
    it in time), the command not having run."""
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)  # a closed stdin cannot be passed on: run here
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(1.0)
        sock.connect(str(path))
    except OSError:
        return
    # what the caller ignores (nohup: SIGHUP) the child ignores; the rest is
    # forwarded, and a signal before the child's pid is known waits for it
    ignored = [s for s in FORWARDED if signal.getsignal(s) == signal.SIG_IGN]
    target: list[int] = []
    pending: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        if not target:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(target[0], signum)

    defaults = {s: signal.signal(s, forward) for s in FORWARDED if s not in ignored}
    replies = sock.makefile("rb")
    try:
        socket.send_fds(sock, [b"\0"], [0, 1, 2])
        sock.sendall(_frame(_request(ignored)))
        sock.settimeout(PID_TIMEOUT_S)
        first = _reply(replies)
    except TimeoutError:
        first = _late_pid(sock)
    except OSError:
        first = {}  # no child began the command
    if "pid" not in first:
        sock.close()  # (a child that had not begun now cannot)
        for signum, handler in defaults.items():
            signal.signal(signum, handler)
        if pending:
            os._exit(130)
        return
    pid = int(first["pid"])
    target.append(pid)
    for early in pending:
        forward(early, None)
    if signal.getsignal(signal.SIGTSTP) != signal.SIG_IGN:
        signal.signal(signal.SIGTSTP, lambda *_: _suspend(pid))
    sock.settimeout(None)
    exit_code: int | None = None
    while (reply := _reply(replies)) and "status" not in reply:
        exit_code = reply.get("exit", exit_code)  # the child's own word, before it leaves
    if "status" in reply:
        _exit_like(int(reply["status"]))
    _wait_gone(pid)
    if exit_code is not None:  # the server is gone, not the child's word
        os._exit(exit_code)
    print(
        f"error: the oma forkserver ({path}) ended before the command (pid {pid}) did; "
        f"its exit status is unknown. Without {SWITCH}=1 commands run in their own process.",
        file=sys.stderr,
    )
    os._exit(1)


def _reply(replies: Any) -> dict[str, Any]:
    """The next message from the server or the child; ``{}`` at the end.
    Raises ``TimeoutError`` when none comes within the socket's timeout."""
    try:
        line = replies.readline()
        return dict(json.loads(line)) if line else {}
    except TimeoutError:
        raise
    except (OSError, ValueError):
        return {}


def _late_pid(sock: socket.socket) -> dict[str, Any]:
    """No pid in time: shut the connection, so that a child that has not said
    its pid cannot any more (its write fails, and it leaves without running
    the command), then read what arrived before that."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.settimeout(0.5)
    try:
        return _reply(sock.makefile("rb"))
    except TimeoutError:
        return {}


def _request(ignored: list[signal.Signals]) -> dict[str, Any]:
    streams = [getattr(sys, name) for name in _STREAMS]
    return {
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "umask": _umask(),
        "ignored_signals": [int(s) for s in ignored],
        "stdio": [
            {
                "encoding": s.encoding,
                "errors": s.errors,
                "line_buffering": s.line_buffering,
                "write_through": s.write_through,
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
    detached from this command's terminal and output, unless one refused to
    serve this context already (``.refused``, with its reason)."""
    import subprocess

    if path.with_suffix(".refused").exists():
        return
    code = (
        "import json, sys; sys.path[:] = json.loads(sys.argv[2]); "
        "from oma.cli.forkserver import serve; serve(sys.argv[1])"
    )
    env = {
        name: value
        for name, value in os.environ.items()
        if name in SERVER_ENV or name.startswith(("LC_", "PYTHON"))
    }
    with contextlib.suppress(OSError), open(path.with_suffix(".log"), "ab") as out:
        subprocess.Popen(
            [sys.executable, "-c", code, str(path), json.dumps(sys.path)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd="/",
            env=env,
            start_new_session=True,
            close_fds=True,
        )


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return struct.pack("!I", len(body)) + body


# -- the server ------------------------------------------------------------


def serve(path: str | Path, idle_s: float = IDLE_S, check_s: float = CHECK_S) -> None:
    """Serve commands on the Unix socket ``path`` until ``idle_s`` seconds pass
    with no command running and none arriving, SIGTERM, or ``path`` removed
    or taken over; then leave once the running commands have ended.

    Leaves at once when another server holds ``path`` (its ``.lock``), and
    refuses to serve (writing why to ``.refused``, which keeps clients from
    starting another) when the imports started a thread: forking a process
    with threads is not safe. Ends the servers its start makes stale
    (``_end_other_servers``)."""
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
        reason = f"not serving: the imports started {threads - 1} thread(s)"
        path.with_suffix(".refused").write_text(reason + "\n")
        print(reason, file=sys.stderr)
        return
    server = _Server(path, lock.fileno())
    _end_other_servers(path)
    server.run(idle_s, check_s)
    # the lock and an empty log go too (a server that starts for this path
    # meanwhile locks a file of its own, or, at worst, notices that its socket
    # was taken over and leaves)
    log = path.with_suffix(".log")
    with contextlib.suppress(OSError):
        path.with_suffix(".lock").unlink()
        if log.stat().st_size == 0:
            log.unlink()


def _end_other_servers(path: Path) -> None:
    """SIGTERM (they leave after their running commands) the servers beside
    ``path`` of its family, which serve older code, and the oldest of the
    rest beyond ``MAX_SERVERS`` (contexts made for one command, such as a
    fresh namespace per command, would otherwise each keep one for
    ``IDLE_S``)."""
    family = path.name.partition("-")[0]
    stale: list[tuple[float, int]] = []
    rest: list[tuple[float, int]] = []
    for pid_file in path.parent.glob("*.pid"):
        if pid_file.with_suffix(".sock") == path or (pid := _server_pid(pid_file)) is None:
            continue
        entry = (pid_file.stat().st_mtime, pid)
        (stale if pid_file.name.startswith(f"{family}-") else rest).append(entry)
    rest.sort()
    for _, pid in stale + rest[: max(0, len(rest) - (MAX_SERVERS - 1))]:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)


def _server_pid(pid_file: Path) -> int | None:
    """The pid in ``pid_file`` if it is that socket's server (its command line
    names the socket), else ``None``: a pid written in another pid namespace,
    or one reused since, is some other process."""
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if os.fsencode(pid_file.with_suffix(".sock")) in cmdline else None


class _Server:
    def __init__(self, path: Path, lock_fd: int) -> None:
        self.path = path
        self.listener: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
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
        self.leaving = False

    def run(self, idle_s: float, check_s: float) -> None:
        import select

        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "leaving", True))
        idle_since = time.monotonic()
        try:
            while not (self.leaving and not self.children):
                if self.children:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since >= idle_s:
                    self.leaving = True
                    continue
                if not self._owns_socket():  # removed, or taken over by another server
                    self.leaving = True
                if self.leaving:
                    self._stop_listening()
                timeout = None if self.children else min(check_s, idle_s)
                watched: list[Any] = [self.wake_r]
                watched += [] if self.listener is None else [self.listener]
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
                if self.listener is not None and self.listener in ready:
                    self._accept(self.listener)
        finally:
            self._stop_listening()

    def _owns_socket(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self.inode
        except OSError:
            return False

    def _stop_listening(self) -> None:
        """No more commands: the socket (if still this server's) and its pid
        file go; running commands go on."""
        if self.listener is None:
            return
        if self._owns_socket():
            with contextlib.suppress(OSError):
                self.path.unlink()
                self.path.with_suffix(".pid").unlink()
        self.listener.close()
        self.listener = None

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

    def _accept(self, listener: socket.socket) -> None:
        """Take one command and fork its child; a request that is not one is
        dropped (its client then runs the command itself)."""
        conn, _ = listener.accept()
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
    environment, umask, ignored signals and argv), say so with its pid, run
    it, and say how it ended (the server says it too, once it has reaped the
    child: the client takes the server's word, and this one if the server is
    gone)."""
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for signum in request["ignored_signals"]:
            signal.signal(signum, signal.SIG_IGN)
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
                write_through=spec["write_through"],
            )
            setattr(sys, name, stream)
            setattr(sys, f"__{name}__", stream)
        conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
    except BaseException:
        # before the command began: its client runs it itself; why, in the log
        with contextlib.suppress(OSError), open(log, "a") as out:
            import traceback

            traceback.print_exc(file=out)
        os._exit(70)  # EX_SOFTWARE
    code = _run_cli()
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
    os._exit(code)


def _run_cli() -> int:
    """``oma.cli.app.invoke()``, ending as an interpreter would on an exception
    that escapes it: its traceback on stderr and status 1, or, for Ctrl-C,
    death by SIGINT."""
    try:
        from oma.cli.app import invoke

        return invoke()
    except BaseException as err:
        import traceback

        with contextlib.suppress(Exception):
            traceback.print_exc()
            sys.stderr.flush()
        if isinstance(err, KeyboardInterrupt):
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        return 1
