"""``OpenMultiAgent``: start agent and team runs on Temporal from Python.

The client side only: it validates input, starts ``AgentRun`` / ``TeamRun``
workflows and awaits their results. Workers (``worker.py``, ``oma worker``)
execute them. While it awaits a team run, the client can answer the run's
approval requests with Python callbacks (``on_plan_ready``,
``on_task_dispatch``, ``on_approval``), through the same ``decide`` update
the ``oma`` CLI and the stock ``temporal`` CLI use.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, TypeAlias

from pydantic import ValidationError
from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import TypedSearchAttributes
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from oma._logging import forward_core_logs
from oma.connection import Connection
from oma.core.agent_config import AgentConfig
from oma.core.approvals import ApprovalDecision, ApprovalRequest, Decision, DecisionValue, Reviewer
from oma.core.errors import (
    ERRORS,
    ApprovalConflictError,
    ApprovalStaleDecisionError,
    ApprovalUnknownRequestError,
    InvalidRunInputError,
    OMAError,
    TemporalUnavailableError,
    error_for,
    error_from_failure,
)
from oma.core.limits import check_child_ids
from oma.core.message_guard import to_messages
from oma.core.plan import CoordinatorConfig, PlanArtifact
from oma.core.results import AgentRunResult, TeamRunResult
from oma.core.run_input import (
    AgentRunInput,
    RunOptions,
    TeamRunInput,
    checked_team_run_input,
)
from oma.core.task import TaskSpec, TaskState
from oma.core.team import TeamConfig
from oma.core.validation import check_sendable, format_validation_error
from oma.core.visibility import team_run_result_of
from oma.dev_server import DevServer, is_listening, split_address
from oma.plugin import codec_key_error
from oma.workflows._visibility import start_attributes

logger = logging.getLogger(__name__)

ApprovalAnswer: TypeAlias = Literal["approve", "reject", "suspend"] | bool
"""What an approval callback returns: ``approve`` (or ``True``), ``reject``
(or ``False``), or ``suspend``: leave the request open for another reviewer
(``oma approve``, ``temporal workflow update``, ``OpenMultiAgent.decide``)."""

ApprovalCallback: TypeAlias = Callable[
    [ApprovalRequest], ApprovalAnswer | Awaitable[ApprovalAnswer]
]
"""An approval callback: gets the open ``ApprovalRequest``, sync or async."""

CALLBACK_REVIEWER_ID = "oma:python-callback"
"""The reviewer id recorded for a callback's decision unless ``reviewer`` is given."""

EMBEDDED_DB = Path(".oma") / "temporal.db"
"""Where ``OpenMultiAgent.embedded`` keeps the embedded dev server's histories
(relative to the working directory: the file ``oma run`` and ``oma dev`` use)."""

POLL_INTERVAL_S = 0.3
"""Seconds between two ``pending_approvals`` queries while callbacks wait for requests."""

OUTPUT_READS = 8
"""How many outputs kept by reference ``team_run_result`` reads at once."""


@asynccontextmanager
async def serving(
    connection: Connection, *, worker: bool | None = None, started_by: str = ""
) -> AsyncIterator[tuple[Client, Connection]]:
    """A client of ``connection``'s server that works with nothing else running,
    and the connection it uses (``OpenMultiAgent.embedded``, ``oma run``).

    When nothing listens at the address (a port on this machine), the
    embedded Temporal dev server starts there (histories in ``EMBEDDED_DB``,
    its log beside it; ``started_by`` names who started it for a second one
    to say) with a worker in this process, and both stop on exit. When a
    server listens, it only connects. ``worker`` True or False runs a worker
    in this process, or none, in either case.

    Raises ``TemporalUnavailableError`` when the server cannot be started (the
    port taken, ``EMBEDDED_DB`` held by another embedded server, whose
    address the message names; the message points to the server's log) or
    no server answers.
    """
    server: DevServer | None = None
    if not is_listening(connection.address):
        _, port = split_address(connection.address)
        log_file = EMBEDDED_DB.with_name("dev-server.log")
        server = DevServer(
            port=port,
            db_file=EMBEDDED_DB,
            log_file=log_file,
            namespaces=[connection.namespace],
            started_by=started_by,
        )
        try:
            await asyncio.to_thread(server.start)
        except TemporalUnavailableError as err:
            raise TemporalUnavailableError(f"{err.message}; see {log_file}") from None
        connection = connection.at(server.address)
    in_process = worker if worker is not None else server is not None
    if in_process:
        # the in-process worker's SDK warnings (e.g. "Query not found") would
        # otherwise be written to this program's stdout
        forward_core_logs()
    try:
        client = await connection.connect()
        if in_process:
            from oma.worker import build_worker  # the worker's imports only when it runs

            async with build_worker(client, connection.task_queue):
                yield client, connection
        else:
            yield client, connection
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)


