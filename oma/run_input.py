"""The input of a ``TeamRun`` workflow: the JSON a user writes.

Parse user JSON with ``parse_team_run_input`` so every error names its field.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oma.agent_config import AgentConfig
from oma.errors import InvalidRunInputError
from oma.message_guard import validate_messages
from oma.messages import LLMMessage
from oma.results import AcpSessionInfo
from oma.task import TaskSpec
from oma.team import TeamConfig

M = TypeVar("M", bound=BaseModel)


class RunOptions(BaseModel):
    """``options`` of a run input."""

    model_config = ConfigDict(extra="forbid")

    max_concurrency: int = Field(default=5, ge=1, description="Most tasks in flight at once.")


class TeamRunInput(BaseModel):
    """Input of the ``TeamRun`` workflow: a team and the tasks it runs."""

    model_config = ConfigDict(extra="forbid")

    team: TeamConfig
    tasks: list[TaskSpec] = Field(min_length=1)
    options: RunOptions = Field(default_factory=RunOptions)


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
    run_key: str | None = Field(
        default=None,
        description="Set by TeamRun: the run that owns this agent's ACP session "
        "(default: this AgentRun's own workflow id and run id).",
    )
    acp_session: AcpSessionInfo | None = Field(
        default=None,
        description="Set by TeamRun: the ACP session an earlier task of this agent used.",
    )


def format_validation_error(err: ValidationError, root: str = "") -> str:
    """One line per problem, each naming the field path, e.g.
    ``team.agents[1].backend.command: Field required``."""
    lines = []
    for e in err.errors():
        path = root
        for part in e["loc"]:
            if isinstance(part, int):
                path += f"[{part}]"
            elif part in ("process", "acp", "function-after[_check_kind()]"):
                # discriminated-union and validator tags pydantic puts in the path
                continue
            else:
                path += f".{part}" if path else str(part)
        message = e["msg"].removeprefix("Value error, ")
        lines.append(f"{path or '(input)'}: {message}")
    return "; ".join(lines)


def _parse(model: type[M], raw: Any, what: str) -> M:
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise InvalidRunInputError(f"invalid {what}: {format_validation_error(err)}") from None


def parse_team_run_input(raw: Any) -> TeamRunInput:
    """Validate a decoded JSON value as a ``TeamRunInput``.

    Raises ``InvalidRunInputError`` whose message names every bad field path.
    """
    return _parse(TeamRunInput, raw, "TeamRun input")


def parse_agent_run_input(raw: Any) -> AgentRunInput:
    """Validate a decoded JSON value as an ``AgentRunInput``.

    A message list in ``input`` goes through the one message shape guard
    first (``oma.message_guard``). Raises ``InvalidMessageError`` naming the
    bad field's path (``input[2].content[1].source.media_type``), or
    ``InvalidRunInputError`` naming every bad field of the rest.
    """
    if isinstance(raw, dict) and isinstance(raw.get("input"), list):
        raw = {**raw, "input": validate_messages(raw["input"], "input")}
    return _parse(AgentRunInput, raw, "AgentRun input")
