"""Plans: the coordinator that turns a goal into tasks, and frozen plans.

With a ``goal``, the coordinator (an LLM agent) gets the team's roster and the
goal and answers with a JSON array of tasks; ``parse_plan`` reads it tolerantly
and ``plan_tasks`` validates it into ``TaskSpec``s (ids ``t1``, ``t2``, ...;
``depends_on`` as ids). After the tasks ran, the coordinator synthesizes the
final answer from their outputs. A ``PlanArtifact`` is a plan frozen to JSON
(``oma plan``) that runs later without a coordinator.

Pure logic: no I/O, safe inside workflows.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from oma.core.schema.agent_config import AgentConfig, check_endpoint
from oma.core.schema.dag import find_cycle
from oma.core.schema.errors import ScriptExhaustedError
from oma.core.schema.limits import MIN_RESULT_CHARS, SYNTHESIS_RESULTS_CHARS, cut_text
from oma.core.schema.providers import Provider
from oma.core.schema.task import TaskRequirements, TaskSpec, TaskState
from oma.core.schema.team import TeamConfig

PLAN_VERSION = 1
"""The ``version`` of the ``PlanArtifact`` format this code reads and writes."""

COORDINATOR = "coordinator"
"""The coordinator's name in ``agent_results`` and in its workflow ids."""

COORDINATOR_SYSTEM_PROMPT = (
    "You are the coordinator of a team of agents. You decompose a goal into tasks that "
    "the team's agents can do, and you synthesize their results into the final answer. "
    "Answer in exactly the format each prompt asks for."
)
"""The coordinator's system prompt unless ``coordinator.system_prompt`` replaces it."""


class CoordinatorConfig(BaseModel):
    """``coordinator`` of a goal run: the model that plans and synthesizes.

    Unset ``provider``/``model`` default to the team's default model: that of
    its first LLM agent, else Anthropic's ``DEFAULT_MODEL``; an ``openai``
    coordinator takes ``base_url``/``api_key_env`` like an agent (or borrows
    them with that agent's model). With the
    ``scripted`` provider, ``script`` holds the answers of every coordinator
    turn in order: the plan, a correction if one is asked for, the synthesis.
    """

    model_config = ConfigDict(extra="forbid")

    provider: Provider | None = None
    model: str | None = None
    system_prompt: str | None = Field(
        default=None, description="Replaces the built-in coordinator system prompt."
    )
    instructions: str | None = Field(
        default=None, description="Added to the planning prompt, e.g. 'at most 5 tasks'."
    )
    max_turns: int = Field(default=4, ge=1, description="Model turns per coordinator step.")
    max_tokens: int | None = Field(default=None, ge=1)
    script: list[str] | None = None
    base_url: str | None = Field(
        default=None, description="openai provider only: see AgentConfig.base_url."
    )
    api_key_env: str | None = Field(
        default=None, description="openai provider only: see AgentConfig.api_key_env."
    )

    @model_validator(mode="after")
    def _check_endpoint(self) -> CoordinatorConfig:
        check_endpoint(self.base_url, self.api_key_env, "coordinator")
        return self


class PlanArtifact(BaseModel):
    """A frozen plan: ``{version: 1, goal, tasks: [...]}``, run with ``plan``.

    Made from a plan-only run (``oma plan FILE > plan.json``); its tasks run as
    written (no coordinator, no synthesis), after the same validation as
    ``tasks``. Raises ``pydantic.ValidationError`` for an unsupported ``version``.
    """

    model_config = ConfigDict(extra="forbid")

    version: int = Field(description=f"Format version; this OMA reads {PLAN_VERSION}.")
    goal: str = ""
    tasks: list[TaskSpec] = Field(min_length=1)

    @field_validator("version")
    @classmethod
    def _supported(cls, version: int) -> int:
        if version != PLAN_VERSION:
            raise ValueError(
                f"unsupported plan version {version}: this OMA reads version {PLAN_VERSION} "
                "(make the plan again with `oma plan`)"
            )
        return version