class OpenMultiAgent:
    """Runs agents and teams as Temporal workflows.

    Connects where Temporal's environment configuration says
    (``oma.connection``: a ``TEMPORAL_PROFILE`` of the profile file,
    ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, TLS;
    default ``localhost:7233``, namespace ``default``), with ``address`` and
    ``namespace`` overriding it, and starts workflows on ``task_queue``
    (``OMA_TASK_QUEUE`` or ``oma``); or uses the given ``client``, which must
    use ``oma.plugin.OmaPlugin`` (its pydantic data converter).

    Approval callbacks answer the approval requests (``options.approvals``) of
    the team runs this client starts and awaits (``run_team``, ``run_tasks``,
    ``run_from_plan``, ``plan``). While it awaits such a run, the client
    queries ``pending_approvals`` every ``POLL_INTERVAL_S`` seconds and offers
    each new open request once, oldest first, one at a time: a ``plan``
    request to ``on_plan_ready``, a ``dispatch`` request to
    ``on_task_dispatch``, and any request whose specific callback is unset
    (``round`` requests always) to ``on_approval``. With no callback for it, a
    request stays open for another reviewer. Without any callback, the client
    sends no query at all.

    A callback gets the ``ApprovalRequest`` and returns an ``ApprovalAnswer``.
    An ``async`` callback runs on the caller's event loop; a plain one runs in
    a worker thread (``asyncio.to_thread``), so it may block, e.g. to ask on a
    terminal. ``approve``/``reject`` are sent as the ``decide`` update with the
    request's hash, ``reviewer`` (default ``{id: "oma:python-callback"}``) and
    no comment. A decision the run refuses because another reviewer decided
    first (``APPROVAL_CONFLICT``) or the request closed meanwhile
    (``APPROVAL_UNKNOWN_REQUEST``, e.g. it timed out) is logged, not raised;
    one refused as stale (``APPROVAL_STALE_DECISION``: the content changed)
    is logged and the request offered again with its new content.
    When the run ends first, a callback still running is cancelled (async) or
    its answer is ignored (sync).

    A callback that raises, or returns anything else than an
    ``ApprovalAnswer`` (``ValueError``), stops the review: the exception
    propagates out of the ``run_*`` call and the run is left running, its
    request open; decide it with ``decide`` or stop the run with ``abort``.
    An ``RPCError`` of the update (other than the run having closed) propagates
    the same way.
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        namespace: str | None = None,
        task_queue: str | None = None,
        client: Client | None = None,
        on_plan_ready: ApprovalCallback | None = None,
        on_task_dispatch: ApprovalCallback | None = None,
        on_approval: ApprovalCallback | None = None,
        reviewer: Reviewer | Mapping[str, Any] | str | None = None,
    ) -> None:
        """Raises ``InvalidRunInputError`` for a malformed ``reviewer`` (a
        ``Reviewer``, its ``{id, display_name}`` or an id string), and
        ``TemporalConfigError`` when the Temporal profile file cannot be loaded."""
        connection = Connection.from_env()
        config = {**connection.config}
        if address:
            config["target_host"] = address
        if namespace:
            config["namespace"] = namespace
        self.connection = Connection(config, task_queue or connection.task_queue)
        self.address = self.connection.address
        self.namespace = self.connection.namespace
        self.task_queue = self.connection.task_queue
        self.on_plan_ready = on_plan_ready
        self.on_task_dispatch = on_task_dispatch
        self.on_approval = on_approval
        self.reviewer = _reviewer(reviewer if reviewer is not None else CALLBACK_REVIEWER_ID)
        self._client = client

    @classmethod
    @asynccontextmanager
    async def embedded(
        cls, *, worker: bool | None = None, **kwargs: Any
    ) -> AsyncIterator[OpenMultiAgent]:
        """An ``OpenMultiAgent`` (``kwargs`` as for the constructor, but no
        ``client``) that works with nothing else running, as ``oma run`` does.

        When nothing listens at the address it connects to (a port on this
        machine), it starts the embedded Temporal dev server there (histories
        in ``.oma/temporal.db``, its log in ``.oma/dev-server.log``) and a
        worker in this process, and stops both on exit. When a server
        listens, it only connects: a worker must poll the task queue (``oma
        dev`` runs one). ``worker=True`` runs a worker in this process in
        either case, ``False`` never.

        Raises ``TemporalUnavailableError`` when the server cannot be started
        (the port taken, ``.oma/temporal.db`` held by another embedded server,
        whose address the message names) or no server answers.
        """
        oma = cls(**kwargs)
        async with serving(oma.connection, worker=worker) as (client, connection):
            oma.connection, oma.address, oma._client = connection, connection.address, client
            yield oma

    async def client(self) -> Client:
        """The Temporal client (connected on first use)."""
        if self._client is None:
            self._client = await self.connection.connect()
        return self._client

    # -- runs ----------------------------------------------------------------

    async def run_agent(
        self,
        config: AgentConfig | Mapping[str, Any],
        input: str | Sequence[Any],
        *,
        workflow_id: str | None = None,
    ) -> AgentRunResult:
        """Run one fresh agent on ``input`` (a string, or a complete message
        list) as an ``AgentRun`` workflow, and return its result.

        Raises ``InvalidMessageError`` for invalid input (or a message list
        for a ``process``/``acp`` agent) before anything starts; a failed run
        raises ``temporalio.client.WorkflowFailureError`` whose cause is an
        ``ApplicationError`` typed with the error code.
        """
        agent = config if isinstance(config, AgentConfig) else AgentConfig.model_validate(config)
        messages, structured = to_messages(input)
        if structured:
            agent.check_accepts_messages()
        run_input = AgentRunInput(agent=agent, input=messages if structured else str(input))
        check_sendable(run_input, "the AgentRun input")
        client = await self.client()
        handle: WorkflowHandle[Any, AgentRunResult] = await start_run(
            client,
            "AgentRun",
            run_input,
            id=workflow_id or f"agent-{agent.name}-{uuid.uuid4().hex[:8]}",
            task_queue=self.task_queue,
            result_type=AgentRunResult,
            search_attributes=start_attributes(agent=agent.name),
        )
        return await handle.result()

    async def run_team(
        self,
        team: TeamConfig | Mapping[str, Any],
        goal: str,
        *,
        coordinator: CoordinatorConfig | Mapping[str, Any] | None = None,
        options: RunOptions | Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
    ) -> TeamRunResult:
        """Run ``team`` toward ``goal`` as a ``TeamRun`` workflow: the
        ``coordinator`` (default: the team's default model) plans the tasks,
        the team runs them, the coordinator synthesizes ``final_output``.

        ``team`` is ``{name, agents: [AgentConfig, ...]}``; ``coordinator``
        is ``{provider, model, system_prompt, instructions, max_turns,
        max_tokens, script}``; ``options`` is ``RunOptions``
        (``approvals``, ``timeout_s``, ``max_token_budget``, ...). The
        coordinator's usage is in ``agent_results["coordinator"]``.

        Raises ``InvalidRunInputError`` (the message names each bad field's
        path, e.g. ``team.agents[0].provider``) before anything starts. A run
        that fails as a whole (``INVALID_PLAN``: the coordinator's plan was
        still invalid after its correction turn) raises
        ``temporalio.client.WorkflowFailureError`` whose cause is an
        ``ApplicationError`` typed with the code; a task failure, a timeout, a
        budget, a rejection or an abort does not raise: the result's
        ``status`` and ``error_code`` say so. Approval callbacks: see the
        class.
        """
        run_input = checked_team_run_input(
            {"team": team, "goal": goal, "coordinator": coordinator, "options": options or {}}
        )
        return await self._execute_team_run(run_input, workflow_id)

    async def run_tasks(
        self,
        team: TeamConfig | Mapping[str, Any],
        tasks: Sequence[TaskSpec | Mapping[str, Any]],
        *,
        options: RunOptions | Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
    ) -> TeamRunResult:
        """Run ``tasks`` across ``team`` as a ``TeamRun`` workflow and return
        its result (``result.task(id)`` for one task; the outputs are also in
        the run's ``shared_memory`` query, ``<assignee>/task:<id>:result``).

        Each task is ``{id, title, description, assignee, depends_on: [ids],
        requires, ...}`` (``TaskSpec``); ``options`` is ``RunOptions``.

        Raises, before anything starts: ``InvalidRunInputError`` for a
        malformed team, task or option (naming the field's path),
        ``DagValidationError`` for an invalid graph (duplicate id, unknown
        assignee or dependency, cycle), ``AssigneeRequirementsMismatchError``
        or ``NoEligibleAgentError`` for a task whose ``requires`` no suitable
        agent meets. A failed task, a timeout, a budget, a rejection or an
        abort does not raise: see the result's ``status`` and ``error_code``.
        Approval callbacks: see the class.
        """
        run_input = checked_team_run_input(
            {"team": team, "tasks": list(tasks), "options": options or {}}
        )
        return await self._execute_team_run(run_input, workflow_id)

    async def run_from_plan(
        self,
        team: TeamConfig | Mapping[str, Any],
        plan: PlanArtifact | Mapping[str, Any],
        *,
        options: RunOptions | Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
    ) -> TeamRunResult:
        """Run a frozen ``plan`` (``{version: 1, goal, tasks: [...]}``, from
        ``plan`` or ``oma plan``) across ``team`` as a ``TeamRun`` workflow:
        its tasks run as written, with no coordinator and no synthesis.

        Raises what ``run_tasks`` raises, before anything starts; an
        unsupported ``plan.version`` is an ``InvalidRunInputError``.
        """
        run_input = checked_team_run_input({"team": team, "plan": plan, "options": options or {}})
        return await self._execute_team_run(run_input, workflow_id)

    async def plan(
        self,
        team: TeamConfig | Mapping[str, Any],
        goal: str,
        *,
        coordinator: CoordinatorConfig | Mapping[str, Any] | None = None,
        options: RunOptions | Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
    ) -> PlanArtifact:
        """The coordinator's plan for ``goal``, from a plan-only ``TeamRun``
        (``options.plan_only`` is set): validated tasks with ids ``t1``,
        ``t2``, ... and ``depends_on`` as ids, none of them run. Run it later
        with ``run_from_plan``.

        Raises what ``run_team`` raises; a run that stopped before its plan
        was ready raises ``RunTimeoutError`` (``options.timeout_s``),
        ``BudgetExceededError`` (``options.max_token_budget``) or, aborted,
        an ``OMAError`` naming the run's status and error code.
        """
        if isinstance(options, RunOptions):
            options = options.model_copy(update={"plan_only": True})
        else:
            options = {**(options or {}), "plan_only": True}
        run_input = checked_team_run_input(
            {"team": team, "goal": goal, "coordinator": coordinator, "options": options}
        )
        result = await self._execute_team_run(run_input, workflow_id)
        if result.plan is None:
            raise _stopped_error(result)
        return result.plan

    # -- approvals and abort -------------------------------------------------

    async def pending_approvals(self, workflow_id: str) -> list[ApprovalRequest]:
        """The open approval requests of the ``TeamRun`` ``workflow_id``,
        oldest first (the ``pending_approvals`` query).

        Raises ``temporalio.service.RPCError`` (status ``NOT_FOUND``) when
        there is no such workflow.
        """
        client = await self.client()
        return await _pending(client.get_workflow_handle(workflow_id))

    async def approval_request(
        self, workflow_id: str, request_id: str, *, rpc_timeout: timedelta | None = None
    ) -> ApprovalRequest:
        """The open request ``request_id`` of the ``TeamRun`` ``workflow_id``
        (from ``pending_approvals``), with its current ``request_hash``.

        Raises ``ApprovalConflictError`` when it was already decided (the
        message names the decision that won), ``ApprovalUnknownRequestError``
        when the run has no such open request (the message lists the open
        ones), and ``temporalio.service.RPCError`` (status ``NOT_FOUND``) when
        there is no such workflow.
        """
        client = await self.client()
        handle = client.get_workflow_handle(workflow_id)
        pending = await _pending(handle, rpc_timeout)
        request = next((r for r in pending if r.request_id == request_id), None)
        if request is not None:
            return request
        state: TeamRunResult = await handle.query(
            "state", result_type=TeamRunResult, rpc_timeout=rpc_timeout
        )
        earlier = next((d for d in state.approval_decisions if d.request_id == request_id), None)
        if earlier is not None:
            raise ApprovalConflictError(
                f"request {request_id!r} was already decided: {earlier.decision} by "
                f"{earlier.reviewer.id} at {earlier.decided_at.isoformat()}"
            )
        open_ids = ", ".join(r.request_id for r in pending) or "none"
        raise ApprovalUnknownRequestError(
            f"TeamRun {workflow_id} has no open approval request {request_id!r} (open: {open_ids})"
        )

    async def decide(
        self,
        workflow_id: str,
        request_id: str,
        decision: DecisionValue | bool,
        reviewer: Reviewer | Mapping[str, Any] | str,
        comment: str | None = None,
        *,
        request: ApprovalRequest | None = None,
        rpc_timeout: timedelta | None = None,
    ) -> ApprovalDecision:
        """Approve or reject the open request ``request_id`` of the ``TeamRun``
        ``workflow_id`` and return the decision the run recorded.

        ``decision``: ``approve`` (or ``True``) or ``reject`` (or ``False``);
        ``reviewer``: a ``Reviewer``, its ``{id, display_name}``, or an id.
        Sends the ``decide`` update with the hash of ``request`` (what the
        reviewer saw, from ``approval_request``; read now when not given), so
        the run validates it before recording it. ``rpc_timeout`` bounds each
        call (``temporalio.client.RPCTimeoutOrCancelledError`` past it: no
        worker answered).

        Raises ``InvalidRunInputError`` for a malformed decision or reviewer
        (before any call), what ``approval_request`` raises, and
        ``ApprovalStaleDecisionError`` when the content changed since it was
        read (``ApprovalConflictError`` when another reviewer decided first).
        """
        value = _decision_value(decision)
        who = _reviewer(reviewer)
        if request is None:
            request = await self.approval_request(workflow_id, request_id, rpc_timeout=rpc_timeout)
        client = await self.client()
        handle = client.get_workflow_handle(workflow_id)
        return await _send_decision(handle, request, value, who, comment, rpc_timeout)

    async def abort(self, workflow_id: str, reason: str | None = None) -> None:
        """Abort the ``TeamRun`` ``workflow_id`` gracefully (the ``abort``
        signal, ``{reason}``): no new task starts, tasks in flight settle, the
        rest and the synthesis are skipped, open requests close; the run ends
        ``cancelled`` with ``error_code`` ``ABORTED``. Returns once the signal
        is delivered, not when the run has ended.

        Raises ``temporalio.service.RPCError`` (status ``NOT_FOUND``) when
        there is no such running workflow.
        """
        client = await self.client()
        await client.get_workflow_handle(workflow_id).signal("abort", {"reason": reason})

    # -- awaiting a team run -------------------------------------------------

    def _callbacks(self) -> dict[str, ApprovalCallback | None]:
        return {
            "on_plan_ready": self.on_plan_ready,
            "on_task_dispatch": self.on_task_dispatch,
            "on_approval": self.on_approval,
        }

    async def _execute_team_run(
        self, run_input: TeamRunInput, workflow_id: str | None
    ) -> TeamRunResult:
        client = await self.client()
        handle = await start_team_run(
            client,
            run_input,
            id=workflow_id or f"team-{run_input.team.name}-{uuid.uuid4().hex[:8]}",
            task_queue=self.task_queue,
        )
        if not any(self._callbacks().values()):
            return await team_run_result(handle, client)
        return await self._result_with_review(handle, client)

    async def _result_with_review(
        self, handle: WorkflowHandle[Any, TeamRunResult], client: Client
    ) -> TeamRunResult:
        """The run's result, answering its requests meanwhile; the review
        loop only ends by raising (a callback's error)."""
        result = asyncio.ensure_future(team_run_result(handle, client))
        review = asyncio.ensure_future(self._review(handle))
        try:
            await asyncio.wait({result, review}, return_when=asyncio.FIRST_COMPLETED)
            if review.done():
                review.result()
            return await result
        finally:
            for task in (result, review):
                if not task.done():
                    task.cancel()
                    # cancelled mid-call, the SDK raises its own error rather
                    # than CancelledError (WorkflowUpdateRPCTimeoutOrCancelledError
                    # for a decision still in flight when the run ended)
                    with contextlib.suppress(asyncio.CancelledError, RPCTimeoutOrCancelledError):
                        await task

    async def _review(self, handle: WorkflowHandle[Any, TeamRunResult]) -> None:
        offered: set[str] = set()
        while True:
            for request in await self._open_requests(handle):
                if request.request_id not in offered:
                    offered.add(request.request_id)
                    if await self._offer(handle, request) == "stale":
                        offered.discard(request.request_id)
            await asyncio.sleep(POLL_INTERVAL_S)

    async def _open_requests(
        self, handle: WorkflowHandle[Any, TeamRunResult]
    ) -> list[ApprovalRequest]:
        # A query can fail while the run has not finished its first workflow
        # task, or while no worker answers: the result wait is what counts,
        # so the next poll simply asks again.
        try:
            return await _pending(handle)
        except RPCError as err:
            logger.debug("pending_approvals of %s: %s", handle.id, err)
            return []

    async def _offer(
        self, handle: WorkflowHandle[Any, TeamRunResult], request: ApprovalRequest
    ) -> Literal["decided", "open", "stale"]:
        """Offer ``request`` to its callback and send the answer."""
        name = {"plan": "on_plan_ready", "dispatch": "on_task_dispatch"}.get(request.boundary)
        callbacks = self._callbacks()
        if name is None or callbacks[name] is None:
            name = "on_approval"
        callback = callbacks[name]
        if callback is None:
            return "open"
        answer = await call_approval_callback(callback, request)
        value = answer_decision(answer, name)
        if value is None:
            logger.info("%s suspended %s of %s: left open", name, request.request_id, handle.id)
            return "open"
        try:
            await _send_decision(handle, request, value, self.reviewer, None)
        except (ApprovalConflictError, ApprovalUnknownRequestError) as err:
            logger.info("%s's %s of %s not recorded: %s", name, value, request.request_id, err)
            return "open"
        except ApprovalStaleDecisionError as err:
            logger.info("%s reviewed a stale %s: offered again: %s", name, request.request_id, err)
            return "stale"
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            # the run closed between the query and the update; its result follows
            logger.info("%s's %s of %s came after the run ended", name, value, request.request_id)
            return "open"
        return "decided"


# -- helpers -----------------------------------------------------------------


async def start_team_run(
    client: Client, run_input: TeamRunInput, *, id: str, task_queue: str
) -> WorkflowHandle[Any, TeamRunResult]:
    """Start a ``TeamRun`` of ``run_input`` as workflow ``id`` on ``task_queue``
    with its search attributes (``OmaStatus=running``, ``OmaTeam``: see
    ``start_run``). The input is sent as given (``TeamRunInput.payload``: the
    defaults not repeated), the size ``checked_team_run_input`` checked.

    Raises ``InvalidRunInputError`` when a task's ``AgentRun`` id,
    ``<id>/<task id>``, would pass Temporal's limit on a workflow id (before
    anything starts), and the SDK's ``WorkflowAlreadyStartedError`` and
    ``RPCError``."""
    check_child_ids(id, (t.id for t in run_input.given_tasks()))
    return await start_run(
        client,
        "TeamRun",
        run_input.payload(),
        id=id,
        task_queue=task_queue,
        result_type=TeamRunResult,
        search_attributes=start_attributes(team=run_input.team.name),
    )


async def start_run(
    client: Client,
    workflow: str,
    arg: Any,
    *,
    id: str,
    task_queue: str,
    result_type: type[Any],
    search_attributes: TypedSearchAttributes,
) -> WorkflowHandle[Any, Any]:
    """Start ``workflow`` with ``search_attributes``; on a namespace that has
    not registered them (``oma.core.visibility.SEARCH_ATTRIBUTES``), start it
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
        )
    except RPCError as err:
        if err.status != RPCStatusCode.INVALID_ARGUMENT or "search attribute" not in err.message:
            raise
        logger.info("starting %s without search attributes: %s", workflow, err.message)
    return await client.start_workflow(
        workflow, arg, id=id, task_queue=task_queue, result_type=result_type
    )


async def team_run_result(
    handle: WorkflowHandle[Any, TeamRunResult], client: Client | None = None
) -> TeamRunResult:
    """The result of the ``TeamRun`` ``handle``: what it returned, or, for a
    run that did not succeed (it ends Failed, ``oma.core.visibility.team_run_failure``),
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
    holds it whole; ``OUTPUT_READS`` at a time); ``output_ref`` stays, saying
    where it came from. An output that cannot be read (e.g. the child's
    history is past the namespace's retention) stays by reference, logged."""
    limit = asyncio.Semaphore(OUTPUT_READS)

    async def read(task: TaskState, ref: str) -> None:
        async with limit:
            handle = client.get_workflow_handle(ref, result_type=AgentRunResult)
            try:
                task.output = (await handle.result()).output
            except (RPCError, WorkflowFailureError) as err:
                logger.warning("the output of task %s (%s) cannot be read: %s", task.id, ref, err)

    await asyncio.gather(
        *(read(t, t.output_ref) for t in result.tasks if t.output is None and t.output_ref)
    )


async def _pending(
    handle: WorkflowHandle[Any, Any], rpc_timeout: timedelta | None = None
) -> list[ApprovalRequest]:
    pending: list[ApprovalRequest] = await handle.query(
        "pending_approvals", result_type=list[ApprovalRequest], rpc_timeout=rpc_timeout
    )
    return pending


async def _send_decision(
    handle: WorkflowHandle[Any, Any],
    request: ApprovalRequest,
    value: DecisionValue,
    reviewer: Reviewer,
    comment: str | None,
    rpc_timeout: timedelta | None = None,
) -> ApprovalDecision:
    """Send the ``decide`` update (an update, not a signal, because the
    caller needs to know whether its decision is the one recorded).

    A refusal raises the matching ``ApprovalError`` (or ``InvalidRunInputError``),
    read from the refusal with ``oma.core.errors.error_from_failure``.
    """
    decision = Decision(
        request_id=request.request_id,
        request_hash=request.request_hash,
        decision=value,
        reviewer=reviewer,
        comment=comment,
    )
    try:
        recorded: ApprovalDecision = await handle.execute_update(
            "decide", decision, result_type=ApprovalDecision, rpc_timeout=rpc_timeout
        )
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type in ERRORS:
            raise error_from_failure(cause) from err
        raise
    return recorded


async def call_approval_callback(callback: ApprovalCallback, request: ApprovalRequest) -> Any:
    """What ``callback`` answers for ``request``: an async callback is awaited,
    a plain one runs in a worker thread (it may block)."""
    if inspect.iscoroutinefunction(callback):
        answer = await callback(request)
    else:
        answer = await asyncio.to_thread(callback, request)
    if inspect.isawaitable(answer):  # e.g. a lambda or partial around an async function
        answer = await answer
    return answer


def answer_decision(answer: Any, name: str) -> DecisionValue | None:
    """The decision a callback's answer stands for; ``None`` for ``suspend``.
    Raises ``ValueError`` for anything else than an ``ApprovalAnswer``."""
    if answer is True or answer == "approve":
        return "approve"
    if answer is False or answer == "reject":
        return "reject"
    if answer == "suspend":
        return None
    raise ValueError(
        f"{name} returned {answer!r}; an approval callback returns 'approve', 'reject', "
        "'suspend', True or False"
    )


def _decision_value(decision: DecisionValue | bool) -> DecisionValue:
    if decision is True or decision == "approve":
        return "approve"
    if decision is False or decision == "reject":
        return "reject"
    raise InvalidRunInputError(
        f"invalid decision: {decision!r}; give 'approve', 'reject', True or False"
    )


def _reviewer(reviewer: Reviewer | Mapping[str, Any] | str) -> Reviewer:
    if isinstance(reviewer, Reviewer):
        return reviewer
    try:
        return Reviewer.model_validate({"id": reviewer} if isinstance(reviewer, str) else reviewer)
    except ValidationError as err:
        raise InvalidRunInputError(
            f"invalid reviewer: {format_validation_error(err, 'reviewer', Reviewer)}"
        ) from None


def _stopped_error(result: TeamRunResult) -> OMAError:
    """The error of a plan-only run that ended without a plan: the class of
    its ``error_code`` (``RunTimeoutError``, ``BudgetExceededError``,
    ``AbortedError``, ...)."""
    message = result.error or f"the run ended {result.status} before its plan was ready"
    return error_for(result.error_code, f"{message} (status {result.status})")
