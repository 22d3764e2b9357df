"""``oma --version``, and every ``oma`` command's help in click's usual
form: ``Usage: oma abort [OPTIONS] WORKFLOW_ID``, an optional argument
``[WORKFLOW_ID]``, one that takes more values ``FILE...``.

typer (0.29) writes a required argument ``{workflow_id}`` and an optional one
``[workflow_id]``, lower case; click, git, the ``temporal`` CLI and most of
the ecosystem write the upper-case name a user substitutes. ``OmaTyper``
makes ``OmaCommand`` the class of every command it registers, so a command
added later gets the same form without a word. Imported with the app: only
typer, which the app has loaded already.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperCommand

DISTRIBUTION = "oma-temporal"
"""The distribution ``oma`` is installed from (pyproject.toml's name)."""


def package_version() -> str:
    """The installed version of ``DISTRIBUTION`` (``importlib.metadata``),
    e.g. ``0.1.0``; ``unknown`` when it is not installed (code run from a
    checkout that was never ``pip install``-ed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


class OmaCommand(TyperCommand):
    """A typer command whose arguments are named in upper case everywhere the
    help and the errors show them (``Usage:``, ``Arguments:``, ``Missing
    argument 'WORKFLOW_ID'``), the usage line written as click writes it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if param.param_type_name == "argument" and param.metavar is None:
                param.metavar = (param.name or "").upper()

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                pieces.append(usage_piece(param.metavar or "", param.required, param.nargs))
        return pieces


def usage_piece(name: str, required: bool, nargs: int) -> str:
    """An argument on the usage line, as click's ``Argument.make_metavar``
    writes it: ``NAME``; ``[NAME]`` when it may be left out; ``NAME...`` (or
    ``[NAME]...``) when it takes more than one value."""
    piece = name if required else f"[{name}]"
    return piece if nargs == 1 else f"{piece}..."


class OmaTyper(typer.Typer):
    """A ``typer.Typer`` whose commands are ``OmaCommand``s unless one asks for
    another class."""

    def command(
        self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[Any], Any]:
        return super().command(name, cls=cls or OmaCommand, **kwargs)