def coordinator_agent(
    config: CoordinatorConfig, team: TeamConfig, turns_used: int = 0
) -> AgentConfig:
    """The coordinator as an ``AgentConfig`` named ``coordinator``.

    ``provider``/``model`` are the config's when set, else the team's default
    model: that of its first LLM agent (``backend`` unset), else ``None``, which
    ``AgentConfig`` resolves to ``anthropic`` and ``DEFAULT_MODEL``. An agent's
    model is only borrowed with its provider (and, for ``openai``, with its
    ``base_url``/``api_key_env`` where the config gives none): a
    ``coordinator.provider`` other than the agent's keeps its own ``model``
    (or that provider's default).

    ``turns_used``: coordinator turns already taken in this run; a scripted
    coordinator then starts at that entry of its own ``script`` (never an
    agent's). Raises ``ScriptExhaustedError`` when a scripted coordinator's
    ``script`` has no entry left for the next turn.
    """
    default = next((a for a in team.agents if a.backend is None), None)
    provider, model = config.provider, config.model
    base_url, api_key_env = config.base_url, config.api_key_env
    if default is not None and provider in (None, default.resolved_provider):
        # An agent's model only makes sense with that agent's provider (and endpoint).
        provider = provider or default.provider
        model = model or default.model
        base_url = base_url or default.base_url
        api_key_env = api_key_env or default.api_key_env
    script = None
    if (provider or "anthropic") == "scripted":
        script = (config.script or [])[turns_used:]
        if not script:
            total = len(config.script or [])
            raise ScriptExhaustedError(
                f"the scripted coordinator's script has {total} response(s) but turn "
                f"{turns_used + 1} was asked for; add responses to coordinator.script"
            )
    return AgentConfig(
        name=COORDINATOR,
        description="Plans the team's work and synthesizes the final answer.",
        system_prompt=config.system_prompt or COORDINATOR_SYSTEM_PROMPT,
        provider=provider,
        model=model,
        script=script,
        max_turns=config.max_turns,
        max_tokens=config.max_tokens,
        base_url=base_url,
        api_key_env=api_key_env,
    )


def check_coordinator(config: CoordinatorConfig, team: TeamConfig) -> None:
    """Raise ``ValueError`` when a goal run's coordinator would not be a valid
    agent: e.g. an ``openai`` coordinator with no ``model`` of its own and none
    to borrow, or ``base_url`` for a provider that takes none. Checked with
    the run input, so that the workflow never meets it."""
    try:
        coordinator_agent(config, team)
    except ScriptExhaustedError:
        pass  # a scripted coordinator's script is read turn by turn
    except ValidationError as err:
        raise ValueError(
            "; ".join(e["msg"].removeprefix("Value error, ") for e in err.errors())
        ) from None


def planning_prompt(team: TeamConfig, goal: str, instructions: str | None) -> str:
    """The coordinator's planning prompt: the roster (each agent's name,
    description, system prompt, kind and capabilities), the goal, and the
    answer format (a JSON array of ``{title, description, assignee,
    depends_on}``, ``depends_on`` naming titles).

    Each agent is one line, ``- name (kind, capabilities: a, b): description``,
    with its system prompt on an indented line below, on one line and cut to
    ``_MAX_SYSTEM_PROMPT_CHARS`` characters.
    """
    roster = "\n".join(_roster_entry(agent) for agent in team.agents)
    names = ", ".join(agent.name for agent in team.agents)
    sections = [
        f'You are planning the work of the team "{team.name}" toward a goal.',
        f"## Team\n{roster}",
        f"## Goal\n{goal.strip()}",
    ]
    if instructions and instructions.strip():
        sections.append(f"## Instructions\n{instructions.strip()}")
    sections.append(
        "## Answer format\n"
        "Answer with a JSON array only, with no prose around it. Each item is one task:\n"
        '{"title": "...", "description": "...", "assignee": "...", "depends_on": ["..."]}\n'
        "- title: a short name for the task, unique within the array.\n"
        "- description: what to do; the assignee sees this and the outputs of the tasks "
        "it depends on.\n"
        f"- assignee: the name of the agent that does the task, one of: {names}.\n"
        "- depends_on: the titles of other tasks in the array that must finish before "
        "this one starts ([] when none)."
    )
    return "\n\n".join(sections)


