"""The input of a ``TeamRun`` workflow: the JSON a user writes.

Parse user JSON with ``parse_team_run_input`` so every error names its field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from oma.core.schema import limits
from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.approvals import ApprovalOptions, check_dispatch_names, check_tool_gate_names
from oma.core.schema.dag import shard_plan, validate_task_graph
from oma.core.schema.errors import InvalidRunInputError
from oma.core.schema.limits import (
    GOAL_COPIES,
    MAX_CONCURRENCY,
    MAX_DURATION_S,
    MAX_HISTORY_EVENTS,
    MAX_NAME_CHARS,
    PLAN_ROOM_BYTES,
    TASK_STATE_FLOOR_BYTES,
    check_goal_size,
    check_run_size,
    check_task_count,
    json_size,
)
from oma.core.schema.message_guard import validate_messages
from oma.core.schema.messages import LLMMessage
from oma.core.schema.plan import CoordinatorConfig, PlanArtifact, check_coordinator
from oma.core.schema.pricing import ModelPrice
from oma.core.schema.results import AcpSessionInfo
from oma.core.schema.run_state import TeamRunState
from oma.core.schema.task import TaskSpec
from oma.core.schema.task_template import expand
from oma.core.schema.team import TeamConfig, check_assignments
from oma.core.schema.validation import check_sendable, parse_run_json

SchedulingStrategy = Literal["dependency-first", "round-robin", "least-busy", "capability-match"]
"""``options.scheduling`` of a run input (``oma.core.rules.scheduling``)."""


class ReuseOptions(BaseModel):
    """``options.reuse``: keep the outputs of another run's tasks that would
    come out the same (docs/fork.md, "Reuse by content")."""

    model_config = ConfigDict(
        extra="forbid", serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    from_: str = Field(
        alias="from",
        min_length=1,
        description="The workflow id of the TeamRun whose completed tasks this run may reuse.",
    )
    temporal_run_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="The Temporal run id of its execution to reuse; none: the latest "
        "execution of 'from' other than this run's own (oma run --reuse sets it to the latest "
        "when it starts the run, so a run under the same workflow id reads its predecessor).",
    )


class RecordedModels(BaseModel):
    """``options.models`` as an object: replay the model turns another run
    recorded (``"recorded"`` is this with its defaults)."""

    model_config = ConfigDict(
        extra="forbid", serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    from_: str | None = Field(
        default=None,
        alias="from",
        min_length=1,
        description="The TeamRun whose turns are replayed; default: the run forked "
        "(a fork's source), else options.reuse's.",
    )
    temporal_run_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="The Temporal run id of the execution of 'from' whose turns are "
        "replayed; none: the one a fork or reuse read (options.reuse's), else the latest.",
    )
    on_miss: Literal["strict", "fallback"] = Field(
        default="strict",
        description="strict: a turn whose request was not recorded fails its task "
        "(RECORDING_MISS); fallback: it calls the live provider.",
    )


class RunOptions(BaseModel):
    """``options`` of a run input."""

    model_config = ConfigDict(extra="forbid")

    max_concurrency: int = Field(
        default=5,
        ge=1,
        le=MAX_CONCURRENCY,
        description="Most tasks in flight at once (each a child workflow).",
    )
    scheduling: SchedulingStrategy = Field(
        default="dependency-first",
        description="How tasks without an assignee get one (see oma.core.rules.scheduling).",
    )
    plan_only: bool = Field(
        default=False, description="A goal run: return the coordinator's plan, run no task."
    )
    strict_assignees: bool = Field(
        default=True,
        description="A goal run: a planned assignee outside the team is an error (else the "
        "task is left for the scheduler).",
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_DURATION_S,
        allow_inf_nan=False,
        description="Whole-run time limit, in seconds (RUN_TIMEOUT).",
    )
    max_token_budget: int | None = Field(
        default=None,
        ge=1,
        description="Tokens (input, cached or not, and output) of every agent, coordinator "
        "included (BUDGET_EXCEEDED).",
    )
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="US dollars every agent may spend, coordinator included "
        "(COST_BUDGET_EXCEEDED): model turns priced by oma.core.schema.pricing and "
        "options.pricing, ACP agents' usage_update.cost. What nobody prices counts nothing, "
        "and the result says so (cost_unknown).",
    )
    pricing: dict[str, ModelPrice] | None = Field(
        default=None,
        description="Prices by model name, in USD per million tokens ({input, output, "
        "cache_write, cache_read}): models the built-in table lacks (a local model), or "
        "prices that replace its own.",
    )
    approvals: ApprovalOptions | None = None
    reuse: ReuseOptions | None = Field(
        default=None,
        description='{"from": RUN_ID}: a task whose content key (its spec, its agent\'s whole '
        "configuration, its upstream tasks' keys) equals that of a task RUN_ID completed keeps "
        "that task's output instead of running (oma.core.rules.reuse).",
    )
    models: Literal["live", "recorded"] | RecordedModels = Field(
        default="live",
        description="live: model turns call their providers; recorded: every model turn whose "
        "request another run recorded gets that run's answer, usage and stop reason without a "
        "call (docs/fork.md).",
    )
    task_search_attributes: bool = Field(
        default=True,
        description="Each task's AgentRun carries the search attributes OmaStatus, OmaTeam, "
        "OmaAgent, OmaTask (and OmaErrorCode when it fails); false: it starts and ends "
        "without them, the team run keeps its own. Each attribute of each task is work for "
        "the server's visibility store (on the embedded dev server about 3 ms of its CPU): "
        "a wide fan-out, whose tasks start at once, runs faster without them "
        "(docs/visibility.md).",
    )
    history_event_limit: int = Field(
        default=10_000,
        ge=100,
        le=MAX_HISTORY_EVENTS,
        description="Continue as new once the run's history has this many events "
        "(Temporal's hard limit is 51,200); the run's state carries over.",
    )

    def recorded(self) -> RecordedModels | None:
        """Where model turns are answered from (``models``), its run named
        (``from``, else ``reuse``'s): ``None`` for live turns, or when no run
        is named."""
        if self.models == "live":
            return None
        given = self.models if isinstance(self.models, RecordedModels) else RecordedModels()
        if given.from_ is not None:
            return given
        if self.reuse is None:
            return None
        execution = self.reuse.temporal_run_id
        return given.model_copy(update={"from_": self.reuse.from_, "temporal_run_id": execution})


class TeamRunInput(BaseModel):
    """Input of the ``TeamRun`` workflow: a team and exactly one of ``goal``
    (a coordinator plans the tasks), ``tasks`` (and, or instead, tasks made
    from ``task_template`` and ``items``), or a frozen ``plan``."""

    model_config = ConfigDict(extra="forbid")

    team: TeamConfig
    goal: str | None = Field(default=None, min_length=1)
    tasks: list[TaskSpec] | None = Field(default=None, min_length=1)
    task_template: TaskSpec | None = Field(
        default=None,
        description="A task whose id, title, description, assignee and depends_on entries "
        "may hold {field} placeholders: one task is made of it per item (after 'tasks', if "
        "any; oma.core.schema.task_template).",
    )
    items: list[dict[str, Any]] | None = Field(
        default=None,
        min_length=1,
        description="With task_template: one object per task, whose fields fill its "
        "placeholders (oma run --items FILE.jsonl reads them from a JSONL file).",
    )
    plan: PlanArtifact | None = None
    coordinator: CoordinatorConfig | None = Field(
        default=None, description="A goal run: the model that plans and synthesizes."
    )
    options: RunOptions = Field(default_factory=RunOptions)
    resume: TeamRunState | None = Field(
        default=None, description="Set by the run itself when it continues as new."
    )
    _made: list[TaskSpec] = PrivateAttr(default_factory=list)
    """The tasks made from ``task_template`` and ``items``."""

    @model_validator(mode="after")
    def _one_source(self) -> TeamRunInput:
        if (self.task_template is None) != (self.items is None):
            raise ValueError(
                "'task_template' and 'items' go together: one task is made of the template "
                "per item (oma run --items FILE.jsonl reads the items from a file)"
            )
        sources = {
            "goal": self.goal,
            "tasks": self.tasks,
            "task_template": None if self.tasks else self.task_template,
            "plan": self.plan,
        }
        given = [k for k, v in sources.items() if v is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of 'goal', 'tasks' (or 'task_template' and 'items') or "
                "'plan'" + (f" (got {', '.join(given)})" if given else "")
            )
        if self.goal is not None and not self.goal.strip():
            raise ValueError("'goal' is blank: say what the team should achieve")
        if not self.options.strict_assignees and self.goal is None:
            # (by value, not "was it set": clients send the whole model)
            raise ValueError(
                "options.strict_assignees checks a coordinator's plan: it needs a 'goal'"
            )
        if self.coordinator is not None and self.goal is None:
            raise ValueError("'coordinator' plans a 'goal'; a run with tasks or a plan has none")
        if self.options.models != "live" and self.options.recorded() is None:
            raise ValueError(
                "options.models replays the model turns another run recorded: name it, "
                '{"models": {"from": RUN_ID}} (a fork replays its source\'s)'
            )
        if self.options.plan_only and self.goal is None:
            raise ValueError("options.plan_only needs a 'goal' (there is nothing to plan)")
        if self.goal is not None:
            check_coordinator(self.coordinator or CoordinatorConfig(), self.team)
        check_tool_gate_names(self.options.approvals, self.team)
        if self.options.approvals and self.options.approvals.plan and self.goal is None:
            raise ValueError(
                "options.approvals.plan reviews a coordinator's plan: it needs a 'goal'"
            )
        if self.task_template is not None and self.items is not None:
            self._made = expand(self.task_template, self.items)
        return self

    def check_tasks(
        self, tasks: Sequence[TaskSpec], *, every_copy: bool = True, stored: bool = False
    ) -> list[list[int]] | None:
        """Check ``tasks`` against this run, as ``TeamRun`` does before any
        task runs (a goal run: once its plan is made); returns the run's
        shards (``shard_plan``: the indices of each shard's tasks) for a
        tasks or plan run of more than ``MAX_RUN_TASKS`` tasks, else ``None``.

        Raises ``DagValidationError`` (duplicate id, unknown assignee or
        dependency, cycle), ``AssigneeRequirementsMismatchError`` or
        ``NoEligibleAgentError`` (``requires``), ``InvalidRunInputError`` (a
        dispatch approval naming no task or agent; or a run whose state could
        not be carried: ``check_size``, which gets ``every_copy`` and ``stored``;
        more than ``MAX_RUN_TASKS`` in a goal run, or more than
        ``MAX_SHARDED_RUN_TASKS``: ``check_task_count``; a sharded run asking
        for what needs every task in one run, or a connected graph of more
        than ``MAX_RUN_TASKS``: ``shard_plan``).
        """
        check_task_count(len(tasks), shardable=self.goal is None)
        validate_task_graph(tasks, (a.name for a in self.team.agents))
        check_assignments(tasks, self.team)
        check_dispatch_names(self.options.approvals, tasks, self.team)
        if len(tasks) <= limits.MAX_RUN_TASKS:
            self.check_size(tasks, every_copy=every_copy, stored=stored)
            return None
        self._check_shardable(tasks)
        shards = shard_plan(tasks)
        largest = [tasks[i] for i in max(shards, key=len)]  # the most a shard carries
        floors = [TASK_STATE_FLOOR_BYTES + len(t.id.encode()) for t in largest]
        shard = self.shard_payload(largest)
        check_run_size(shard, 0, floors, "a shard's TeamRun input", stored=stored)
        return shards

    def shard_payload(self, tasks: Sequence[TaskSpec]) -> dict[str, Any]:
        """The input of a shard of this run holding ``tasks``, as JSON: this
        run's team and options (``options.approvals.dispatch`` narrowed to the
        names the shard knows: a run refuses a name it does not), and ``tasks``."""
        data = self.shard_base(lambda: (t.id for t in tasks))
        data["tasks"] = [t.model_dump(mode="json", exclude_defaults=True) for t in tasks]
        return data

    def shard_base(self, task_ids: Callable[[], Iterable[str]]) -> dict[str, Any]:
        """The input of a shard of this run without its tasks, as JSON: this
        run's team and options, ``options.approvals.dispatch`` narrowed to
        the names the shard knows (its tasks', ``task_ids()``, asked only
        then, and the agents')."""
        data = self.model_dump(mode="json", exclude_unset=True, include={"team", "options"})
        dispatch = self.options.approvals.dispatch if self.options.approvals else None
        if isinstance(dispatch, list):
            known = {*task_ids(), *(a.name for a in self.team.agents)}
            data["options"]["approvals"]["dispatch"] = [n for n in dispatch if n in known]
        return data

    def _check_shardable(self, tasks: Sequence[TaskSpec]) -> None:
        """Raise ``InvalidRunInputError`` when a run of ``tasks`` (more than
        ``MAX_RUN_TASKS``, so sharded) asks for what needs them all in one
        ``TeamRun``: a round barrier, reuse, recorded model turns, a task
        that reads the whole shared memory."""
        needs_one_run = {
            "options.approvals.round": self.options.approvals and self.options.approvals.round,
            "options.reuse": self.options.reuse,
            "options.models": self.options.recorded(),
        }
        wide = next((t.id for t in tasks if t.memory_scope == "all"), None)
        if wide is not None:
            needs_one_run[f"task {wide!r} memory_scope 'all'"] = True
        asked = [name for name, value in needs_one_run.items() if value]
        if asked:
            raise InvalidRunInputError(
                f"tasks: the run has {len(tasks)} tasks, so it runs in shards of at most "
                f"{limits.SHARD_TASKS} (one TeamRun holds at most {limits.MAX_RUN_TASKS}); "
                f"{', '.join(asked)} needs every task in one run: leave it out, or split the "
                f"work into runs of at most {limits.MAX_RUN_TASKS} tasks"
            )

    def check_size(
        self, tasks: Sequence[TaskSpec], *, every_copy: bool = True, stored: bool = False
    ) -> None:
        """Raise ``InvalidRunInputError`` when this run, with ``tasks``, could
        not carry its state when it continues as new, or return its result
        (``check_run_size``): its input as sent (``payload``), at least
        ``TASK_STATE_FLOOR_BYTES`` (with its id and assignee) per task, and
        for a goal run the other copies of its goal (``GOAL_COPIES``:
        ``check_goal_size`` names the field) and of its plan's tasks (the
        result's ``plan`` and ``tasks``). A goal run checks before it plans
        (no ``tasks``: ``PLAN_ROOM_BYTES`` kept for the plan) and once its
        plan is made.

        ``every_copy=False`` counts as runs recorded before
        ``oma.workflows._patches.GOAL_COPIES_COUNTED`` did, for their replay:
        the goal once, the plan once. ``stored``: the run's payloads past the
        threshold go to a payload store (``limits.state_budget``)."""
        floors = [
            TASK_STATE_FLOOR_BYTES + len(t.id.encode()) + len((t.assignee or "").encode())
            for t in tasks
        ]
        payload = self.payload()
        extra = 0
        if self.goal is not None:
            plan = sum(json_size(t.model_dump(mode="json", exclude_defaults=True)) for t in tasks)
            extra = plan
            if every_copy:
                goal = json_size(self.goal)
                copies = 2 * plan if tasks else PLAN_ROOM_BYTES
                check_goal_size(
                    goal,
                    json_size(payload),
                    copies,
                    sum(floors),
                    planned=bool(tasks),
                    stored=stored,
                )
                extra = (GOAL_COPIES - 1) * goal + copies
        check_run_size(payload, extra, floors, "the TeamRun input", stored=stored)

    def payload(self) -> dict[str, Any]:
        """This input as a client sends it and a run carries it when it
        continues as new: the fields as given (defaults not repeated), no
        ``resume``."""
        return self.model_dump(mode="json", exclude_unset=True, exclude={"resume"})

    def given_tasks(self) -> list[TaskSpec]:
        """The tasks of a ``tasks`` or ``plan`` run (empty for a goal run):
        ``tasks``, then those made from ``task_template`` and ``items``."""
        if self._made:
            return [*(self.tasks or []), *self._made]
        if self.tasks is not None:
            return self.tasks
        return self.plan.tasks if self.plan is not None else []


ParentPatch = Literal["oma-one-marker-2"]
"""A ``workflow.patched`` id a ``TeamRun`` passes on to its tasks' runs
(``AgentRunInput.patched``; ``oma.workflows._patches.ONE_MARKER_2``)."""


class AgentRunInput(BaseModel):
    """Input of the ``AgentRun`` workflow: one agent and what it is asked.

    ``input`` is a string (one user text message) or a complete message list.
    """

    model_config = ConfigDict(extra="forbid")

    agent: AgentConfig
    input: str | list[LLMMessage]
    task_id: str | None = Field(
        default=None, description="The team task this run executes, if any."
    )
    attempt: int = Field(
        default=1,
        ge=1,
        description="Set by TeamRun: which attempt of its task this run is (1: the first); "
        "a later attempt's tool requests are tool-<task id>/<attempt>-<n>.",
    )
    run_key: str | None = Field(
        default=None,
        description="Set by TeamRun: the run that owns this agent's ACP session "
        "(default: this AgentRun's own workflow id and run id).",
    )
    acp_session: AcpSessionInfo | None = Field(
        default=None,
        description="Set by TeamRun: the ACP session an earlier task of this agent used.",
    )
    approvals: ApprovalOptions | None = Field(
        default=None,
        description="Tool calls to approve before they run (tools, timeout_s, on_timeout); "
        "TeamRun passes its options.approvals.",
    )
    token_budget: int | None = Field(
        default=None,
        ge=0,
        description="Set by TeamRun: the tokens the team run may still use "
        "(options.max_token_budget); an LLM agent stops once its turns used them "
        "(BUDGET_EXCEEDED).",
    )
    cost_budget_usd: float | None = Field(
        default=None,
        ge=0,
        description="Set by TeamRun: the US dollars the team run may still spend "
        "(options.max_cost_usd); an LLM agent stops once its turns spent them "
        "(COST_BUDGET_EXCEEDED).",
    )
    pricing: dict[str, ModelPrice] | None = Field(
        default=None, description="Set by TeamRun: its options.pricing."
    )
    models: RecordedModels | None = Field(
        default=None,
        description="Set by TeamRun: the run whose recorded turns its model turns replay "
        "(options.models, its 'from' named).",
    )
    patched: list[ParentPatch] | None = Field(
        default=None,
        description="Set by TeamRun: the workflow.patched ids this run takes as on without "
        "recording a marker of its own (each marker comes with a TemporalChangeVersion "
        "upsert: two events and a visibility write in every task's run); a run started "
        "without it records the marker.",
    )

    def wire(self) -> dict[str, Any]:
        """This input as ``TeamRun`` starts an ``AgentRun`` child with: its
        JSON without the null fields of it and of its agent (every optional
        field of the two defaults to null, so the child reads the same
        input). A wide run's history and the server's event caches hold the
        input once a task: a scripted task's is 281 bytes, not 663."""
        data = _without_nulls(self.model_dump(mode="json"))
        data["agent"] = _without_nulls(data["agent"])
        return data


def _without_nulls(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}


def parse_team_run_input(raw: Any) -> TeamRunInput:
    """Validate a decoded JSON value as a ``TeamRunInput``.

    Raises ``InvalidRunInputError`` whose message names every bad field path;
    first, before any field is validated, a run of more than
    ``MAX_SHARDED_RUN_TASKS`` tasks (``check_task_count``): ``TeamRun``
    validates its input in its first activation, under the SDK's 2 s
    deadlock timer, and validating such a run's tasks alone can pass it.
    """
    if isinstance(raw, dict):
        check_task_count(listed_tasks(raw), shardable=True)
    return parse_run_json(TeamRunInput, raw, "TeamRun input")


def listed_tasks(raw: dict[str, Any]) -> int:
    """How many tasks the decoded input ``raw`` lists, as ``given_tasks``
    counts them: its ``tasks``, one per entry of ``items`` with a
    ``task_template``, and its ``plan``'s. Only lists count; a field of
    another type is left for validation to name."""

    def length(value: Any) -> int:
        return len(value) if isinstance(value, list) else 0

    plan = raw.get("plan")
    made = length(raw.get("items")) if raw.get("task_template") is not None else 0
    return (
        length(raw.get("tasks"))
        + made
        + length(plan.get("tasks") if isinstance(plan, dict) else None)
    )


def checked_team_run_input(raw: Any, *, stored: bool = False) -> TeamRunInput:
    """``raw`` checked as ``TeamRun`` will check it (the input's shape, then
    the task graph and the assignments of a tasks or plan run, a goal run's
    size with its goal's copies: ``TeamRunInput.check_size``) and as a
    payload a worker can decode (``check_sendable``): what the client and the
    CLI do before they start anything. ``stored``: the client's payloads past
    the threshold go to a payload store (``limits.state_budget``).

    Raises ``InvalidRunInputError``, ``DagValidationError``,
    ``AssigneeRequirementsMismatchError`` or ``NoEligibleAgentError``.
    """
    run_input = parse_team_run_input(raw)
    check_sendable(run_input, "the TeamRun input", exclude_unset=True, stored=stored)
    if run_input.goal is None:
        run_input.check_tasks(run_input.given_tasks(), stored=stored)
    else:
        run_input.check_size([], stored=stored)  # the goal's copies; the plan: once made
    return run_input


def parse_agent_run_input(raw: Any) -> AgentRunInput:
    """Validate a decoded JSON value as an ``AgentRunInput``.

    A message list in ``input`` goes through the one message shape guard
    first (``oma.core.schema.message_guard``). Raises ``InvalidMessageError`` naming the
    bad field's path (``input[2].content[1].source.media_type``), or
    ``InvalidRunInputError`` naming every bad field of the rest.
    """
    if isinstance(raw, dict) and isinstance(raw.get("input"), list):
        raw = {**raw, "input": validate_messages(raw["input"], "input")}
    return parse_run_json(AgentRunInput, raw, "AgentRun input")
