"""Where log lines go, and one line for an expected failure.

The ``oma`` commands that follow a run (``run``, ``plan``, ``approvals``, ...)
keep the Temporal SDK's log lines (its warnings such as ``Query not found``,
the in-process worker's lines) out of their output: they go to
``.oma/oma.log``, or to stderr with ``oma -v``. A worker (``oma worker``,
``oma dev``, ``python worker.py``) logs to stderr, its console. Either way
the SDK core's own lines are forwarded through Python logging (by default the
core writes them to stdout, where they would corrupt ``oma run --json``).

An activity that fails with one of OMA's errors (a process exiting non-zero,
a script exhausted: ``oma.core.schema.errors``) is the run's business, reported in
its result; the worker logs it as one line, not the SDK's traceback.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class OneLineExpectedFailures(logging.Formatter):
    """A formatter that writes a record whose exception is an OMA error (an
    ``OMAError``, or an ``ApplicationError`` whose ``type`` is an OMA error
    code) as one line, ``... : CODE: first line of the message``; any other
    exception keeps its traceback."""

    def format(self, record: logging.LogRecord) -> str:
        exc = record.exc_info[1] if record.exc_info else None
        code_and_message = _expected(exc)
        if code_and_message is None:
            return super().format(record)
        one = logging.makeLogRecord(record.__dict__)
        one.exc_info = None
        one.exc_text = None
        lines = code_and_message.strip().splitlines() or [""]
        extra = len(lines) - 1
        more = f" [+{extra} line{'' if extra == 1 else 's'}]" if extra else ""
        one.msg = f"{record.getMessage()}: {lines[0]}{more}"
        one.args = None
        return super().format(one)


def _expected(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    from temporalio.exceptions import ApplicationError

    from oma.core.schema.errors import ERRORS, OMAError

    if isinstance(exc, OMAError):
        return str(exc)
    if isinstance(exc, ApplicationError) and exc.type in ERRORS:
        return f"{exc.type}: {exc.message}"
    return None


class _FileOnFirstLine(logging.FileHandler):
    """A file handler that creates its file (and directory) at its first line,
    so a command that logs nothing leaves no ``.oma/`` behind; when the file
    cannot be written (a read-only directory), its lines go to stderr."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8", delay=True)

    def _open(self) -> Any:
        try:
            Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
            return super()._open()
        except OSError:
            return sys.stderr


_routed: list[str] = []
_forwarded: list[bool] = []


def route_logs(log_file: Path | None, level: int = logging.INFO) -> None:
    """Send Python logging at ``level`` and above, and the SDK core's warnings,
    to ``log_file`` (created with its directory; stderr when ``None`` or when it
    cannot be written). Once per process: later calls do nothing."""
    if _routed:
        return
    handler: logging.Handler = (
        logging.StreamHandler() if log_file is None else _FileOnFirstLine(log_file)
    )
    _routed.append(str(log_file))
    handler.setFormatter(OneLineExpectedFailures(FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    forward_core_logs()


def forward_core_logs() -> None:
    """Have the SDK core's warnings go through Python logging (logger
    ``temporalio.core``) instead of stdout, by setting the default Temporal
    ``Runtime``: before this process's first client connects, or it has no
    effect on that client. Once per process."""
    if _forwarded:
        return
    _forwarded.append(True)
    from temporalio.runtime import (
        LogForwardingConfig,
        LoggingConfig,
        Runtime,
        TelemetryConfig,
        TelemetryFilter,
    )

    forwarding = LogForwardingConfig(logger=logging.getLogger("temporalio.core"))
    telemetry = TelemetryConfig(
        logging=LoggingConfig(
            filter=TelemetryFilter(core_level="WARN", other_level="ERROR"), forwarding=forwarding
        )
    )
    Runtime.set_default(Runtime(telemetry=telemetry), error_if_already_set=False)