def parse_plan(text: str) -> list[Any]:
    """The JSON array in the coordinator's answer.

    Tolerant: code fences and prose around the array are ignored. A fenced
    block holding an array of objects wins; otherwise the first array of
    objects in ``text``, else its first array of any kind. An object
    ``{"tasks": [...]}`` counts as its ``tasks`` array.

    Raises ``ValueError`` with a message for the coordinator when there is no
    JSON array in ``text``, or when the only arrays found come after a ``[``
    that is not valid JSON (so a malformed plan is reported as such rather
    than read as one of its own ``depends_on`` lists).
    """
    for block in _FENCE.findall(text):
        found = _scan(block)
        if found.tasks is not None:
            return found.tasks
    found = _scan(text)
    if found.tasks is not None:
        return found.tasks
    if found.error is not None:
        err = found.error
        raise ValueError(
            f"the answer holds no valid JSON array of tasks ({err.msg} at line {err.lineno} "
            f"column {err.colno}); {_ANSWER_HINT}"
        )
    if found.other is not None:
        return found.other
    raise ValueError(f"the answer holds no JSON array of tasks; {_ANSWER_HINT}")


def plan_tasks(
    items: list[Any], team: TeamConfig, *, strict_assignees: bool = True
) -> tuple[list[TaskSpec], list[str]]:
    """Validate the coordinator's array into tasks; returns ``(tasks, errors)``.

    Tasks get ids ``t1``, ``t2``, ... in array order; ``depends_on`` (or
    ``dependsOn``) titles become ids, matched exactly, else ignoring case and
    whitespace; a dependency listed twice counts once. Errors, every one found,
    naming tasks by their 1-based position: an item that is not an object or
    has no title; a ``description`` that is not a string; an assignee outside
    the roster (with ``strict_assignees``, else the task is left unassigned); a
    ``depends_on`` that is not a list of titles; a dependency on a title no
    task has, or that two tasks share; a task depending on itself; a
    ``requires`` that is not a valid ``TaskRequirements``; then, once all of
    that holds, a cycle (named by titles). ``tasks`` is empty whenever
    ``errors`` is not. Keys other than these are ignored.
    """
    if not items:
        return [], ["the plan has no tasks"]
    errors: list[str] = []
    drafts: list[_Draft | None] = []
    for n, item in enumerate(items, start=1):
        drafts.append(_draft(n, item, team, strict_assignees, errors))
    titles = {f"t{n}": d.title for n, d in enumerate(drafts, start=1) if d is not None}
    specs: list[TaskSpec] = []
    for n, draft in enumerate(drafts, start=1):
        if draft is None:
            continue
        depends_on = _resolve_dependencies(n, draft, titles, errors)
        specs.append(
            TaskSpec(
                id=f"t{n}",
                title=draft.title,
                description=draft.description,
                assignee=draft.assignee,
                depends_on=depends_on,
                requires=draft.requires,
            )
        )
    if errors:
        return [], errors
    cycle = find_cycle({t.id: t.depends_on for t in specs})
    if cycle:
        path = " -> ".join(f'"{titles[task_id]}"' for task_id in cycle)
        return [], [f"dependency cycle: {path}"]
    return specs, []


def read_plan(
    answer: str, team: TeamConfig, *, strict_assignees: bool = True
) -> tuple[list[TaskSpec], list[str]]:
    """The tasks of a coordinator's ``answer`` and every problem found in it
    (``parse_plan`` then ``plan_tasks``); no tasks when it holds no array."""
    try:
        items = parse_plan(answer)
    except ValueError as err:
        return [], [str(err)]
    return plan_tasks(items, team, strict_assignees=strict_assignees)


def correction_prompt(errors: list[str]) -> str:
    """The coordinator's one correction turn: the errors, and the request to
    answer again with the whole corrected JSON array only."""
    listed = "\n".join(f"- {error}" for error in errors)
    return (
        f"Your plan cannot be run as it is:\n{listed}\n\n"
        "Answer again with the whole corrected JSON array of tasks only, in the same "
        "format, with no prose around it."
    )


