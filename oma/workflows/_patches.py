"""The ``workflow.patched`` ids of the workflows, in one place.

Each names a change of workflow logic that histories recorded before it do
not contain: code under ``workflow.patched(ID)`` runs for new runs (and
records a marker), the old path keeps replaying the runs from before.
Never rename or reuse an id: recorded histories hold it.

Each ``workflow.patched`` call that is on records a marker and an upsert of
``TemporalChangeVersion`` in the run's history: two events per id, in every
``AgentRun`` (one per task). So workflow code asks ``patched`` here: from
``ONE_MARKER_2`` on, a run records that one marker as it starts
(``at_start``), and the ids it stands for are on without one of their own
(runs recorded under ``ONE_MARKER`` replay as they were); a task's run,
which its ``TeamRun`` starts with ``ONE_MARKER_2`` in its input, records
none. Add a new id below ``ONE_MARKER_2``, outside ``_ON_WITH_ONE_MARKER_2``.

Where a run asks a patch matters: a replay must ask it in the workflow task
whose commands hold its marker. An id asked late (when a request opens,
after a model turn) is asked after a local activity's outcome, which a
replay can learn a workflow task before the run did; the patch then says
``False`` there and the replay fails on the marker. ``at_start`` asks
before anything the run waits on.
"""

from __future__ import annotations

from collections.abc import Collection

from temporalio import workflow

from oma.core.schema.run_input import ParentPatch

AGENT_BY_REFERENCE = "llm-turn-agent-by-reference"
"""The patch from which an ``llm_turn`` input refers to the agent
(``LlmTurnInput.agent_ref``) instead of holding it: earlier histories hold it."""

TOOL_DECISIONS_AT_THE_TASK = "oma-tool-decisions-at-the-task"
"""Team runs from this flag on forward a decision on a task's tool request
and record what the task's run recorded, and stop listing an attempt's
requests when the attempt ends (before it: the team run recorded the
decision itself, and the two runs could disagree)."""

FAILED_STATE = "oma-failed-state"
"""Runs from this flag on end Failed when they did not succeed (before it:
Completed with ``success: false``)."""

SEARCH_ATTRIBUTES = "oma-search-attributes"
"""Runs from this flag on set their search attributes."""

STOP_WINS_OVER_A_STEP = "stop-wins-over-a-step"
"""A step the run's stop cut short (``oma.workflows._waiting.unless_stopped``)
does not fail the run with what it raised on the way out."""

EVERY_TASK_SETTLES = "oma-every-task-settles"
"""A task whose outcome ``TeamRun`` cannot read (a failure without a partial
result, a fault in its bookkeeping) ends ``failed`` with a code; before it
the task stayed ``in_progress`` and the run went on without it."""

LOCAL_ACTIVITY_FAILURE = "oma-local-activity-failure"
"""``AgentRun`` maps a failed local activity (a scripted turn) as a failed
regular activity: a failure with its code and the partial result; before it
the local activity's own error failed the run, without a partial result."""

STOP_ENDS_RETRY_DELAY = "oma-stop-ends-retry-delay"
"""A stop (abort, rejection, budget, timeout) ends a task's retry delay at
once; before it the run waited the delay out."""

SHARED_BUDGET = "oma-shared-budget"
"""Tasks in flight share the run's budgets: each task's run reports its
usage after every model turn and waits for the team run's answer
(``oma.workflows._budget``); before it each task could spend everything the
run had left when it started."""

CANCELLED_ATTEMPT_REPORTED = "oma-cancelled-attempt-reported"
"""A task's ``AgentRun`` that is cancelled (the task's ``timeout_s``, the
run's end) tells its team run what it used (tokens, ``backend_attempts``);
before it the team run counted a cancelled attempt as having used nothing."""

SEARCH_ATTRIBUTES_LEARNED = "oma-search-attributes-learned"
"""A run started without ``OmaStatus`` (the stock ``temporal workflow
start``) asks whether its namespace has the attributes (an activity)
and sets them when it does; before it such a run set none."""

STATUS_ON_EVERY_END = "oma-status-on-every-end"
"""``OmaStatus`` says how every execution a run controls ended: a cancel in
any wait sets ``cancelled`` and an execution that continues as new
``continued_as_new``; before it those kept ``running``."""

CANCEL_IN_A_FIRST_READ = "oma-cancel-in-a-first-read"
"""A Temporal cancel that reaches a run while it reads what it starts from
(whether the namespace has the search attributes, a fork's source, outputs
kept by reference) ends the run cancelled; before it that read's failure
was logged and the run went on as if never cancelled."""

UNKNOWN_ERROR_TYPE = "oma-unknown-error-type"
"""An activity that failed with an exception no activity maps to a code
(its type is the exception's class name) fails its ``AgentRun``
``ACTIVITY_FAILED``, the class named in the message; before it the class
name was the run's error code, outside the catalogue (docs/errors.md)."""

ONE_MARKER = "oma-one-marker"
"""Runs from this flag on record this one marker for all the ids above: each
is on for them (``patched``) without a marker of its own (before it, a run
recorded a marker and an upsert for each id it asked). And a run started
with its identity (``OmaStatus=running`` and its team, or its agent and
task: a client or its parent run set them) does not set the same attributes
again as it starts (``oma.workflows._visibility.Visibility.identify``)."""

