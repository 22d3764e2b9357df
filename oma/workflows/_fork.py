"""A fork's first step: read the source run, and go on as that run resumed.

The ``read_fork_source`` activity reads the source run and makes the fork's
input (``oma.core.rules.fork``); its answer is in the fork's history (the one
read of the source's state), so the fork replays the same whatever the source
does later. ``TeamRun`` then starts from that input and its ``resume`` state
(``TeamRun._start_from``), in place: the fork runs as any resumed
``TeamRun``, its kept tasks ``completed`` from the start. (Not by
continuing as new: Temporal holds a run that continues as new within a
second of its start for the rest of that second,
``history.workflowIdReuseMinimalInterval``.)
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import ActivityConfig

with workflow.unsafe.imports_passed_through():
    from oma.core.contracts.fork import ForkedRun, ReadForkSourceInput
    from oma.core.contracts.names import ActivityName
    from oma.core.rules.team_run_state import RunStop
    from oma.core.schema.errors import InvalidForkError
    from oma.core.schema.fork import ForkInput, is_fork_input, parse_fork_input
    from oma.core.schema.run_events import EventLog
    from oma.core.schema.run_input import TeamRunInput, parse_team_run_input
    from oma.workflows._visibility import Visibility
    from oma.workflows._waiting import reraise_cancel

READ_SOURCE: ActivityConfig = {
    "start_to_close_timeout": timedelta(minutes=2),
    "retry_policy": RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=5),
}


def fork_input(raw: Any) -> ForkInput | None:
    """``raw`` (a ``TeamRun``'s decoded input) as a fork's first run's input,
    or ``None`` for any other run. Raises ``InvalidRunInputError``."""
    return parse_fork_input(raw) if is_fork_input(raw) else None


def reads_first(fork: ForkInput | None, inp: TeamRunInput | None) -> bool:
    """Whether ``TeamRun`` reads its start state before it runs: a fork's
    first run (``fork``), or a run with ``options.reuse`` that has not
    started yet (``inp``)."""
    return fork is not None or (
        inp is not None and inp.resume is None and inp.options.reuse is not None
    )


def reading(
    fork: ForkInput | None,
    inp: TeamRunInput | None,
    stop: RunStop,
    visibility: Visibility,
    *,
    stored: bool,
) -> Awaitable[TeamRunInput] | None:
    """What ``TeamRun`` reads before it runs, if anything: a fork's source
    (``fork``), or the reference run of a run with ``options.reuse`` that
    has not started yet (``inp``); ``None`` for any other run. ``stop`` is
    the run's: an ``abort`` while it reads is recorded in the state it goes
    on with (the run then skips every task it would run). ``visibility``
    is the run's too: a read that fails ends it ``failed``, a fork's sets
    ``OmaForkedFrom``. ``stored``: the run's payloads go to a payload store
    (the budget the read fits the state it starts from into)."""
    if fork is not None:
        return _read(fork.payload(), None, fork.fork.run_id, stop, visibility, stored)
    if inp is not None and reads_first(None, inp):
        return _read(inp.payload(), inp, None, stop, visibility, stored)
    return None


async def _read(
    payload: dict[str, Any],
    given: TeamRunInput | None,
    forked_from: str | None,
    stop: RunStop,
    visibility: Visibility,
    stored: bool,
) -> TeamRunInput:
    """The input the run goes on with, as the ``read_fork_source`` activity
    makes it of ``payload`` (a fork's input, or a run's with
    ``options.reuse``): the source's (a fork's, with its replacements) or
    ``given``, and the ``resume`` state it starts from, its kept tasks
    completed; its ``run_start`` event and its warnings recorded, a fork's
    ``OmaForkedFrom`` set. ``given`` as it is when the activity keeps
    nothing (a goal run that plans anew). Raises the ``ApplicationError`` of
    the error (``INVALID_FORK``, ``INVALID_RUN_INPUT``, ...) when it cannot
    be made: the run fails before any task runs."""
    source = forked_from or (given.options.reuse.from_ if given and given.options.reuse else "?")
    try:
        forked = await workflow.execute_activity(
            ActivityName.READ_FORK_SOURCE,
            ReadForkSourceInput(
                workflow_id=workflow.info().workflow_id, fork=payload, stored=stored
            ),
            result_type=ForkedRun,
            **(
                READ_SOURCE
                | {"summary": f"read the run to {'fork' if forked_from else 'reuse'}: {source}"}
            ),
        )
    except ActivityError as err:
        reraise_cancel(err)
        cause = err.cause
        code = cause.type if isinstance(cause, ApplicationError) else None
        visibility.ended("failed", code or InvalidForkError.code)
        if isinstance(cause, ApplicationError):
            raise ApplicationError(
                cause.message, *cause.details, type=cause.type, non_retryable=True
            ) from None
        raise ApplicationError(
            f"the run {source!r} could not be read: {cause or err}",
            type=InvalidForkError.code,
            non_retryable=True,
        ) from None
    state = forked.resume
    if state is None:
        assert given is not None
        workflow.logger.info("options.reuse: %s", forked.note)
        return given
    state.started_at = workflow.now()
    log = EventLog(state.events)
    kept = f"keeps {len(forked.reused)} task(s)"
    again = f"runs {', '.join(forked.rerun) or 'the synthesis'} again"
    what = f"fork of {forked_from}" if forked_from else f"reuses run {source}"
    log.add("run_start", workflow.now(), detail=f"{what}: {kept}, {again}")
    for warning in forked.warnings:
        log.add("warning", workflow.now(), detail=warning)
    if stop.stopped:  # the abort signal's event went to the state this one replaces
        log.add("abort", workflow.now(), detail=stop.reason)
    if forked_from:
        visibility.forked_from(forked_from)
    return parse_team_run_input(forked.input).model_copy(update={"resume": state})