def synthesis_prompt(goal: str, tasks: list[TaskState]) -> str:
    """The coordinator's synthesis prompt: the goal and each task's title,
    status and output (or error).

    Each task is a section ``### <title> (<status>)`` holding its output, else
    ``error: <error>``, else ``(no output)``, cut (the cut said) to its share
    of ``SYNTHESIS_RESULTS_CHARS``, at least ``MIN_RESULT_CHARS``: the prompt
    is the input of the synthesis ``AgentRun``, which Temporal caps at 2 MB.
    """
    share = max(SYNTHESIS_RESULTS_CHARS // max(len(tasks), 1), MIN_RESULT_CHARS)
    results = "\n\n".join(
        f"### {task.title} ({task.status.value})\n{cut_text(_task_result(task), share)}"
        for task in tasks
    )
    return (
        f"## Goal\n{goal.strip()}\n\n"
        f"## Task results\n{results or '(no tasks ran)'}\n\n"
        "Write the final answer to the goal from these results. If a failed or skipped "
        "task matters to the answer, say so."
    )


_MAX_SYSTEM_PROMPT_CHARS = 300
"""How much of an agent's system prompt the planning prompt shows."""

_FENCE = re.compile(r"```[\w+-]*[ \t]*\n?(.*?)```", re.DOTALL)
"""A Markdown code fence with any info string (``json``, none, ...); group 1 is its body."""

_ANSWER_HINT = (
    "answer with the JSON array only, e.g. "
    '[{"title": "...", "description": "...", "assignee": "...", "depends_on": []}]'
)


def _roster_entry(agent: AgentConfig) -> str:
    """One agent of the planning prompt's ``## Team`` section."""
    details: str = agent.kind
    if agent.capabilities:
        details += f", capabilities: {', '.join(agent.capabilities)}"
    entry = f"- {agent.name} ({details})"
    description = " ".join(agent.description.split())
    if description:
        entry += f": {description}"
    system_prompt = " ".join(agent.system_prompt.split())
    if system_prompt:
        if len(system_prompt) > _MAX_SYSTEM_PROMPT_CHARS:
            system_prompt = system_prompt[: _MAX_SYSTEM_PROMPT_CHARS - 1].rstrip() + "…"
        entry += f"\n  system prompt: {system_prompt}"
    return entry


class _Found(NamedTuple):
    """What ``_scan`` found in a text: the first non-empty array of objects
    (``tasks``), else the first other array (``other``) or the first ``[``
    that did not decode (``error``), whichever came first."""

    tasks: list[Any] | None = None
    other: list[Any] | None = None
    error: json.JSONDecodeError | None = None


def _scan(text: str) -> _Found:
    """Decode JSON at each ``[`` and ``{`` of ``text``, in order, skipping over
    each array decoded (its inner arrays are part of it)."""
    first = _Found()
    decoder = json.JSONDecoder()
    start = _next_opening(text, 0)
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as err:
            if text[start] == "[" and first == _Found():
                first = _Found(error=err)
            start = _next_opening(text, start + 1)
            continue
        if isinstance(value, dict) and isinstance(value.get("tasks"), list):
            value = value["tasks"]
        if isinstance(value, list):
            if value and all(isinstance(item, dict) for item in value):
                return _Found(tasks=value)
            if first == _Found():
                first = _Found(other=value)
            start = _next_opening(text, end)
        else:
            # An object without "tasks" may still hold the array further in.
            start = _next_opening(text, start + 1)
    return first


def _next_opening(text: str, start: int) -> int:
    """The index of the next ``[`` or ``{`` at or after ``start``, or -1."""
    brackets = [i for i in (text.find("[", start), text.find("{", start)) if i != -1]
    return min(brackets, default=-1)


class _Draft(NamedTuple):
    """One item of the coordinator's array, checked but with its dependencies
    still as titles."""

    title: str
    description: str
    assignee: str | None
    depends_on: list[str]
    requires: TaskRequirements | None


def _draft(
    n: int, item: Any, team: TeamConfig, strict_assignees: bool, errors: list[str]
) -> _Draft | None:
    """Item ``n`` (1-based) as a ``_Draft``, appending its problems to
    ``errors``; ``None`` when it has no usable title."""
    if not isinstance(item, dict):
        errors.append(f"task {n}: not an object")
        return None
    title = item.get("title")
    if not isinstance(title, str) or not title.strip():
        errors.append(f"task {n}: no title")
        return None
    title = title.strip()
    label = f'task {n} ("{title}")'

    description = item.get("description")
    if description is None:
        description = ""
    elif not isinstance(description, str):
        errors.append(f"{label}: description must be a string")
        description = ""

    assignee = _assignee(label, item.get("assignee"), team, strict_assignees, errors)

    raw_depends_on = item["depends_on"] if "depends_on" in item else item.get("dependsOn")
    depends_on: list[str] = []
    if raw_depends_on is None:
        pass
    elif not isinstance(raw_depends_on, list) or not all(
        isinstance(d, str) for d in raw_depends_on
    ):
        errors.append(f"{label}: depends_on must be a list of task titles")
    else:
        depends_on = raw_depends_on

    requires = None
    if item.get("requires") is not None:
        try:
            requires = TaskRequirements.model_validate(item["requires"])
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'requires'}: {e['msg']}"
                for e in err.errors()
            )
            errors.append(f"{label}: requires is not valid ({problems})")

    return _Draft(title, description, assignee, depends_on, requires)