_ON_WITH_ONE_MARKER = frozenset(
    {
        AGENT_BY_REFERENCE,
        TOOL_DECISIONS_AT_THE_TASK,
        FAILED_STATE,
        SEARCH_ATTRIBUTES,
        STOP_WINS_OVER_A_STEP,
        EVERY_TASK_SETTLES,
        LOCAL_ACTIVITY_FAILURE,
        STOP_ENDS_RETRY_DELAY,
        SHARED_BUDGET,
        CANCELLED_ATTEMPT_REPORTED,
        SEARCH_ATTRIBUTES_LEARNED,
        STATUS_ON_EVERY_END,
        CANCEL_IN_A_FIRST_READ,
        UNKNOWN_ERROR_TYPE,
    }
)
"""The ids ``ONE_MARKER`` stands for: every id declared before it."""


GOAL_COPIES_COUNTED = "oma-goal-copies-counted"
"""A goal run counts every copy of its goal and its plan against its budget
(``TeamRunInput.check_size``), before it plans and once it has: a goal too
large fails the run ``INVALID_RUN_INPUT`` at once; before it the goal and
the plan were counted once, after planning, and such a run failed
``RUN_STATE_TOO_LARGE`` at its end."""

AWAITING_APPROVAL_STATUS = "oma-awaiting-approval-status"
"""``OmaStatus`` says ``awaiting_approval`` while any approval request of the
run is open (a team run's own, its tasks' tool requests, an agent run's), and
``running`` again once none is (``oma.workflows._visibility.Visibility.show_waiting``);
before it a waiting run said ``running``. On with ``ONE_MARKER_2``; a run
recorded before that asked it when its first request opened."""


ONE_MARKER_2: ParentPatch = "oma-one-marker-2"
"""Runs from this flag on record this one marker, as they start
(``at_start``), for every id above but ``GOAL_COPIES_COUNTED``: each is on
without a marker of its own. Before it, a run recorded ``ONE_MARKER`` and a
marker of its own for ``AWAITING_APPROVAL_STATUS``, asked when a request
first opened: after a scripted turn (a local activity), a replay could ask
it a workflow task before the marker and fail (a nondeterminism seen on
CI). ``GOAL_COPIES_COUNTED`` keeps its own marker, asked only where a
goal's check fails: it says whether the check was on when the run was
recorded, so a run replayed under a smaller budget than the one it ran
under takes the path it took."""

_ON_WITH_ONE_MARKER_2 = _ON_WITH_ONE_MARKER | {ONE_MARKER, AWAITING_APPROVAL_STATUS}
"""The ids ``ONE_MARKER_2`` stands for."""


PAYLOAD_STORE = "oma-payload-store"
"""Recorded by a ``TeamRun`` whose worker had a payload store as the run
started (``oma.workflows._payload_store.stored``): its budget is the stored
one (``oma.core.schema.limits.state_budget``). Not a change of code but a
fact of the run's worker, so it keeps its own marker, recorded only by such
a run: a replay (on a worker with or without a store) takes the path the run
took."""


SHARDS_PLANNED_APART = "oma-shards-planned-apart"
"""A new run of more than ``MAX_RUN_TASKS`` tasks checks and splits its
input in the ``plan_shards`` activity (``oma.workflows._shards.planned``)
and makes its shards' inputs of its tasks as given; before it the run did
both in its first activation, which at 100,000 tasks passed the SDK's 2 s
deadlock timer. Its own marker, recorded only by such a run."""


PACED_STARTS = "oma-paced-starts"
"""A ``TeamRun`` of ``options.max_concurrency`` over
``limits.STARTS_PER_WORKFLOW_TASK`` starts at most that many tasks in one
workflow task (``TeamRun._execute``); before it such a run started every
ready task it had room for in one, which at 1,000 passed the SDK's deadlock
timer. Its own marker, recorded only by such a run as it starts dispatching."""


FOR_TASKS: list[ParentPatch] = [ONE_MARKER_2]
"""What a ``TeamRun`` starts its ``AgentRun`` children with, its tasks' and
its coordinator's steps' (``AgentRunInput.patched``): each a new run, which
would record ``ONE_MARKER_2`` itself."""

_FROM_PARENT = "_oma_one_marker_2_from_parent"
"""The attribute of a run's workflow instance that says its parent passed
``ONE_MARKER_2`` on (``at_start``): per run, as this module is shared."""


def at_start(from_parent: Collection[str] = ()) -> None:
    """Ask ``ONE_MARKER_2`` as the run starts, before anything it waits on:
    a new run records it there, a run recorded before it says ``False`` (no
    marker) and asks its ids as it did. A run its parent started with it
    (``from_parent``, ``AgentRunInput.patched``) takes it as on and records
    nothing: no marker and no ``TemporalChangeVersion`` upsert, two history
    events and a visibility write less in each task's run. Its input, in its
    history, says so to every replay."""
    if ONE_MARKER_2 in from_parent:
        setattr(workflow.instance(), _FROM_PARENT, True)
        return
    workflow.patched(ONE_MARKER_2)


def _one_marker_2() -> bool:
    return getattr(workflow.instance(), _FROM_PARENT, False) or workflow.patched(ONE_MARKER_2)


def patched(patch_id: str) -> bool:
    """``workflow.patched(patch_id)``, through ``ONE_MARKER_2`` and
    ``ONE_MARKER``: ``True`` with no marker of its own for an id one of them
    stands for when the run records (or, in a replay, recorded) that marker,
    or took ``ONE_MARKER_2`` from its parent (``at_start``). A run recorded
    before ``ONE_MARKER`` replays each id's own marker, as it was recorded."""
    if patch_id in _ON_WITH_ONE_MARKER_2 and _one_marker_2():
        return True
    if patch_id in _ON_WITH_ONE_MARKER and workflow.patched(ONE_MARKER):
        return True
    return workflow.patched(patch_id)
