"""The size limits of a run, and their checks.

Outputs and prompts travel in workflow history, where Temporal caps one
payload at 2 MB (and warns past 512 KB), so OMA bounds them well below that
and says so with a clear error instead of a failed workflow task. What a run
input becomes in Temporal has Temporal's bounds too: names become search
attributes and workflow ids, durations become timers. Each limit here names
the Temporal bound it keeps under; a field past it is refused before the run
starts (``INVALID_RUN_INPUT``), since past it the server would refuse the
workflow task again and again (the run wedges) or terminate the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from oma.core.schema.errors import InvalidRunInputError, OutputTooLargeError

MAX_OUTPUT_BYTES = 256 * 1024
"""The largest output one task may return (bytes of UTF-8)."""

MAX_DEPENDENCY_PAYLOAD_BYTES = 64 * 1024
"""The largest payload one task receives per dependency (or as the ``all`` summary)."""


MAX_RESULT_MESSAGES_BYTES = 256 * 1024
"""The most JSON of conversation an ``AgentRun`` result carries (the latest
messages); the rest stays readable through the run's ``conversation`` query."""

MAX_PAYLOAD_BYTES = 2 * 1024 * 1024
"""Temporal's limit on one payload (a workflow's input, a result): 2 MB
(the server's ``limit.blobSize.error``; past it a start fails with "Blob data
size exceeds limit", and a workflow task that would send one fails, again on
every retry: "[TMPRL1103] Attempted to upload payloads with size that
exceeded the error limit")."""

RUN_STATE_BUDGET_BYTES = 3 * 512 * 1024
"""The most JSON a ``TeamRun``'s result may take, and the input and state it
carries when it continues as new: 1.5 MiB, three quarters of
``MAX_PAYLOAD_BYTES`` (the rest is for a payload codec's envelope and the
failure a run that did not succeed ends with). Outputs past it are kept by
reference (``TaskState.output_ref``: the task's ``AgentRun`` result holds
them, and ``oma.client`` reads them back)."""

STORED_RUN_STATE_BUDGET_BYTES = 128 * 1024 * 1024
"""The same budget for a run whose worker keeps large payloads in a payload
store (``OMA_PAYLOAD_STORE``, Temporal's External Storage:
``oma.runtime.payload_store``): 128 MiB. The history then holds a reference
to such a payload, not the payload, so Temporal's 2 MB no longer bounds it;
what does is the worker, which holds a run's state in memory and encodes it
whole when the run returns or continues as new. A 100,000-task run's state
takes some 15 MB; a run past 128 MiB keeps outputs by reference as a run
without a store does past its 1.5 MiB."""


def state_budget(stored: bool) -> int:
    """``RUN_STATE_BUDGET_BYTES``, or ``STORED_RUN_STATE_BUDGET_BYTES`` for a
    run whose payloads past the store's threshold go to a payload store
    (``stored``). Read when called (tests lower the budgets)."""
    return STORED_RUN_STATE_BUDGET_BYTES if stored else RUN_STATE_BUDGET_BYTES


def payload_limit(stored: bool) -> int:
    """The most bytes one payload a client sends may take: Temporal's
    ``MAX_PAYLOAD_BYTES``, or with a payload store (``stored``) the stored
    run budget (the history holds a reference; ``state_budget``)."""
    return STORED_RUN_STATE_BUDGET_BYTES if stored else MAX_PAYLOAD_BYTES


MAX_REASON_CHARS = 2000
"""The most characters of an ``abort`` reason or an approval comment a run
records; the rest is cut, and the cut said (``cut_text``)."""

MAX_TASK_ERROR_CHARS = 2000
"""The most characters of a task's ``error`` the run's result and carried
state hold (the task's ``AgentRun`` has it whole)."""

GOAL_COPIES = 3
"""How many times a goal run holds its goal: in its input, and in its
result's ``goal`` and plan (``PlanArtifact.goal``), both of which it carries,
with the input, when it continues as new. ``check_goal_size`` counts each."""

PLAN_ROOM_BYTES = 64 * 1024
"""The room a goal run keeps for its plan when it checks its goal before
the coordinator plans (``TeamRunInput.check_size``): the plan's tasks as
JSON, both copies (the result's ``plan`` and ``tasks``); a plan larger than
that is checked once made."""

TASK_STATE_FLOOR_BYTES = 60
"""The least JSON a settled task's carried state takes besides its id and
assignee (``{"id","assignee","status":"completed","attempts":1}``): what
``check_run_size`` counts per task."""

SYNTHESIS_RESULTS_CHARS = 256 * 1024
"""The most characters of task results a goal run's synthesis prompt holds,
shared evenly among the tasks (each cut said, at least ``MIN_RESULT_CHARS``
each): the prompt is the input of the synthesis ``AgentRun``, one payload."""

