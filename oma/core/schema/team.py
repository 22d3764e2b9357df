"""A team: named agents that share a run's memory."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from oma.core.schema.agent_config import AgentConfig
from oma.core.schema.limits import MAX_NAME_CHARS


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
