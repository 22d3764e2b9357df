"""What a run shows in Temporal's visibility: its search attributes and its readable texts.

Search attributes (``temporal workflow list --query 'OmaStatus="failed"'``, the
Web UI's filter) are Keywords a namespace must have registered
(``SEARCH_ATTRIBUTES``: the embedded dev server registers them, a cluster
with ``temporal operator search-attribute create``). The texts are Temporal
user metadata: the summary of each child workflow, activity and timer a run
starts, and a run's current details (the Web UI's detail page, ``temporal
workflow describe``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, Field
from temporalio.exceptions import ApplicationError

from oma.core.schema.approvals import ApprovalRequest
from oma.core.schema.errors import TaskFailedError
from oma.core.schema.results import ShardResult, TeamRunResult
from oma.core.schema.task import TERMINAL_STATUSES, TaskState, TaskStatus

OMA_STATUS = "OmaStatus"
"""``running`` while a run runs (``awaiting_approval`` while any of its
approval requests is open), then its result's ``status`` (a ``TeamRun``'s
``completed``, ``failed``, ``rejected``, ``cancelled``, ``planned``; an
``AgentRun``'s ``completed``, ``failed``, ``cancelled``; ``continued_as_new`` on an execution
that went on in a new one)."""
OMA_TEAM = "OmaTeam"
"""The team's name (a ``TeamRun`` and its children)."""
OMA_AGENT = "OmaAgent"
"""The agent's name (an ``AgentRun``: a task's assignee, or ``coordinator``)."""
OMA_TASK = "OmaTask"
"""The task's id (a task's ``AgentRun``)."""
OMA_ERROR_CODE = "OmaErrorCode"
"""A run that did not succeed: its error code (``PROCESS_FAILED``, ``TASK_FAILED``, ...)."""

OMA_FORKED_FROM = "OmaForkedFrom"
"""A fork (``oma fork``): the workflow id of the run it was forked from
(``OmaForkedFrom="<run id>"`` lists every fork of a run)."""

OMA_SEARCH_ATTRIBUTES_MEMO = "OmaSearchAttributes"
"""A memo key: a team run whose ``options.task_search_attributes`` is false
starts each task's ``AgentRun`` with no search attribute and this memo set
to ``"off"``, and such a run sets none (nor asks whether the namespace has
them). A memo, not an input field: a worker from before it reads the same
input, and sets the attributes itself as it did."""

RUNNING = "running"
"""``OmaStatus`` while a run runs and no approval request of it is open."""
AWAITING_APPROVAL = "awaiting_approval"
"""``OmaStatus`` while a run runs and an approval request of it is open (a
team run's own, or a tool request of one of its tasks' runs)."""

STATUSES = (
    RUNNING,
    AWAITING_APPROVAL,
    "completed",
    "failed",
    "rejected",
    "cancelled",
    "planned",
    "continued_as_new",
)
"""Every value ``OmaStatus`` takes on a ``TeamRun`` (an ``AgentRun``'s are among them)."""

RUN_ATTRIBUTES = (OMA_STATUS, OMA_TEAM, OMA_AGENT, OMA_TASK, OMA_ERROR_CODE)
"""The attributes every run may set: a namespace that lacks one gets none."""

SEARCH_ATTRIBUTES: dict[str, str] = {name: "Keyword" for name in (*RUN_ATTRIBUTES, OMA_FORKED_FROM)}
"""Every search attribute a run sets, with its Temporal type. ``OmaForkedFrom``,
added later, is set only where the namespace has it: a namespace registered
before it keeps the others."""


def start_values(
    *,
    team: str | None = None,
    agent: str | None = None,
    task: str | None = None,
    forked_from: str | None = None,
) -> dict[str, str]:
    """The keyword attributes a run starts with, by name: ``OmaStatus``
    ``running``, then ``OmaTeam``, ``OmaAgent``, ``OmaTask`` and
    ``OmaForkedFrom`` where given (the client's and a parent run's
    ``start_attributes``)."""
    values = {OMA_STATUS: RUNNING}
    given = ((OMA_TEAM, team), (OMA_AGENT, agent), (OMA_TASK, task), (OMA_FORKED_FROM, forked_from))
    for name, value in given:
        if value:
            values[name] = value
    return values


