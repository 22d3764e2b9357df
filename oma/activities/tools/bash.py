"""``bash``: run a shell command in the agent's working directory.

Not a sandbox: the command runs with the worker's user and can read and
write anything that user can, inside ``cwd`` or not (the file tools'
sandbox, ``oma.activities.tools.sandbox``, does not apply). What it does
bound: time (a timeout, then the process group is killed), the process tree
(the command runs in a process group of its own, killed whole on a timeout, a
cancellation, once the command exits, and when the worker dies), the environment (a short allowlist
of the worker's variables, so that a credential in the worker's environment
is not one ``env`` away from the model's transcript), and the output (the
start and end of stdout within the cap, the redacted tail of stderr).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from oma.activities._attempt import attempt_superseded
from oma.activities.tools._progress import reporting
from oma.activities.tools.tool import BuiltinTool, ToolContext, ToolError, ToolOutput
from oma.core.rules.redact import redact
from oma.runtime.process_group import (
    StderrTail,
    WorkerTiedGroup,
    describe_exit,
    kill_group,
    signal_group,
    wait_exited,
)

DEFAULT_TIMEOUT_S = 120.0
"""Seconds a command may run when the call gives no ``timeout``."""

MAX_TIMEOUT_S = 600.0
"""The longest ``timeout`` a call may give (seconds)."""

KILL_GRACE_S = 1.0
"""Seconds between SIGTERM and SIGKILL when the process group is killed."""

PIPE_DRAIN_S = 2.0
"""Seconds to wait, once the process group is killed, for stdout and stderr
to close (a process that left the group may hold them); then the output read
so far is used."""

ENV_ALLOWLIST = frozenset(
    {
        "HOME",
        "LANG",
        "LANGUAGE",
        "LC_ALL",
        "LC_CTYPE",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TEMP",
        "TERM",
        "TMP",
        "TMPDIR",
        "TZ",
        "USER",
    }
)
"""The worker's environment variables a command sees (the original project's
allowlist, plus ``LANGUAGE``, ``LC_CTYPE`` and ``TZ``); ``ToolContext.env``
adds to them."""

_READ_CHUNK_BYTES = 64 * 1024
_LAST_LINE_CHARS = 200


class BashInput(BaseModel):
    """Input of ``bash``."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(
        min_length=1, description="The command to run, as with `bash -c` (pipes, &&, etc.)."
    )
    timeout: float = Field(
        default=DEFAULT_TIMEOUT_S,
        gt=0,
        le=MAX_TIMEOUT_S,
        description=f"Seconds before the command is killed (default {DEFAULT_TIMEOUT_S:g}, "
        f"at most {MAX_TIMEOUT_S:g}).",
    )


DESCRIPTION = f"""\
Run a bash command (`bash -c`, non-interactive, no stdin) in the working \
directory, and return its exit code, its stdout, and the end of its stderr \
(credentials in stderr are redacted). A non-zero exit is an error. The \
command is killed, with every process it started, after `timeout` seconds \
(default {DEFAULT_TIMEOUT_S:g}, at most {MAX_TIMEOUT_S:g}); background \
processes do not outlive the call (they are killed when the command exits). \
Long stdout keeps its start and its end. The environment is minimal (PATH, \
HOME, USER, LANG, TMPDIR and a few more). Unlike the file tools, bash is not \
confined to the working directory: it can reach anything the worker's user \
can, so prefer file_read, file_write, file_edit, glob and grep for files."""


async def bash(args: BashInput, ctx: ToolContext) -> ToolOutput:
    """Run ``args.command`` and report how it ended.

    The content starts with ``exit code N``, ``killed by signal NAME`` or
    ``timed out after T s: ...``, followed by ``--- stdout ---`` and
    ``--- stderr (redacted) ---`` sections (each left out when empty; ``(no
    output)`` when both are). ``is_error`` unless the exit code is 0.

    The command runs in a ``WorkerTiedGroup``: it dies with the worker.
    ``CancelledError`` propagates after the process group is killed: SIGTERM,
    then SIGKILL after ``KILL_GRACE_S``; or SIGKILL at once when Temporal no
    longer accepts this attempt (``attempt_superseded``), since its next
    attempt may already be running the command again.
    """
    try:
        group = await WorkerTiedGroup.start()
    except OSError as err:
        raise ToolError(f"cannot start bash: {err.strerror or err}") from None
    try:
        return await _run(args, ctx, group)
    finally:
        await group.close()


