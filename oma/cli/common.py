"""What every ``oma`` command shares: the consoles, the one-line error exit
(and the CLI's one conversion of an ``OMAError`` that ends a command), the
event loop, where SDK log lines go, and the connection settings.

Light on purpose: ``oma.cli.app`` imports it inside its commands, and nothing
here imports the Temporal SDK at module level (``oma --help`` must not pay
for it).
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from rich.table import Table
    from temporalio.client import Client

    from oma.core.schema.errors import OMAError
    from oma.runtime.connection import Connection


class _Console(Console):
    """A rich ``Console`` whose reader may leave (``oma run ... 2>&1 | head``).

    rich's own answer to a broken pipe is ``SystemExit(1)``. Raised in one of
    ``oma run``'s asyncio tasks (its event lines), that escapes the event loop
    at once, and ``asyncio.run`` then cancels every task together, the
    in-process worker's among them, which never finish: the command hung,
    deaf to SIGTERM. Here stderr, where progress goes, falls silent and the
    command goes on (its result still reaches stdout); stdout raises
    ``BrokenPipeError`` at every print, an ordinary exception that unwinds
    the command's cleanup, and ``oma.cli.app.invoke`` ends it with status 1."""

    def on_broken_pipe(self) -> None:
        if self.stderr:
            self.quiet = True
            return
        raise BrokenPipeError(errno.EPIPE, "the reader of stdout has left")


# soft wrap: a line longer than the terminal is left for the terminal to wrap,
# so output piped to a file or a test keeps its lines whole
console = _Console(soft_wrap=True)
err_console = _Console(stderr=True, soft_wrap=True)

WIDE = 10_000
"""The width a table may take on an output that is not a terminal: as wide as
its cells, so no heading or cell is cut to the 80 columns rich assumes there."""


def table_width() -> int:
    """The columns a table may fill: the terminal's, or ``WIDE`` when stdout is
    a pipe or a file (a reader there scrolls or greps; nothing wraps it)."""
    return console.width if console.is_terminal else WIDE


def print_table(table: Table) -> None:
    """Print ``table`` on stdout: fitted to the terminal, or, when stdout is
    not one, at its natural width (every heading and cell whole, one line a
    row), not cut or wrapped to the 80 columns rich assumes for a pipe."""
    if console.is_terminal:
        console.print(table)
        return
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update_width(WIDE), table).maximum
    # console.print(width=) only narrows: a console of that width widens
    _Console(file=console.file, soft_wrap=True, width=max(natural, 1)).print(table)


STATE_DIR = Path(".oma")
LOG_FILE = STATE_DIR / "oma.log"
"""Where the SDK's own log lines go (``oma -v`` shows them on stderr instead)."""


def _visible_table() -> dict[int, str]:
    # C0 but tab and newline, and DEL, in caret notation (``cat -v``: ESC is
    # ``^[``, BEL ``^G``); C1 (U+0080-U+009F: CSI, OSC and the like to a
    # terminal in 8-bit mode) as ``M-^[``...; the bidirectional overrides and
    # isolates, which reorder what a line shows, as ``<U+202E>``
    table = {c: f"^{chr(c + 64)}" for c in range(32) if c not in (9, 10)}
    table[0x7F] = "^?"
    table.update({c: f"M-^{chr(c - 0x80 + 64)}" for c in range(0x80, 0xA0)})
    bidi = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
    table.update({c: f"<U+{c:04X}>" for c in bidi})
    return table


_VISIBLE = _visible_table()


def visible(text: str) -> str:
    """``text`` with every character that drives a terminal rather than shows
    (ESC, BEL, CR, backspace..., C1 controls, bidi overrides) replaced by a
    visible form: the clear-screen sequence ESC ``[2J`` reads ``^[[2J``.
    Newlines and tabs stay; a CRLF line end becomes a newline."""
    return text.replace("\r\n", "\n").translate(_VISIBLE)


def run_text(value: object, style: str = "") -> Text:
    """Run data (an output, an error, a title, an id, an event's detail:
    whatever a process, a model or a run input wrote) as rich ``Text``: never
    read as markup (``[/tmp/out.txt]`` stays as it is), and ``visible``, so
    it cannot clear the screen, set the title or write the clipboard. Every
    place where run data meets rich goes through here."""
    return Text(visible(str(value)), style=style)