MIN_RESULT_CHARS = 200
"""The least of each task's result a synthesis prompt shows."""

MAX_EVENT_DETAIL_CHARS = 500
"""The most characters of an event's ``detail`` a run carries when it
continues as new."""

# -- what a run input becomes in Temporal ----------------------------------------

MAX_ID_BYTES = 1000
"""Temporal's limit on a workflow id (the server's ``limit.maxIDLength``):
a task's ``AgentRun`` is ``<run id>/<task id>``, a coordinator step's
``<run id>/coordinator/<step>``."""

MAX_KEYWORD_BYTES = 2048
"""Temporal's limit on a search attribute's value (the server's
``frontend.searchAttributesSizeOfValueLimit``; past it the server terminates
the run: "BadSearchAttributes: ... exceeds size limit 2048")."""

MAX_NAME_CHARS = 100
"""The longest team or agent name: it becomes the search attribute
``OmaTeam`` or ``OmaAgent`` (at most ``MAX_KEYWORD_BYTES``) and part of a
workflow id (``team-<name>-<8 hex>``, ``agent-<name>-<8 hex>``); 100
characters are at most 400 bytes of UTF-8."""

MAX_TASK_ID_CHARS = 100
"""The longest task id: it becomes the search attribute ``OmaTask`` and the
end of its ``AgentRun``'s workflow id ``<run id>/<task id>`` (at most
``MAX_ID_BYTES``, which leaves the run's own id 599 bytes or more)."""

MAX_DURATION_S = 100 * 365 * 24 * 3600
"""The longest duration a run input may give (``timeout_s``, ``retry_delay_s``):
100 years, in seconds. A duration becomes a Temporal timer, which the SDK
holds as a Python ``timedelta`` (past about 2.7 million years: "Python int
too large to convert to C int" in workflow code) and the server as a Go
``time.Duration`` (about 292 years)."""

MAX_CONCURRENCY = 1000
"""The most tasks a run may have in flight: each is a child workflow, and
Temporal lets a workflow have at most 2000 pending (the server's
``limit.numPendingChildExecutions.error``)."""

STARTS_PER_WORKFLOW_TASK = 100
"""The most tasks a ``TeamRun`` starts in one workflow task; more wait for
the next, which the starts themselves bring (each child's start is an event).
Starting a task's ``AgentRun`` costs the activation some 0.7 ms of CPU on a
slow 2-core VM (its input, summary and search attributes encoded), so a run
of ``max_concurrency`` 1,000 started 1,000 in one activation, and again
whenever hundreds settled at once: under a busy worker's other threads such
an activation passed the SDK's 2 s deadlock timer and the run wedged
(``TMPRL1101``; a 10,000-task fan-out in ``bench/dag_overhead.py``). Runs of
``max_concurrency`` at most this are not paced (``_patches.PACED_STARTS``).
A recorded run's replay starts its tasks by this bound again: changing it
needs a patch of its own."""

MAX_HISTORY_EVENTS = 51_200
"""Temporal's limit on a workflow's history, in events (the server's
``limit.historyCount.error``; past it the server terminates the run)."""

MAX_RUN_TASKS = 10_000
"""The most tasks one ``TeamRun`` runs itself. Its first workflow task (and the
first of each run it continues as new with) builds every task's state, the
graph and the scheduler's counts, all inside the SDK's deadlock timer: one
activation must yield within 2 s of wall time, or its workflow task fails,
again on every attempt (the run wedges). On a 2-core machine that activation
took 0.38 s of CPU at 10,000 tasks, 1.04 s at 20,000, and passed the timer
at 100,000 (``bench/dag_overhead.py``). The margin is the machine's: on a
2-core VM about twice as slow a 10,000-task fan-out's first activation took
1.77 s of CPU, under the timer only just (docs/orchestration.md, "How far
one run goes"). A tasks run of more is sharded (``SHARD_TASKS``)."""

MAX_SHARDED_RUN_TASKS = 100_000
"""The most tasks a sharded run may have (a tasks or plan run past
``MAX_RUN_TASKS``: ``oma.core.schema.dag.shard_plan``). The ``plan_shards``
activity validates the whole input and the task graph and splits it into
shards (``oma.core.rules.shards``): at 100,000 tasks some 2 s of CPU on a
slow 2-core VM, which in the run's first activation, under the SDK's 2 s
deadlock timer, failed it seven times (``TMPRL1101``) before an attempt
fitted; that activation now only decodes the input (0.48 s of CPU on that
VM; docs/orchestration.md, "How far one run goes"). What bounds it first
is the server, which keeps every task's ``AgentRun``."""

