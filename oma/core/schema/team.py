"""A team: named agents that share a run's memory, and which of them may run
a task (``satisfies`` its ``requires``)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.errors import AssigneeRequirementsMismatchError, NoEligibleAgentError
from oma.core.schema.limits import MAX_NAME_CHARS
from oma.core.schema.task import TaskRequirements, TaskSpec


class TeamConfig(BaseModel):
    """``team`` in a run input: a name and at least one agent, names unique."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="It becomes the search attribute OmaTeam of the team's runs.",
    )
    agents: list[AgentConfig] = Field(min_length=1)

    @field_validator("agents")
    @classmethod
    def _unique_names(cls, agents: list[AgentConfig]) -> list[AgentConfig]:
        seen: set[str] = set()
        for agent in agents:
            if agent.name in seen:
                raise ValueError(f"duplicate agent name {agent.name!r}")
            seen.add(agent.name)
        return agents

    def agent(self, name: str) -> AgentConfig | None:
        """The agent called ``name``, or ``None``."""
        return next((a for a in self.agents if a.name == name), None)


def satisfies(agent: AgentConfig, requires: TaskRequirements | None) -> bool:
    """Whether ``agent`` has everything ``requires`` asks for (capabilities
    compared without regard to case)."""
    if requires is None:
        return True
    if requires.backend is not None and agent.kind != requires.backend:
        return False
    if requires.provider is not None and (
        agent.backend is not None or agent.resolved_provider != requires.provider
    ):
        return False
    return {c.lower() for c in requires.capabilities} <= {c.lower() for c in agent.capabilities}


def check_assignments(tasks: Sequence[TaskSpec], team: TeamConfig) -> None:
    """Raise before any task runs when a task cannot get a suitable agent.

    ``AssigneeRequirementsMismatchError``: a named assignee does not satisfy
    the task's ``requires``. ``NoEligibleAgentError``: no agent of the team
    satisfies the ``requires`` of a task without an assignee. Each message
    lists every such task.
    """
    mismatched, orphaned = [], []
    for t in tasks:
        if t.requires is None and (t.assignee is not None or team.agents):
            continue  # any agent satisfies no requirements
        if t.assignee is not None:
            agent = team.agent(t.assignee)
            if agent is not None and not satisfies(agent, t.requires):
                mismatched.append(f"task {t.id!r}: {t.assignee!r} does not satisfy {_req(t)}")
        elif not any(satisfies(a, t.requires) for a in team.agents):
            orphaned.append(f"task {t.id!r} requires {_req(t)}")
    if mismatched:
        raise AssigneeRequirementsMismatchError("; ".join(mismatched))
    if orphaned:
        raise NoEligibleAgentError(
            f"no agent of team {team.name!r} is eligible: {'; '.join(orphaned)}"
        )


def _req(task: TaskSpec) -> str:
    assert task.requires is not None
    return task.requires.model_dump_json(exclude_defaults=True)
