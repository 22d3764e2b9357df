"""Fitting what a ``TeamRun`` returns or carries into its budget.

The budget is ``RUN_STATE_BUDGET_BYTES``, or ``STORED_RUN_STATE_BUDGET_BYTES``
for a run whose worker keeps large payloads in a payload store (``stored``:
``oma.core.schema.limits.state_budget``), where a run's state fits whole
far past Temporal's 2 MB and no output is kept by reference below it.

A run's result (``sent_result``) and the state it carries when it continues
as new (``oma.core.rules.team_run_state.carried``) are each one Temporal
payload (2 MB at most). What grows with the run is fitted here (``fit``), on
the JSON about to be sent, in this order:

1. outputs: kept in the JSON while they fit, the ones named ``first`` first
   (those the run's waiting tasks read), then in task order; the others are
   kept by reference (``output`` none, ``output_ref`` the task's ``AgentRun``
   workflow id, whose result holds it, and ``output_bytes``; a fork's kept
   task names the ``AgentRun`` of the run that ran it, ``reused_from``); the
   task's ``output_run_id`` names the execution (a later run under the same
   workflow id may start children of the same ids);
2. texts, only if that is not enough: task errors, decision comments and
   event details cut (the cut said), to shorter and shorter lengths, down to
   ``MIN_TEXT_CHARS``.

Pure and deterministic: the same run state always fits the same way (its
replay too). Outputs kept by reference are not lost: ``oma.client`` reads
them back from the children's results, and a resumed run reads back the ones
its waiting tasks read (the ``read_task_outputs`` activity).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from oma.core.contracts.workflow_ids import task_workflow_id
from oma.core.schema import limits
from oma.core.schema.approvals import PendingApproval
from oma.core.schema.errors import RunStateTooLargeError
from oma.core.schema.limits import MAX_TASK_ERROR_CHARS, cut_text, json_size
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_events import RunEvent
from oma.core.schema.task import TaskState

MIN_TEXT_CHARS = 100
"""The shortest a fit cuts a task error, a comment or an event detail."""

SHORT_OUTPUT_BYTES = 128
"""An output of at most this many bytes (UTF-8) always stays inline: by
reference it would take about as much room. So a task notes the execution
that returned its output (``output_run_id``, 50-odd bytes of state) only
for a longer one, and a run of thousands of short outputs carries none."""


def fit(
    root: dict[str, Any],
    result: dict[str, Any],
    run_id: str,
    budget: int,
    *,
    first: Collection[str] = (),
    events: list[dict[str, Any]] | None = None,
) -> bool:
    """Fit ``root`` (the JSON about to be sent, holding ``result``: a
    ``TeamRunResult``'s JSON) into ``budget`` bytes, in place; whether it
    fits. ``run_id`` is the ``TeamRun``'s workflow id (its tasks' ``AgentRun``
    ids derive from it); ``first`` the ids of the tasks whose outputs stay in
    first; ``events`` the carried events, whose details a fit may cut."""
    tasks: list[dict[str, Any]] = result.get("tasks", [])
    for task in tasks:
        if task.get("error"):
            task["error"] = cut_text(task["error"], MAX_TASK_ERROR_CHARS)
    if json_size(root) <= budget:
        # nothing to keep by reference or cut (what follows would put every
        # output back): a running run's queries ask this on every poll
        return True
    _keep_outputs(root, tasks, run_id, budget, first)
    texts = _texts(tasks, result.get("approval_decisions", []), events or [])
    cap = MAX_TASK_ERROR_CHARS
    while json_size(root) > budget:
        if cap <= MIN_TEXT_CHARS:
            return False
        cap = max(cap // 2, MIN_TEXT_CHARS)
        for holder, key in texts:
            holder[key] = cut_text(holder[key], cap)
    return True


def _keep_outputs(
    root: dict[str, Any],
    tasks: list[dict[str, Any]],
    run_id: str,
    budget: int,
    first: Collection[str],
    origins: Mapping[str, TaskState] | None = None,
) -> None:
    """Every output longer than ``SHORT_OUTPUT_BYTES`` by reference, then
    back in while they fit: first those that take less room in than by
    reference, then the others, ``first`` first, in task order. Exact: each task's JSON is
    measured both ways (with its ``null`` keys, in a dump that has them).
    ``origins``: the tasks' states by id, for JSON that is not a task's
    state (a round request's snapshots): where a reference points."""
    inline: dict[int, dict[str, Any]] = {}
    for n, task in enumerate(tasks):
        output = task.get("output")
        if output is None or len(output.encode()) <= SHORT_OUTPUT_BYTES:
            continue
        inline[n] = task
        by_reference = {**task, "output": None} if "output_ref" in task else dict(task)
        if "output_ref" not in task:
            del by_reference["output"]
        origin = _origin_fields(origins[task["id"]]) if origins else task
        by_reference["output_ref"] = _origin(origin, run_id)
        if origin.get("output_run_id"):
            by_reference["output_run_id"] = origin["output_run_id"]
        by_reference["output_bytes"] = len(output.encode())
        tasks[n] = by_reference
    cost = {n: json_size(task) - json_size(tasks[n]) for n, task in inline.items()}
    room = budget - json_size(root)
    order = sorted(inline, key=lambda n: (cost[n] > 0, tasks[n]["id"] not in first, n))
    for n in order:
        # an output that takes less room than its reference always comes back in
        if cost[n] <= max(room, 0):
            room -= cost[n]
            tasks[n] = inline[n]


def _origin(task: dict[str, Any], run_id: str) -> str:
    """The ``AgentRun`` whose result holds ``task``'s output: the run's own
    child, or for a task a fork kept (``reused_from``) the child of the run
    that ran it (the fork has none)."""
    reused = task.get("reused_from")
    if isinstance(reused, dict):
        return task_workflow_id(str(reused["run_id"]), str(reused["task_id"]))
    return task_workflow_id(run_id, task["id"])


def _origin_fields(state: TaskState) -> dict[str, Any]:
    """What ``_origin`` and the reference read of ``state``, as its JSON has it."""
    return state.model_dump(mode="json", include={"id", "reused_from", "output_run_id"})


def _texts(
    tasks: Iterable[dict[str, Any]],
    decisions: Iterable[dict[str, Any]],
    events: Iterable[dict[str, Any]],
) -> list[tuple[dict[str, Any], str]]:
    """Where the texts a fit may cut are: ``(holder, key)`` pairs."""
    found = [(t, "error") for t in tasks if t.get("error")]
    found += [(d, "comment") for d in decisions if d.get("comment")]
    found += [(e, "detail") for e in events if e.get("detail")]
    return found


# -- what a TeamRun returns ----------------------------------------------------


def sent_result(result: TeamRunResult, run_id: str, *, stored: bool = False) -> dict[str, Any]:
    """The JSON the ``TeamRun`` ``run_id`` returns as ``result`` (and fails
    with, in its failure's details): at most ``state_budget(stored)`` of
    it. When the whole result is over, each task leaves out the fields at
    their defaults (``null``, ``0``, ``[]``, a zero ``token_usage``; ``id``
    and ``status`` always stay), which ``TeamRunResult`` reads back the same;
    then ``fit`` keeps outputs by reference and cuts texts, as needed. Raises
    ``RunStateTooLargeError`` when even that does not fit."""
    data = result.model_dump(mode="json")
    budget = limits.state_budget(stored)
    if json_size(data) > budget:
        data["tasks"] = [_without_defaults(task) for task in result.tasks]
    if not fit(data, data, run_id, budget):
        raise RunStateTooLargeError(
            f"the run's result is {json_size(data)} bytes of JSON with every output "
            f"kept by reference and its texts cut, over the run's budget of {budget} "
            f"bytes ({len(result.tasks)} tasks): each task's outcome is in its AgentRun "
            f"'{run_id}/<task id>'; split the work into runs of fewer tasks"
        )
    return data


def fitted_result(result: TeamRunResult, run_id: str, *, stored: bool = False) -> TeamRunResult:
    """``result`` as the ``TeamRun`` ``run_id`` returns it (``sent_result``),
    read back: outputs it keeps by reference have ``output_ref`` set."""
    return TeamRunResult.model_validate(sent_result(result, run_id, stored=stored))


def _without_defaults(task: TaskState) -> dict[str, Any]:
    """``task``'s JSON without the fields at their defaults, but its id and status."""
    return {"id": task.id, "status": task.status.value} | task.model_dump(
        mode="json", exclude_defaults=True
    )


# -- what a running TeamRun's queries answer ------------------------------------
#
# A query's answer is one payload too: while the run goes, it holds every
# output whole (it fits them only when it returns or continues as new), so
# each answer that grows with the run is fitted on the way out: the ``state``
# query answers ``sent_result`` (the JSON the run would return now), the
# others below. A completed task's output is already in its ``AgentRun``'s
# result (the run read it from there), so a reference holds mid-run as well,
# and fitting an answer issues no command.


def answered_requests(
    requests: list[PendingApproval],
    run_id: str,
    states: Mapping[str, TaskState],
    *,
    stored: bool = False,
) -> list[PendingApproval]:
    """The ``pending_approvals`` query's answer of the ``TeamRun`` ``run_id``:
    ``requests`` themselves when their JSON fits ``state_budget(stored)``,
    else with the outputs a round request shows (its ``content``'s
    ``completed`` tasks, ``approval_gate.round_content``) kept by reference
    as in ``fit`` (``output_ref``, ``output_run_id``, ``output_bytes``, from
    the tasks' ``states`` by id) while they do not fit.
    ``request_hash`` stays: it is the hash of the content the run holds."""
    budget = limits.state_budget(stored)
    data = [r.model_dump(mode="json") for r in requests]
    if json_size(data) <= budget:
        return requests
    for request in data:
        content = request.get("content")
        if request.get("boundary") == "round" and isinstance(content, dict):
            shown = content.get("completed")
            if isinstance(shown, list) and all(
                isinstance(t, dict) and t.get("id") in states for t in shown
            ):
                _keep_outputs({"requests": data}, shown, run_id, budget, (), states)
    return [PendingApproval.model_validate(r) for r in data]


def answered_events(events: list[RunEvent], *, stored: bool = False) -> list[RunEvent]:
    """The ``events`` query's answer: ``events`` themselves when their JSON
    fits ``state_budget(stored)``, else with their details cut (as ``fit``
    cuts them) until it does."""
    data = [e.model_dump(mode="json") for e in events]
    budget = limits.state_budget(stored)
    if json_size(data) <= budget:
        return events
    fit({"events": data}, {}, "", budget, events=data)
    return [RunEvent.model_validate(e) for e in data]


# -- reading outputs kept by reference back ------------------------------------


READ_BATCH_BYTES = 1024 * 1024
"""The most output bytes one ``read_task_outputs`` activity returns (its
result is one payload, at most 2 MB)."""


def read_batches(kept: Iterable[tuple[str, int]]) -> list[list[str]]:
    """``(ref, bytes)`` pairs as batches of refs, each at most
    ``READ_BATCH_BYTES`` of outputs (one larger output alone), in order."""
    batches: list[list[str]] = []
    size = 0
    for ref, nbytes in kept:
        if not batches or size + nbytes > READ_BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(ref)
        size += nbytes
    return batches
