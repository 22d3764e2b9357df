"""What every ``oma`` command shares: the consoles, the one-line error exit,
the event loop, where SDK log lines go, and the connection settings.

Light on purpose: ``oma.cli`` imports it inside its commands, and nothing
here imports the Temporal SDK at module level (``oma --help`` must not pay
for it).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from oma.connection import Connection

# soft wrap: a line longer than the terminal is left for the terminal to wrap,
# so output piped to a file or a test keeps its lines whole
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

STATE_DIR = Path(".oma")
LOG_FILE = STATE_DIR / "oma.log"
"""Where the SDK's own log lines go (``oma -v`` shows them on stderr instead)."""


class Settings:
    """The global options (``oma -v``), set once by the app's callback."""

    verbose = False


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` on stderr; the ``typer.Exit`` to raise."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def connection() -> Connection:
    """``Connection.from_env()``; a bad profile, OMA_CODEC_KEYS or OMA_CREDENTIALS
    exits 1 with one line."""
    from oma.codec import keys_from_env
    from oma.connection import Connection
    from oma.core.errors import OMAError

    try:
        keys_from_env()  # a malformed OMA_CODEC_KEYS fails here, before anything starts
        if os.environ.get("OMA_CREDENTIALS"):  # and so does OMA_CREDENTIALS (httpx2 parses it)
            from oma.activities._credentials import CredentialPolicy

            CredentialPolicy.from_env()
        return Connection.from_env()
    except OMAError as e:
        raise fail(str(e)) from None


def run_async(coro: Any) -> Any:
    """Run ``coro``; Ctrl-C and SIGTERM (a closed terminal, ``kill``, a service
    manager) both cancel it, so its cleanup runs, and exit with status 130.

    A ``TemporalUnavailableError`` (no server answers) ends the command with
    its one-line message, whatever command it was."""
    from oma.core.errors import TemporalUnavailableError

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


def route_sdk_logs(to_stderr: bool = False) -> None:
    """The SDK's log lines to ``.oma/oma.log``, or to stderr for a worker's
    console (``to_stderr``) and with ``oma -v`` (``oma._logging``)."""
    from oma._logging import route_logs

    route_logs(None if to_stderr or Settings.verbose else LOG_FILE)


def cause(err: BaseException) -> str:
    """The innermost cause of a Temporal failure, as ``TYPE: message``."""
    while err.__cause__ is not None or getattr(err, "cause", None) is not None:
        err = getattr(err, "cause", None) or err.__cause__  # type: ignore[assignment]
    kind = getattr(err, "type", None) or type(err).__name__
    # str() of an ApplicationError already starts with its type
    return f"{kind}: {getattr(err, 'message', None) or err}"