async def _run(args: BashInput, ctx: ToolContext, group: WorkerTiedGroup) -> ToolOutput:
    pgid = group.pgid
    proc = await _spawn(args.command, ctx, group)
    assert proc.stdout is not None and proc.stderr is not None
    stdout = _Stdout(keep=ctx.max_output_chars)
    stderr = StderrTail()
    readers = {
        asyncio.create_task(_read(proc.stdout, stdout.add)),
        asyncio.create_task(_read(proc.stderr, stderr.add)),
    }
    timed_out = False
    try:
        with reporting(ctx, stdout.last_line):
            try:
                await asyncio.wait_for(wait_exited(proc), args.timeout)
            except TimeoutError:
                timed_out = True
                await kill_group(proc, KILL_GRACE_S, pgid)
            # what the command left running in its group does not outlive the call
            signal_group(pgid, signal.SIGKILL)
            await asyncio.wait(readers, timeout=PIPE_DRAIN_S)
    except BaseException:
        await kill_group(proc, _kill_grace_s(), pgid)
        raise
    finally:
        await _cancel(readers)
    return _result(args, proc.returncode, timed_out, stdout, stderr, ctx.max_output_chars)


async def _spawn(
    command: str, ctx: ToolContext, group: WorkerTiedGroup
) -> asyncio.subprocess.Process:
    # The allowlist of the worker's environment only, not all of it (as the
    # process and acp backends get).
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOWLIST}
    env.update(ctx.env)
    try:
        return await group.spawn(
            ["bash", "-c", command],
            kill_grace_s=_kill_grace_s,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=ctx.cwd,
            env=env,
        )
    except OSError as err:
        raise ToolError(f"cannot start bash in {str(ctx.cwd)!r}: {err.strerror or err}") from None


def _kill_grace_s() -> float:
    """No grace for an attempt Temporal gave up: its retry may be running."""
    return 0.0 if attempt_superseded() else KILL_GRACE_S


class _Stdout:
    """A command's stdout: its first and its last ``keep`` bytes, and how
    many it wrote in all (a command may print gigabytes before its timeout)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.recent = b""

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.recent = (self.recent + chunk)[-4 * _LAST_LINE_CHARS :]
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: -self.keep]

    def last_line(self) -> str:
        """The last non-empty line so far, redacted and short: the progress note."""
        lines = [ln.strip() for ln in self.recent.decode(errors="replace").splitlines()]
        lines = [ln for ln in lines if ln]
        return redact(lines[-1])[:_LAST_LINE_CHARS] if lines else "bash: no output yet"

    def text(self, budget: int) -> tuple[str, bool]:
        """Stdout within about ``budget`` characters, and whether it was cut:
        whole if it fits, else its first 2/5 and its last 3/5 around a line
        saying how many bytes were left out."""
        complete = self.total == len(self.head) + len(self.tail)
        if complete:
            whole = (self.head + self.tail).decode(errors="replace")
            if len(whole) <= budget:
                return whole, False
        head_n = budget * 2 // 5
        tail_n = budget - head_n
        first = bytes(self.head[:head_n]).decode(errors="replace")
        last = bytes((self.head[-tail_n:] + self.tail)[-tail_n:]).decode(errors="replace")
        left_out = self.total - head_n - tail_n
        return f"{first}\n[... {left_out} bytes of stdout left out ...]\n{last}", True


async def _read(stream: asyncio.StreamReader, sink: Callable[[bytes], None]) -> None:
    while chunk := await stream.read(_READ_CHUNK_BYTES):
        sink(chunk)


async def _cancel(tasks: set[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    # asyncio.wait, unlike gather, does not re-raise the tasks' CancelledError.
    await asyncio.wait(tasks)


def _result(
    args: BashInput,
    code: int | None,
    timed_out: bool,
    stdout: _Stdout,
    stderr: StderrTail,
    max_chars: int,
) -> ToolOutput:
    if timed_out:
        status = (
            f"timed out after {args.timeout:g} s: the command and the processes it started "
            "were killed"
        )
    elif code is not None and code >= 0:
        status = f"exit code {code}"
    else:
        status = describe_exit(code)
    sections = [status]
    err_text = stderr.redacted()
    err_cut = stderr.truncated
    if len(err_text) > max_chars // 3:  # keep room for stdout under a small cap
        err_text, err_cut = "…" + err_text[-(max_chars // 3) :], True
    err_section = ""
    if err_text:
        which = ", its end" if err_cut else ""
        err_section = f"--- stderr (redacted{which}) ---\n{err_text}"
    budget = max(max_chars - len(status) - len(err_section) - 60, max_chars // 3, 1)
    out_text, out_cut = stdout.text(budget)
    if out_text:
        sections.append(f"--- stdout ---\n{out_text.removesuffix(chr(10))}")
    if err_section:
        sections.append(err_section)
    if len(sections) == 1:
        sections[0] += " (no output)"
    return ToolOutput(
        content="\n".join(sections),
        is_error=timed_out or code != 0,
        truncated=out_cut or err_cut,
    )


BASH = BuiltinTool(name="bash", description=DESCRIPTION, input_model=BashInput, execute=bash)
