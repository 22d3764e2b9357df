"""Starting runs and reading their results: the ``start_workflow`` calls
with the runs' search attributes, a ``TeamRun``'s result whichever way it
ended, its outputs kept by reference read back, and a failure's innermost
cause as a person reads it (``cause``). Whether an ``abort`` signal reached
a run is read from its history: ``oma.records.aborts``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from oma.core.contracts.names import WorkflowName
from oma.core.contracts.visibility import start_values, team_run_result_of
from oma.core.contracts.workflow_ids import longest_task_parent_id
from oma.core.schema import limits
from oma.core.schema.errors import OMAError, error_for
from oma.core.schema.limits import check_child_ids
from oma.core.schema.results import TeamRunResult
from oma.core.schema.run_input import RecordedModels, TeamRunInput
from oma.records.executions import latest_temporal_run_id
from oma.records.outputs import read_task_outputs
from oma.runtime.converter import codec_key_error

logger = logging.getLogger(__name__)


def start_attributes(
    *,
    team: str | None = None,
    agent: str | None = None,
    task: str | None = None,
    forked_from: str | None = None,
) -> TypedSearchAttributes:
    """What a run starts with (``oma.core.contracts.visibility.start_values``:
    ``OmaStatus=running`` and what it is), as ``start_workflow`` takes them."""
    values = start_values(team=team, agent=agent, task=task, forked_from=forked_from)
    return TypedSearchAttributes(
        [
            SearchAttributePair(SearchAttributeKey.for_keyword(name), value)
            for name, value in values.items()
        ]
    )


async def start_team_run(
    client: Client,
    run_input: TeamRunInput,
    *,
    id: str,
    task_queue: str,
    memo: Mapping[str, Any] | None = None,
) -> WorkflowHandle[Any, TeamRunResult]:
    """Start a ``TeamRun`` of ``run_input`` as workflow ``id`` on ``task_queue``
    with its search attributes (``OmaStatus=running``, ``OmaTeam``: see
    ``start_run``) and ``memo`` (Temporal's memo: JSON a list of workflows
    shows, e.g. the ``oma acp`` session a run belongs to). The input is sent
    as given (``TeamRunInput.payload``: the defaults not repeated), the size
    ``checked_team_run_input`` checked.

    Raises ``InvalidRunInputError`` when a task's ``AgentRun`` id,
    ``<id>/<task id>`` (a sharded run's ``<id>/shard/<n>/<task id>``), would
    pass Temporal's limit on a workflow id (before
    anything starts), and the SDK's ``WorkflowAlreadyStartedError`` and
    ``RPCError``. A run with ``options.reuse`` that names no execution reuses
    the one that is the latest now (``temporal_run_id`` set to it): a run
    that takes its reference's workflow id would otherwise read itself; so
    does one whose ``options.models`` names a run but no execution."""
    tasks = run_input.given_tasks()
    parent = longest_task_parent_id(id, len(tasks), limits.MAX_RUN_TASKS)
    check_child_ids(parent, (t.id for t in tasks))
    pinned = await _models_pinned(client, await _reuse_pinned(client, run_input))
    return await start_run(
        client,
        WorkflowName.TEAM_RUN,
        pinned.payload(),
        id=id,
        task_queue=task_queue,
        result_type=TeamRunResult,
        search_attributes=start_attributes(team=run_input.team.name),
        memo=memo,
    )


async def _reuse_pinned(client: Client, run_input: TeamRunInput) -> TeamRunInput:
    """``run_input`` with its ``options.reuse`` naming the execution it
    reuses (the latest, when it names none); as given when there is no such
    run (the run then fails ``INVALID_FORK`` naming it)."""
    reuse = run_input.options.reuse
    if reuse is None or reuse.temporal_run_id is not None:
        return run_input
    latest = await latest_temporal_run_id(client, reuse.from_)
    if latest is None:
        return run_input
    pinned = reuse.model_copy(update={"temporal_run_id": latest})
    options = run_input.options.model_copy(update={"reuse": pinned})
    return run_input.model_copy(update={"options": options})


async def _models_pinned(client: Client, run_input: TeamRunInput) -> TeamRunInput:
    """``run_input`` with its ``options.models`` naming the execution whose
    model turns it replays (the latest, when it names a run but no
    execution); as given when there is no such run (its turns then fail
    ``INVALID_FORK`` naming it)."""
    models = run_input.options.models
    if not isinstance(models, RecordedModels) or models.from_ is None:
        return run_input
    if models.temporal_run_id is not None:
        return run_input
    latest = await latest_temporal_run_id(client, models.from_)
    if latest is None:
        return run_input
    pinned = models.model_copy(update={"temporal_run_id": latest})
    options = run_input.options.model_copy(update={"models": pinned})
    return run_input.model_copy(update={"options": options})


async def start_run(
    client: Client,
    workflow: str,
    arg: Any,
    *,
    id: str,
    task_queue: str,
    result_type: type[Any],
    search_attributes: TypedSearchAttributes,
    memo: Mapping[str, Any] | None = None,
) -> WorkflowHandle[Any, Any]:
    """Start ``workflow`` with ``search_attributes``; on a namespace that has
    not registered them (``oma.core.contracts.visibility.SEARCH_ATTRIBUTES``), start it
    without them (logged): the run then sets none, rather than failing its
    workflow task on every upsert. A run started with them sets its status."""
    try:
        return await client.start_workflow(
            workflow,
            arg,
            id=id,
            task_queue=task_queue,
            result_type=result_type,
            search_attributes=search_attributes,
            memo=memo,
        )
    except RPCError as err:
        if err.status != RPCStatusCode.INVALID_ARGUMENT or "search attribute" not in err.message:
            raise
        logger.info("starting %s without search attributes: %s", workflow, err.message)
    return await client.start_workflow(
        workflow, arg, id=id, task_queue=task_queue, result_type=result_type, memo=memo
    )


async def team_run_result(
    handle: WorkflowHandle[Any, TeamRunResult], client: Client | None = None
) -> TeamRunResult:
    """The result of the ``TeamRun`` ``handle``: what it returned, or, for a
    run that did not succeed (it ends Failed, ``oma.core.contracts.visibility.team_run_failure``),
    the ``TeamRunResult`` its failure carries: ``success`` false, ``status``
    and ``error_code`` saying why; with every output it kept by reference
    read back through ``client`` (``read_outputs``; by default the client
    the handle came from). Raises
    ``CodecKeyMissingError`` when the failure is encrypted with a key this
    process lacks, and ``WorkflowFailureError`` for any other failure
    (invalid input, an invalid plan, a cancellation)."""
    try:
        result = await handle.result()
    except WorkflowFailureError as err:
        failed = team_run_result_of(err.cause)
        if failed is None:
            if (key_error := codec_key_error(err.cause)) is not None:
                raise key_error from err
            raise
        result = failed
    await read_outputs(client or handle._client, result)
    return result


async def read_outputs(client: Client, result: TeamRunResult) -> None:
    """Read back into ``result`` every task output the run kept by reference
    (``TaskState.output_ref``: the result of the task's ``AgentRun``, which
    holds it whole, of its execution ``output_run_id``, else the latest;
    ``OUTPUT_READS`` at a time); ``output_ref`` stays, saying
    where it came from. An output that cannot be read (e.g. the child's
    history is past the namespace's retention) stays by reference, logged
    (``oma.records.outputs.read_task_outputs``)."""
    await read_task_outputs(client, result.tasks)


def stopped_error(result: TeamRunResult) -> OMAError:
    """The error of a plan-only run that ended without a plan: the class of
    its ``error_code`` (``RunTimeoutError``, ``BudgetExceededError``,
    ``AbortedError``, ...)."""
    message = result.error or f"the run ended {result.status} before its plan was ready"
    return error_for(result.error_code, f"{message} (status {result.status})")


def cause(err: BaseException) -> str:
    """The innermost cause of a Temporal failure, as ``TYPE: message``."""
    while err.__cause__ is not None or getattr(err, "cause", None) is not None:
        err = getattr(err, "cause", None) or err.__cause__  # type: ignore[assignment]
    kind = getattr(err, "type", None) or type(err).__name__
    # str() of an ApplicationError already starts with its type
    return f"{kind}: {getattr(err, 'message', None) or err}"