def _assignee(
    label: str, assignee: Any, team: TeamConfig, strict_assignees: bool, errors: list[str]
) -> str | None:
    """The roster name ``assignee`` stands for (exactly, else ignoring case
    and surrounding whitespace), or ``None`` for an unassigned task."""
    if assignee is None:
        return None
    if not isinstance(assignee, str):
        errors.append(f"{label}: assignee must be an agent's name or null")
        return None
    if not assignee.strip():
        return None
    names = [agent.name for agent in team.agents]
    if assignee in names:
        return assignee
    loose = [name for name in names if _loose(name) == _loose(assignee)]
    if len(loose) == 1:
        return loose[0]
    if strict_assignees:
        errors.append(
            f'{label}: assignee "{assignee}" is not in the team (agents: {", ".join(names)})'
        )
    return None


def _resolve_dependencies(
    n: int, draft: _Draft, titles: dict[str, str], errors: list[str]
) -> list[str]:
    """The ids of task ``n``'s dependencies, in order and without repeats,
    appending unknown, ambiguous and self dependencies to ``errors``."""
    label = f'task {n} ("{draft.title}")'
    own_id = f"t{n}"
    ids: list[str] = []
    for wanted in draft.depends_on:
        matches = [task_id for task_id, title in titles.items() if title == wanted]
        if not matches:
            matches = [
                task_id for task_id, title in titles.items() if _loose(title) == _loose(wanted)
            ]
        if not matches:
            errors.append(f'{label}: depends on "{wanted}", which no task has as its title')
        elif len(matches) > 1:
            errors.append(
                f'{label}: depends on "{wanted}", the title of more than one task '
                f"({', '.join(matches)}); make titles unique"
            )
        elif matches[0] == own_id:
            errors.append(f"{label}: depends on itself")
        elif matches[0] not in ids:
            ids.append(matches[0])
    return ids


def _task_result(task: TaskState) -> str:
    """What a task left for the synthesis: its output (or where the run keeps
    it, by reference), else its error."""
    if task.output:
        return task.output
    if task.output_ref:
        return (
            f"(an output of {task.output_bytes} bytes, kept by reference: the result of "
            f"{task.output_ref})"
        )
    if task.error:
        return f"error: {task.error}"
    return "(no output)"


def _loose(text: str) -> str:
    """``text`` for a tolerant match: case folded, whitespace runs as one space."""
    return " ".join(text.split()).casefold()


def plan_artifact(goal: str, tasks: list[TaskSpec]) -> PlanArtifact:
    """The ``PlanArtifact`` of a plan."""
    return PlanArtifact(version=PLAN_VERSION, goal=goal, tasks=tasks)