SHARD_TASKS = 5_000
"""How many tasks a shard of a sharded run holds, at most (a connected part
of the task graph larger than this is a shard of its own, up to
``MAX_RUN_TASKS``). Its first workflow task builds its tasks' states in some
0.2 s. Large enough that a shard runs many tasks at once: a run's workflow
task handles every child that settled since the last, so a shard of a few
tasks in flight pays a workflow task per task (shards of 1,000 tasks, ten
chains, took 1.44 workflow tasks a task where a 1,000-task run of a hundred
chains took 0.40, ``bench/dag_overhead.py``)."""

SHARDS_AT_ONCE = 2
"""How many shards of a sharded run run at once (one at a time with a token
or cost budget, so each spends what the ones before it left), each with its
share of ``options.max_concurrency``: two keep tasks in flight while one
shard's last tasks settle."""

MAX_PRICE_USD = 1_000_000.0
"""The highest price ``options.pricing`` may give, in US dollars per million
tokens (a dollar a token, thousands of times any list price). A turn's cost is
a float in the history's JSON: a larger price can make it infinite (1e308 x 2
tokens) or not a number (0 cache tokens x 1.25 x 1e308), which JSON carries as
``null``, and no workflow can then decode the turn (it wedges)."""

MAX_TASK_RETRIES = 100
"""The most retries a task may ask for: each attempt adds events to the run's
history, which continues as new only between tasks."""


def largest_field(data: Any, path: str = "") -> tuple[str, int]:
    """The path (``tasks[0].description``) and JSON size in bytes of the
    largest text or number leaf of ``data`` (decoded JSON)."""
    if isinstance(data, dict):
        items: list[tuple[str, Any]] = [
            (f"{path}.{k}" if path else str(k), v) for k, v in data.items()
        ]
    elif isinstance(data, list):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(data)]
    else:
        return path or "(input)", len(json.dumps(data).encode())
    best = (path or "(input)", 0)
    for sub_path, value in items:
        found = largest_field(value, sub_path)
        if found[1] > best[1]:
            best = found
    return best


def check_payload_size(data: bytes, what: str, *, stored: bool = False) -> None:
    """Raise ``InvalidRunInputError`` when ``data`` (the JSON of ``what``) is
    over ``payload_limit(stored)``, naming the largest field and the limit."""
    limit = payload_limit(stored)
    if len(data) <= limit:
        return
    field, size = largest_field(json.loads(data))
    which = (
        f"the payload store's limit for one run of {limit} bytes"
        if stored
        else f"Temporal's payload limit of {limit} bytes (2 MB; a payload store, "
        "OMA_PAYLOAD_STORE, lifts it)"
    )
    raise InvalidRunInputError(
        f"{what} is {len(data)} bytes of JSON, over {which}; its largest field is {field} "
        f"({size} bytes): put large content in a file the agent reads, and give its path"
    )


def check_task_count(count: int, *, shardable: bool = False) -> None:
    """Raise ``InvalidRunInputError`` when a run of ``count`` tasks has more
    than ``MAX_RUN_TASKS`` and cannot be sharded (a goal run, whose
    coordinator plans and synthesizes over every task: ``shardable``
    false), or more than ``MAX_SHARDED_RUN_TASKS``."""
    if count > MAX_SHARDED_RUN_TASKS:
        raise InvalidRunInputError(
            f"tasks: the run has {count} tasks; a run may have at most "
            f"{MAX_SHARDED_RUN_TASKS} (its first workflow task validates and splits them "
            "within the Temporal SDK's 2 s deadlock timer): split the work into runs of at "
            f"most {MAX_SHARDED_RUN_TASKS} tasks"
        )
    if count > MAX_RUN_TASKS and not shardable:
        raise InvalidRunInputError(
            f"tasks: the plan has {count} tasks; a goal run may have at most {MAX_RUN_TASKS} "
            "(its first workflow task builds every task's state within the Temporal SDK's "
            "2 s deadlock timer, and its coordinator synthesizes over them all): give a "
            f"smaller goal, or run the plan as 'plan' or 'tasks' (a run of more than "
            f"{MAX_RUN_TASKS} is sharded)"
        )


def check_output_size(agent: str, size: int) -> None:
    """Raise ``OutputTooLargeError`` if an output of ``size`` bytes is over
    ``MAX_OUTPUT_BYTES``."""
    if size > MAX_OUTPUT_BYTES:
        raise OutputTooLargeError(
            f"agent {agent!r} produced {size} bytes of output; a task's output may be at "
            f"most {MAX_OUTPUT_BYTES} bytes (it travels in workflow history): write large "
            "results to files and print their paths"
        )


CUT_MARK_CHARS = 40
"""Room ``cut_text`` keeps for its mark, ``"… (<count> more characters cut)"``."""


