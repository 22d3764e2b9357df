"""The ``process_run`` activity: one run of a ``process`` agent's local command.

Outcomes follow the process-outcome table of external-agents.md ("Process
backend"): stdout with exit 0 is the output, stderr with exit 0 is ignored, a
non-zero exit or a signal is a failure carrying the redacted stderr, and a
cancellation kills the child's whole process tree. The process backend reports
no token usage; the workflow counts it as zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable

from temporalio import activity

from oma.activities._attempt import (
    attempt_number,
    attempt_superseded,
    await_server,
    with_attempt,
)
from oma.activities._heartbeat import Heartbeat, heartbeating
from oma.core.contracts.names import ActivityName
from oma.core.contracts.process import ProcessRunInput, ProcessRunOutput
from oma.core.rules.redact import redact
from oma.core.schema.errors import (
    EmptyPromptError,
    ProcessFailedError,
    ProcessSpawnError,
)
from oma.core.schema.limits import MAX_OUTPUT_BYTES, check_output_size
from oma.runtime.process_group import (
    StderrTail,
    WorkerTiedGroup,
    kill_group,
    signal_group,
    wait_exited,
)

HEARTBEAT_INTERVAL_S = 0.5
"""Most seconds between two heartbeats (new stdout sends one sooner, at most
every ``PROGRESS_HEARTBEAT_GAP_S``). Temporal delivers activity cancellation
(and the news that it gave this attempt up) in the answer to a heartbeat."""

KILL_GRACE_S = 1.0
"""Seconds between SIGTERM and SIGKILL when the process group is killed."""

PIPE_DRAIN_S = 2.0
"""Seconds to wait, after the command exits, for its stdout and stderr to
close. A background descendant that still holds them past this is killed with
the rest of the process group, and the output read so far is used."""

_LAST_LINE_CHARS = 200
_READ_CHUNK_BYTES = 64 * 1024


@activity.defn(name=ActivityName.PROCESS_RUN)
async def process_run(inp: ProcessRunInput) -> ProcessRunOutput:
    """Run ``inp.backend.command`` once and return its stdout.

    The text sent is ``system_prompt + "\\n\\n" + prompt`` (just ``prompt``
    when ``system_prompt`` is empty). ``backend.input`` says where it goes:
    ``stdin`` (written, then stdin is closed), ``argument`` (the last argv
    element) or ``none`` (stdin is ``/dev/null``). The command runs in a
    process group of its own that dies with the worker (``WorkerTiedGroup``:
    a SIGKILLed worker leaves nothing running) and with the run (whatever the
    command leaves in it is killed when it exits), with the worker's
    environment overlaid by ``backend.env``, in ``backend.cwd`` resolved
    against the worker's working directory (default: the worker's working
    directory).

    While it runs the activity heartbeats at least every
    ``HEARTBEAT_INTERVAL_S`` seconds, and within ``PROGRESS_HEARTBEAT_GAP_S``
    of new stdout, with ``{"stdout_bytes": int, "last_line": str}``: the bytes of
    stdout read so far and the last non-empty stdout line (redacted, at most
    200 characters) — progress without shipping the output twice, what
    ``oma run`` shows — and, from
    the second attempt on, ``"attempt": int``.

    Returns ``ProcessRunOutput(stdout=..., exit_code=0, attempt=...)``; stdout
    is decoded as UTF-8 with invalid bytes replaced; ``attempt`` is the
    activity's attempt (``activity.info().attempt``).

    Raises (a worker records the failure of its code, non-retryable,
    details ``{"code", "attempt"}``): ``EMPTY_PROMPT`` when ``input`` is
    ``stdin`` or ``argument`` and the prompt is blank (nothing is spawned);
    ``PROCESS_SPAWN_FAILED`` when the command or ``cwd`` is missing or not
    usable; ``PROCESS_FAILED`` on a non-zero exit or a death by signal, with
    the status and the redacted last ``STDERR_TAIL_BYTES`` of stderr.

    On cancellation (or any other error) the process group gets SIGTERM, then
    SIGKILL after ``KILL_GRACE_S`` seconds, so grandchildren die too; then the
    cancellation propagates. Partial stdout is never returned. When Temporal
    no longer accepts this attempt (``attempt_superseded``: a heartbeat
    refused because the attempt timed out, was retried or reset) the group
    gets SIGKILL at once, with no grace period: the next attempt may already
    run the command.

    Once the command has exited, the outcome is held until the Temporal server
    answers (``await_server``), so that an outage does not lose it.
    """
    if activity.in_activity() and activity.is_cancelled():
        # Cancelled before it started (e.g. the team run was cancelled while
        # this task waited): spawning now would only need killing again.
        raise asyncio.CancelledError()
    backend = inp.backend
    attempt = attempt_number()
    text = f"{inp.system_prompt}\n\n{inp.prompt}" if inp.system_prompt else inp.prompt
    if backend.input != "none" and not inp.prompt.strip():
        raise EmptyPromptError(
            f"agent {inp.agent!r}: the prompt is empty, and its process backend "
            f"takes the prompt on {backend.input!r}"
        )

    try:
        group = await WorkerTiedGroup.start()
    except OSError as err:
        raise ProcessSpawnError(
            f"agent {inp.agent!r}: cannot start the process group of its command: "
            f"{err.strerror or err}"
        ) from err
    output = _Output(attempt)
    try:
        proc = await _spawn(inp, text, group)
        stdin_data = text.encode() if backend.input == "stdin" else None
        with heartbeating(output.heartbeat_details, HEARTBEAT_INTERVAL_S) as output.heartbeat:
            try:
                await _collect(proc, stdin_data, output, group.pgid)
            except BaseException:
                await _kill(proc, attempt, group.pgid)
                raise
            await await_server()
    finally:
        await group.close()  # what the command left in its group ends with it

    code = proc.returncode
    if code == 0:
        check_output_size(inp.agent, output.stdout_bytes)
        stdout = output.stdout.decode("utf-8", errors="replace")
        return ProcessRunOutput(stdout=stdout, attempt=attempt)
    raise ProcessFailedError(_failure_message(inp, code, output))


async def _kill(proc: asyncio.subprocess.Process, attempt: int, pgid: int) -> None:
    if attempt_superseded():
        activity.logger.warning(
            "Temporal no longer accepts attempt %d of this process run: killing its "
            "process group (pid %d) at once",
            attempt,
            proc.pid,
        )
        await kill_group(proc, 0.0, pgid)
    else:
        await kill_group(proc, KILL_GRACE_S, pgid)


async def _spawn(
    inp: ProcessRunInput, text: str, group: WorkerTiedGroup
) -> asyncio.subprocess.Process:
    backend = inp.backend
    cwd = os.path.abspath(backend.cwd) if backend.cwd is not None else None
    if cwd is not None and not os.path.isdir(cwd):
        raise ProcessSpawnError(
            f"agent {inp.agent!r}: cannot start command {backend.command!r}: "
            f"cwd {cwd!r} is not a directory"
        )
    argv = [backend.command, *backend.args]
    if backend.input == "argument":
        argv.append(text)
    try:
        return await group.spawn(
            argv,
            kill_grace_s=lambda: 0.0 if attempt_superseded() else KILL_GRACE_S,
            stdin=asyncio.subprocess.PIPE
            if backend.input == "stdin"
            else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **backend.env} if backend.env else None,
            cwd=cwd,
            limit=2**16,
        )
    except OSError as err:
        where = f" in cwd {cwd!r}" if cwd is not None and err.filename == cwd else ""
        raise ProcessSpawnError(
            f"agent {inp.agent!r}: cannot start command {backend.command!r}{where}: "
            f"{err.strerror or err}"
        ) from err


class _Output:
    """What the command has written so far: all of stdout, the tail of stderr."""

    def __init__(self, attempt: int) -> None:
        self.attempt = attempt
        self.stdout = bytearray()
        self.stdout_bytes = 0
        self.stderr = StderrTail()
        self.heartbeat: Heartbeat | None = None

    def add_stdout(self, chunk: bytes) -> None:
        # keep one byte over the limit: enough to know it was exceeded
        room = MAX_OUTPUT_BYTES + 1 - len(self.stdout)
        if room > 0:
            self.stdout += chunk[:room]
        self.stdout_bytes += len(chunk)
        if self.heartbeat is not None:
            self.heartbeat.changed()

    def heartbeat_details(self) -> dict[str, object]:
        tail = self.stdout[-4 * _LAST_LINE_CHARS :].decode("utf-8", errors="replace")
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        last_line = redact(lines[-1])[:_LAST_LINE_CHARS] if lines else ""
        progress: dict[str, object] = {"stdout_bytes": self.stdout_bytes, "last_line": last_line}
        return with_attempt(progress, self.attempt)


async def _collect(
    proc: asyncio.subprocess.Process, stdin_data: bytes | None, output: _Output, pgid: int
) -> None:
    """Feed stdin and read stdout and stderr concurrently (so that neither pipe
    fills and blocks the child) until the command has exited."""
    assert proc.stdout is not None and proc.stderr is not None
    readers = {
        asyncio.create_task(_read(proc.stdout, output.add_stdout)),
        asyncio.create_task(_read(proc.stderr, output.stderr.add)),
    }
    helpers = set()
    if stdin_data is not None:
        assert proc.stdin is not None
        helpers.add(asyncio.create_task(_write(proc.stdin, stdin_data)))
    try:
        await wait_exited(proc)
        _, still_open = await asyncio.wait(readers, timeout=PIPE_DRAIN_S)
        if still_open:
            signal_group(pgid, signal.SIGKILL)
    finally:
        await _cancel(readers | helpers)


async def _read(stream: asyncio.StreamReader, sink: Callable[[bytes], None]) -> None:
    while chunk := await stream.read(_READ_CHUNK_BYTES):
        sink(chunk)


async def _write(stdin: asyncio.StreamWriter, data: bytes) -> None:
    # A command that exits without reading its stdin is not an error here;
    # its exit status says how it went.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
    stdin.close()


async def _cancel(tasks: set[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    # asyncio.wait, unlike gather, does not re-raise the tasks' CancelledError.
    await asyncio.wait(tasks)


def _failure_message(inp: ProcessRunInput, code: int | None, output: _Output) -> str:
    command = inp.backend.command
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        status = f"command {command!r} was killed by signal {name}"
    else:
        status = f"command {command!r} exited with status {code}"
    message = f"agent {inp.agent!r}: {status}"
    stderr = output.stderr.redacted()
    if stderr:
        which = "the end of " if output.stderr.truncated else ""
        message += f"\n{which}stderr (redacted):\n{stderr}"
    return message