class RegisteredSearchAttributesInput(BaseModel):
    """Input of the ``registered_search_attributes`` activity (the run's
    namespace is the activity's own)."""


class RegisteredSearchAttributesOutput(BaseModel):
    """Which of ``SEARCH_ATTRIBUTES`` the namespace has registered."""

    registered: list[str] = Field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether every attribute each run sets is registered (``RUN_ATTRIBUTES``)."""
        return set(RUN_ATTRIBUTES) <= set(self.registered)


SUMMARY_CHARS = 200
"""How long a summary or a details line may grow before it is cut (Temporal
shows summaries on one line)."""


def shorten(text: str, limit: int = SUMMARY_CHARS) -> str:
    """``text``'s first line, cut to ``limit`` characters (an ellipsis marks a cut)."""
    lines = text.strip().splitlines()
    line = lines[0] if lines else ""
    if len(line) > limit or len(lines) > 1:
        return line[: limit - 1].rstrip() + "…"
    return line


def task_summary(agent: str, task_id: str, title: str) -> str:
    """A task's ``AgentRun`` child, as its static summary says: ``agent: title``."""
    return shorten(f"{agent}: {title or task_id}")


def shard_summary(n: int, shards: int, tasks: int) -> str:
    """A shard's ``TeamRun`` child, as its static summary says: ``shard 2 of
    5: 1000 task(s)`` (``n`` from 1; ``shard_of_summary`` reads it back)."""
    return f"shard {n} of {shards}: {tasks} task(s)"


_SHARD_SUMMARY = re.compile(r"shard (\d+) of (\d+): (\d+) task\(s\)")


def shard_of_summary(summary: str | None) -> tuple[int, int, int] | None:
    """What ``shard_summary`` said, ``(n, shards, tasks)``; ``None`` for any
    other text (or none)."""
    found = _SHARD_SUMMARY.fullmatch(summary or "")
    return None if found is None else (int(found[1]), int(found[2]), int(found[3]))


def team_run_details(
    team: str,
    result: TeamRunResult,
    settled: int | None = None,
    awaiting: Sequence[ApprovalRequest] = (),
    stopping: str | None = None,
) -> str:
    """A ``TeamRun`` in one line: ``hybrid-dev: 3 tasks, failed: code
    (PROCESS_FAILED: exited 3)``: the team, the task count, the status, and
    for a run that did not succeed what failed (the failed tasks, or why the
    run stopped). While it runs: how many tasks settled, ``settled`` when
    given (the run's ``TaskTally.ended``: O(1), where counting the tasks
    costs the size of the run), and the open requests ``awaiting`` a
    decision (``hybrid-dev: 3 tasks, awaiting approval: dispatch-review; 1
    settled``, ``awaiting_requests``); once it stopped early and drains
    (``stopping``, why: ``aborted: no longer needed``), that it is stopping
    (``hybrid-dev: 3 tasks, stopping (aborted: no longer needed): the tasks
    in flight settle; 1 settled``)."""
    count = len(result.tasks) or sum(s.tasks for s in result.shards)
    head = f"{team}: {count} task{'' if count == 1 else 's'}"
    if result.status == "running":
        if settled is None:
            settled = sum(1 for t in result.tasks if t.status in TERMINAL_STATUSES)
        if stopping:
            line = f"{head}, stopping ({stopping}): the tasks in flight settle; {settled} settled"
            return shorten(line, 2 * SUMMARY_CHARS)
        if awaiting:
            line = f"{head}, {awaiting_requests(awaiting)}" + (
                f"; {settled} settled" if count else ""
            )
            return shorten(line, 2 * SUMMARY_CHARS)
        return f"{head}, running ({settled} settled)" if count else f"{head}, running"
    if result.success:
        return f"{head}, {result.status}"
    return shorten(f"{head}, {result.status}: {_what_failed(result)}", 2 * SUMMARY_CHARS)