class Settings:
    """The global options (``oma -v``), set once by the app's callback, and
    the command's ``--path`` directories (``add_user_code_paths``)."""

    verbose = False
    user_paths: tuple[Path, ...] = ()


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` on stderr; the ``typer.Exit`` to raise."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", run_text(message)))
    return typer.Exit(code)


def failed(error: OMAError) -> int:
    """The CLI's one conversion of an ``OMAError`` that ends a command: print
    it as ``fail`` does, with its code (``error: CODE: message``), and return
    the exit status, 2 when it says the command's input is wrong (an
    ``InputError``: an option, a run input, a file given), else 1.
    ``oma.cli.app.invoke`` calls it for any ``OMAError`` a command lets
    escape, so a command raises OMA's errors as they are; one converts an
    error itself only where its exit status is not its class's."""
    from oma.core.schema.errors import InputError

    status = 2 if isinstance(error, InputError) else 1
    fail(str(error), status)
    return status


def connection() -> Connection:
    """``Connection.from_env()`` (``oma.client.embedded.configured_connection``);
    raises the ``OMAError`` of a bad profile, OMA_CODEC_KEYS or OMA_CREDENTIALS
    (a ``SetupError``: the command exits 1 with one line)."""
    from oma.client.embedded import configured_connection

    return configured_connection()


@asynccontextmanager
async def runs_server(started_by: str, elsewhere: str = "") -> AsyncIterator[Client]:
    """A client of the server that holds the runs, for a command that reads
    them (``oma show``, ``oma list``, ``oma approvals``): the server at the
    configured address; or, when nothing listens there and the working
    directory holds the embedded server's histories (``.oma/temporal.db``,
    where ``oma run`` started it), that embedded dev server, started here
    without a worker (``started_by`` names the command to a second one) and
    stopped on exit. Exits 1 with one line when neither is there
    (``elsewhere``: another way to the run, e.g. ``--history``), or the
    server cannot start."""
    from oma.client.embedded import EMBEDDED_DB, serving
    from oma.core.schema.errors import TemporalUnavailableError
    from oma.runtime.dev_server import is_listening, split_address

    conn = connection()
    if not is_listening(conn.address):
        if not EMBEDDED_DB.is_file():
            unavailable = TemporalUnavailableError(
                f"nothing listens on {conn.address}, and {Path.cwd()} holds no {EMBEDDED_DB} "
                "(the runs `oma run` keeps when it starts the embedded server): start `oma dev` "
                "(or point TEMPORAL_ADDRESS at the Temporal server that holds the runs), or run "
                f"this where `oma run` ran{elsewhere}"
            )
            raise fail(str(unavailable))
        _, port = split_address(conn.address)
        err_console.print(
            f"[dim]starting the embedded Temporal dev server on port {port} ({EMBEDDED_DB})[/]"
        )
    async with serving(conn, worker=False, started_by=started_by) as (client, _):
        yield client


def run_async(coro: Any) -> Any:
    """Run ``coro``; Ctrl-C and SIGTERM (a closed terminal, ``kill``, a service
    manager) both cancel it, so its cleanup runs, and exit with status 130.

    A ``TemporalUnavailableError`` (no server answers) ends the command with
    its one-line message, whatever command it was."""
    from oma.core.schema.errors import TemporalUnavailableError

    route_sdk_logs()

    async def cancellable() -> Any:
        main = asyncio.current_task()
        assert main is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
        return await coro

    try:
        return asyncio.run(cancellable())
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise typer.Exit(130) from None
    except TemporalUnavailableError as e:
        raise fail(e.message) from None


USER_CODE_VAR = "OMA_PATH"
"""Directories of the user's own tools, hooks and evaluators, ``os.pathsep``
separated, as ``PYTHONPATH``."""


def add_user_code_paths(paths: Sequence[Path] = ()) -> None:
    """Add the directories the user's import paths (``myteam.tools:shout``) are
    found in to ``sys.path``, in this order: ``paths`` (``--path``),
    ``OMA_PATH``'s, and the working directory, which ``python -m`` and
    uvicorn search too (a console script's ``sys.path`` has its own ``bin/``
    instead). They go after the installed packages, so a project's
    ``mcp.py`` or ``anthropic/`` cannot shadow a library the worker imports
    later; one already on ``sys.path`` (``PYTHONPATH``) stays where it is. An
    ``OMA_PATH`` entry that is not a directory exits 2, naming it."""
    Settings.user_paths = tuple(paths)
    from_env = [Path(p) for p in os.environ.get(USER_CODE_VAR, "").split(os.pathsep) if p]
    for named in from_env:
        if not named.is_dir():
            raise fail(f"{USER_CODE_VAR} names {str(named)!r}, which is not a directory", 2)
    wanted = [str(p.resolve()) for p in (*paths, *from_env, Path.cwd())]
    sys.path.extend(d for d in dict.fromkeys(wanted) if d not in sys.path)


def route_sdk_logs(to_stderr: bool = False) -> None:
    """The SDK's log lines to ``.oma/oma.log``, or to stderr for a worker's
    console (``to_stderr``) and with ``oma -v`` (``oma.runtime.logs``)."""
    from oma.runtime.logs import route_logs

    route_logs(None if to_stderr or Settings.verbose else LOG_FILE)
