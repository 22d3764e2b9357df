"""``OpenMultiAgent``: start agent and team runs on Temporal from Python.

The client side only: it validates input, starts ``AgentRun`` / ``TeamRun``
workflows and awaits their results. Workers (``worker.py``, ``oma worker``)
execute them. While it awaits a team run, the client can answer the run's
approval requests with Python callbacks (``on_plan_ready``,
``on_task_dispatch``, ``on_approval``), through the same ``decide`` update
the ``oma`` CLI and the stock ``temporal`` CLI use.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client, WorkflowHandle

from oma.client.approvals import (
    CALLBACK_REVIEWER_ID,
    CallbackReview,
    decision_value,
    pending,
    reviewer_of,
    send_decision,
    upstream_outputs,
)
from oma.client.embedded import serving
from oma.client.listing import list_team_runs, open_approvals
from oma.client.runs import (
    start_attributes,
    start_run,
    start_team_run,
    stopped_error,
    team_run_result,
)
from oma.core.contracts.names import QueryName, SignalName, WorkflowName
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    DecisionValue,
    PendingApproval,
    Reviewer,
)
from oma.core.schema.errors import ApprovalConflictError, ApprovalUnknownRequestError
from oma.core.schema.listing import OpenApprovals, TeamRunListing
from oma.core.schema.message_guard import to_messages
from oma.core.schema.plan import CoordinatorConfig, PlanArtifact
from oma.core.schema.results import AgentRunResult, TeamRunResult
from oma.core.schema.run_input import (
    AgentRunInput,
    RunOptions,
    TeamRunInput,
    checked_team_run_input,
)
from oma.core.schema.task import TaskSpec
from oma.core.schema.team import TeamConfig
from oma.core.schema.validation import check_sendable
from oma.runtime.approval_callbacks import ApprovalCallback
from oma.runtime.connection import Connection


class OpenMultiAgent:
    """Runs agents and teams as Temporal workflows.

    Connects where Temporal's environment configuration says
    (``oma.runtime.connection``: a ``TEMPORAL_PROFILE`` of the profile file,
    ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, TLS;
    default ``localhost:7233``, namespace ``default``), with ``address`` and
    ``namespace`` overriding it, and starts workflows on ``task_queue``
    (``OMA_TASK_QUEUE`` or ``oma``); or uses the given ``client``, which must
    use ``oma.runtime.client_plugin.OmaClientPlugin`` (its pydantic data converter).

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
        self.reviewer = reviewer_of(reviewer if reviewer is not None else CALLBACK_REVIEWER_ID)
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
            oma.connection, oma.address, oma._client = (
                connection,
                connection.address,
                client,
            )
            yield oma

    @property
    def _stored(self) -> bool:
        """Whether this client's runs keep large payloads in a payload store
        (``Connection.store``): their inputs may pass Temporal's 2 MB."""
        return self.connection.store is not None

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
        check_sendable(run_input, "the AgentRun input", stored=self._stored)
        client = await self.client()
        handle: WorkflowHandle[Any, AgentRunResult] = await start_run(
            client,
            WorkflowName.AGENT_RUN,
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
            {"team": team, "goal": goal, "coordinator": coordinator, "options": options or {}},
            stored=self._stored,
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
            {"team": team, "tasks": list(tasks), "options": options or {}}, stored=self._stored
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
        run_input = checked_team_run_input(
            {"team": team, "plan": plan, "options": options or {}}, stored=self._stored
        )
        return await self._execute_team_run(run_input, workflow_id)

    async def fork(
        self,
        run_id: str,
        *,
        rerun: Sequence[str] | None = None,
        team: TeamConfig | Mapping[str, Any] | None = None,
        options: RunOptions | Mapping[str, Any] | None = None,
        edit: Mapping[str, Mapping[str, Any]] | None = None,
        workflow_id: str | None = None,
    ) -> TeamRunResult:
        """Fork the ``TeamRun`` ``run_id`` (docs/fork.md): a new run keeps the
        outputs, usage and shared memory of every task that is not in
        ``rerun`` nor downstream of one, and runs those again with the
        current code (``rerun`` none: every task that did not complete).
        ``team`` replaces the source's team, ``options`` the source's options
        it names, ``edit`` maps a task id to the fields that change (an
        edited task runs again). The source run is never changed.

        Raises, before anything starts, ``InvalidForkError`` (an unknown
        run or task, a task to run again whose assignee the team lacks,
        nothing to run again) and the run input's errors. Like ``run_tasks``,
        a failed task does not raise. Approval callbacks: see the class.
        """
        from oma.client.fork import preview, start_fork
        from oma.core.schema.fork import parse_fork_input

        raw: dict[str, Any] = {"fork": {"run_id": run_id}}
        if rerun is not None:
            raw["fork"]["rerun"] = list(rerun)
        if edit:
            raw["fork"]["edit"] = {k: dict(v) for k, v in edit.items()}
        for key, value in (("team", team), ("options", options)):
            if value is not None:
                raw[key] = (
                    value.model_dump(mode="json", exclude_unset=True)
                    if isinstance(value, BaseModel)
                    else value
                )
        fork = parse_fork_input(raw)
        client = await self.client()
        wid = workflow_id or f"{run_id}-fork-{uuid.uuid4().hex[:8]}"
        forked = await preview(client, fork, wid)
        handle = await start_fork(
            client, fork, id=wid, task_queue=self.task_queue, team=forked.input["team"]["name"]
        )
        if not any(self._callbacks().values()):
            return await team_run_result(handle, client)
        return await CallbackReview(handle, self._callbacks(), self.reviewer).result(client)

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
            {"team": team, "goal": goal, "coordinator": coordinator, "options": options},
            stored=self._stored,
        )
        result = await self._execute_team_run(run_input, workflow_id)
        if result.plan is None:
            raise stopped_error(result)
        return result.plan

    # -- finding runs ----------------------------------------------------------

    async def list_team_runs(
        self, *, status: str | None = None, team: str | None = None, limit: int = 20
    ) -> list[TeamRunListing]:
        """The ``limit`` newest team runs of the namespace, newest first, as
        Temporal's visibility lists them (``OmaStatus``, ``OmaTeam``, ...);
        only those with ``OmaStatus`` ``status`` and ``OmaTeam`` ``team``,
        when given (``oma.client.listing.list_team_runs``: what it raises).
        """
        return await list_team_runs(await self.client(), status=status, team=team, limit=limit)

    async def open_approvals(self, *, rpc_timeout: timedelta | None = None) -> OpenApprovals:
        """Every open approval request of the namespace, oldest first, at
        the runs whose ``OmaStatus`` is ``awaiting_approval``
        (``oma.client.listing.open_approvals``: what it raises)."""
        return await open_approvals(await self.client(), rpc_timeout=rpc_timeout)

    # -- approvals and abort -------------------------------------------------

    async def pending_approvals(self, workflow_id: str) -> list[PendingApproval]:
        """The open approval requests of the ``TeamRun`` ``workflow_id``,
        oldest first (the ``pending_approvals`` query); a dispatch request
        with a preview of each dependency's output (``upstream``; the whole
        outputs: ``upstream_outputs``).

        Raises ``temporalio.service.RPCError`` (status ``NOT_FOUND``) when
        there is no such workflow.
        """
        client = await self.client()
        return await pending(client.get_workflow_handle(workflow_id))

    async def approval_request(
        self, workflow_id: str, request_id: str, *, rpc_timeout: timedelta | None = None
    ) -> PendingApproval:
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
        open_requests = await pending(handle, rpc_timeout)
        request = next((r for r in open_requests if r.request_id == request_id), None)
        if request is not None:
            return request
        state: TeamRunResult = await handle.query(
            QueryName.STATE, result_type=TeamRunResult, rpc_timeout=rpc_timeout
        )
        earlier = next((d for d in state.approval_decisions if d.request_id == request_id), None)
        if earlier is not None:
            raise ApprovalConflictError(
                f"request {request_id!r} was already decided: {earlier.decision} by "
                f"{earlier.reviewer.id} at {earlier.decided_at.isoformat()}"
            )
        open_ids = ", ".join(r.request_id for r in open_requests) or "none"
        raise ApprovalUnknownRequestError(
            f"TeamRun {workflow_id} has no open approval request {request_id!r} (open: {open_ids})"
        )

    async def upstream_outputs(
        self,
        workflow_id: str,
        request: PendingApproval | str,
        *,
        rpc_timeout: timedelta | None = None,
    ) -> dict[str, str | None]:
        """The whole outputs a dispatch request's task will act on: each
        dependency's task id -> its output (``None`` when it cannot be read),
        in ``depends_on`` order; ``{}`` for a request that is not a dispatch.
        ``request``: from ``approval_request``, or its id.

        Raises what ``approval_request`` raises (for a request id) and
        ``temporalio.service.RPCError``.
        """
        if isinstance(request, str):
            request = await self.approval_request(workflow_id, request, rpc_timeout=rpc_timeout)
        client = await self.client()
        return await upstream_outputs(client.get_workflow_handle(workflow_id), request, rpc_timeout)

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
        value = decision_value(decision)
        who = reviewer_of(reviewer)
        if request is None:
            request = await self.approval_request(workflow_id, request_id, rpc_timeout=rpc_timeout)
        client = await self.client()
        handle = client.get_workflow_handle(workflow_id)
        return await send_decision(handle, request, value, who, comment, rpc_timeout)

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
        await client.get_workflow_handle(workflow_id).signal(SignalName.ABORT, {"reason": reason})

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
        return await CallbackReview(handle, self._callbacks(), self.reviewer).result(client)