AWAITING_NAMED = 3
"""How many open requests a run's details name (the others are counted)."""


def awaiting_requests(requests: Sequence[ApprovalRequest]) -> str:
    """``awaiting approval: dispatch-publish, tool-code-1 (bash) and 2 more``:
    the first ``AWAITING_NAMED`` open requests by id (a tool request with its
    tool), as a run's current details name them; ``""`` for none."""
    if not requests:
        return ""
    named = [_request_name(r) for r in requests[:AWAITING_NAMED]]
    more = len(requests) - AWAITING_NAMED
    return "awaiting approval: " + ", ".join(named) + (f" and {more} more" if more > 0 else "")


def _request_name(request: ApprovalRequest) -> str:
    tool = request.content.get("tool") if isinstance(request.content, dict) else None
    name = shorten(request.request_id, 80)
    return f"{name} ({shorten(str(tool), 80)})" if request.boundary == "tool" and tool else name


def team_run_failure(team: str, result: TeamRunResult, sent: dict[str, Any]) -> ApplicationError:
    """The failure a ``TeamRun`` that did not succeed ends with: typed with the
    result's ``error_code`` (``TASK_FAILED`` when only tasks failed), not
    retryable, its message ``team_run_details``, its details ``sent``: the
    result's JSON as the run sends it (``oma.core.rules.payload_fit.sent_result``;
    ``team_run_result_of`` reads it back)."""
    return ApplicationError(
        team_run_details(team, result),
        sent,
        type=result.error_code or TaskFailedError.code,
        non_retryable=True,
    )


def team_run_result_of(failure: BaseException | None) -> TeamRunResult | None:
    """The ``TeamRunResult`` a failed ``TeamRun`` carries in its failure
    (``team_run_failure``), given the failure (``WorkflowFailureError.cause``,
    ``ChildWorkflowError.cause``); ``None`` for any other failure (invalid
    input, an invalid plan, a cancellation)."""
    details = team_run_result_details(failure)
    return None if details is None else TeamRunResult.model_validate(details)


def team_run_result_details(failure: BaseException | None) -> dict[str, Any] | None:
    """The ``TeamRunResult``, as JSON, that a failed ``TeamRun`` carries in
    its failure (``team_run_result_of``), not validated; ``None`` for any
    other failure."""
    if not isinstance(failure, ApplicationError) or not failure.details:
        return None
    details = failure.details[0]
    if not isinstance(details, dict) or "tasks" not in details or "success" not in details:
        return None
    return details


def _what_failed(result: TeamRunResult) -> str:
    failed = [t for t in result.tasks if t.status == TaskStatus.FAILED]
    if result.error and (result.error_code or not failed):
        return f"{result.error_code}: {result.error}" if result.error_code else result.error
    if failed:
        return ", ".join(_failed_task(t) for t in _first(failed, 3)) + _more(failed, 3)
    shards = [s for s in result.shards if s.status not in (None, "completed")]
    if shards:  # a sharded run: each shard's result names its tasks
        said = [_shard_ended(s) for s in shards[:3]]
        return ", ".join(said) + _more(shards, 3)
    return "no task failed"


def _shard_ended(shard: ShardResult) -> str:
    failed = f", {shard.failed} task(s) failed" if shard.failed else ""
    return f"{shard.run_id} ({shard.status}{failed})"


def _failed_task(task: TaskState) -> str:
    error = shorten(task.error or "", 80)
    return f"{task.id} ({task.error_code}: {error})" if task.error_code else f"{task.id} ({error})"


def _first(tasks: list[TaskState], n: int) -> Iterable[TaskState]:
    return tasks[:n]


def _more(tasks: Sequence[object], n: int) -> str:
    return f" and {len(tasks) - n} more" if len(tasks) > n else ""