def cut_text(text: str, max_chars: int) -> str:
    """``text`` whole if it has at most ``max_chars`` characters, else its
    first ``max_chars - CUT_MARK_CHARS`` and how many were cut, ``"… (1900000
    more characters cut)"``: at most ``max_chars`` characters in all, so a
    text cut once is not cut again."""
    if len(text) <= max_chars:
        return text
    kept = max(max_chars - CUT_MARK_CHARS, 0)
    return f"{text[:kept]}… ({len(text) - kept} more characters cut)"


def json_size(value: Any) -> int:
    """The size in bytes of ``value`` (decoded JSON) as compact JSON (a lone
    surrogate, which no payload may hold, counted as three bytes)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode(errors="surrogatepass"))


def check_run_size(
    carried: Any, extra_bytes: int, task_floors: Iterable[int], what: str, *, stored: bool = False
) -> None:
    """Raise ``InvalidRunInputError`` when a run that carries ``carried``
    (decoded JSON: its input, as sent) and ``extra_bytes`` more (a goal
    run's plan), with tasks whose settled states take at least
    ``task_floors`` bytes each, could not carry its state: when it continues
    as new, the input and the state travel as one payload, at most
    ``state_budget(stored)`` (outputs aside, which may be kept by
    reference). The client checks it before it starts a run, and the
    ``TeamRun`` workflow before it runs a task: the same rule. The message
    names the largest field."""
    floors = list(task_floors)
    size = json_size(carried) + extra_bytes
    total = size + sum(floors)
    budget = state_budget(stored)
    if total <= budget:
        return
    field, field_size = largest_field(carried)
    why = (
        "a worker holds it in memory and stores it whole when the run continues as new"
        if stored
        else "a run carries its input and its state when it continues as new, under "
        f"Temporal's payload limit of {MAX_PAYLOAD_BYTES} bytes; a payload store, "
        f"OMA_PAYLOAD_STORE, raises the budget to {STORED_RUN_STATE_BUDGET_BYTES} bytes"
    )
    raise InvalidRunInputError(
        f"{what} is {size} bytes of JSON and its {len(floors)} task(s) take at least "
        f"{sum(floors)} bytes once they settle: {total} bytes, over the run's budget of "
        f"{budget} bytes ({why}); its largest field is {field} ({field_size} bytes): split "
        "the work into runs of fewer tasks, or put large content in a file the agent reads, "
        "and give its path"
    )


def check_goal_size(
    goal_bytes: int,
    input_bytes: int,
    plan_bytes: int,
    floor_bytes: int,
    *,
    planned: bool,
    stored: bool = False,
) -> None:
    """Raise ``InvalidRunInputError`` naming the field ``goal`` when a goal
    run's goal of ``goal_bytes`` (its JSON), held ``GOAL_COPIES`` times,
    takes the run past ``state_budget(stored)`` with the rest of its input
    (``input_bytes``: the whole input's JSON, the goal included), its plan
    (``plan_bytes``: both copies once ``planned``, else the room kept for
    them) and its tasks' settled states (``floor_bytes``); the message says
    how large this run's goal may be. (Once ``planned``, a plan and an input
    that are larger than the goal's copies are ``check_run_size``'s to
    report.)"""
    plan = (
        "the plan's two copies"
        if planned
        else f"the {PLAN_ROOM_BYTES} bytes kept for the plan's two copies until it is made"
    )
    rest = input_bytes - goal_bytes + plan_bytes + floor_bytes
    copies = GOAL_COPIES * goal_bytes
    budget = state_budget(stored)
    if rest + copies <= budget or (planned and copies < rest):
        return
    raise InvalidRunInputError(
        f"goal: the goal is {goal_bytes} bytes of JSON and a goal run holds it "
        f"{GOAL_COPIES} times (its input, its result's goal and its plan's, all carried when "
        f"it continues as new): with the rest of the input and {plan} ({rest} bytes) that is "
        f"{rest + copies} bytes, over the run's budget of {budget} "
        f"bytes; this run's goal may be at most {max((budget - rest) // GOAL_COPIES, 0)} bytes "
        "of JSON: put large content in a file the agent reads, and give its path"
    )


def check_child_ids(run_id: str, task_ids: Iterable[str]) -> None:
    """Raise ``InvalidRunInputError`` when the workflow id of a task's
    ``AgentRun`` (``<run id>/<task id>``) or of a coordinator step would pass
    ``MAX_ID_BYTES``, naming the longest."""
    suffixes = [f"/{task_id}" for task_id in task_ids] + ["/coordinator/plan-correction"]
    longest = max(suffixes, key=lambda s: len(s.encode()))
    size = len(run_id.encode()) + len(longest.encode())
    if size > MAX_ID_BYTES:
        raise InvalidRunInputError(
            f"the workflow id {run_id[:60]!r}... is {len(run_id.encode())} bytes: its child "
            f"'<run id>{longest[:60]}' would be {size} bytes, over Temporal's limit of "
            f"{MAX_ID_BYTES} bytes on a workflow id; give a shorter workflow id"
        )
