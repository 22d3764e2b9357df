"""Two builds of OMA's workflow code, for the tests that roll new code out
under runs in flight.

``python -m tests.support.builds BUILD ARGS...`` runs ``oma ARGS...`` (``worker``,
``replay``) with BUILD's workflow code: ``old`` is the code as it is; ``new``
changes what ``TeamRun`` does before each task: it waits on a short timer
first (summary ``NEW_BUILD_TIMER``), a command no history of the old build
recorded there, so the old build's runs do not replay against it. The change
is made to the module the worker loads once (a worker passes ``oma`` through
the workflow sandbox: ``oma.worker.plugin.sandboxed``), as a deploy would
ship it, without a patch. (``tests.support.changed_team_run``, ``oma replay``'s
mismatch tests' change, asks an activity with no input: it replays, but a
worker cannot run it.)
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

from temporalio import workflow

NEW_BUILD_TIMER = "new build: a pause before each task"
"""The summary of the timer the ``new`` build starts before each task."""


def use_new_build() -> None:
    """Make this process's ``TeamRun`` the ``new`` build's."""
    from oma.workflows import team_run

    old_attempt = team_run.attempt_task

    async def attempt_task(*args: Any, **kwargs: Any) -> Any:
        await workflow.sleep(timedelta(milliseconds=1), summary=NEW_BUILD_TIMER)
        return await old_attempt(*args, **kwargs)

    team_run.attempt_task = attempt_task  # type: ignore[assignment]


def main(argv: list[str]) -> None:
    build, *args = argv
    if build == "new":
        use_new_build()
    elif build != "old":
        raise SystemExit(f"unknown build {build!r}: old or new")
    from oma.cli.app import main as oma

    sys.argv = ["oma", *args]
    oma()


if __name__ == "__main__":
    main(sys.argv[1:])
