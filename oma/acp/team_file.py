"""A session's team: the run input without its goal, and what the editor adds.

The team comes from ``oma acp --team FILE``, else ``oma.json``, else
``.oma/team.json`` in the session's working directory. It is a run input
(docs/orchestration.md) with ``team`` and, optionally, ``coordinator`` and
``options`` (approvals included), but no ``goal``, ``tasks`` or ``plan``:
each prompt is the goal. It is checked exactly as ``oma run`` checks a run
input, with a goal in place, so a mistake reads the same
(``INVALID_RUN_INPUT`` naming the field).

The editor adds two things (``with_editor``): the session's directory is
every agent's working directory unless the file gives one (a relative one is
taken from the session's directory), and the editor's MCP servers
(``session/new``'s ``mcpServers``) join every LLM agent's ``mcp_servers``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oma.core.schema.errors import (
    AcpSessionCwdError,
    InvalidRunInputError,
    OMAError,
    TeamFileNotFoundError,
)
from oma.core.schema.mcp import MAX_SERVER_NAME_CHARS, McpServerConfig
from oma.core.schema.run_input import checked_team_run_input

TEAM_FILES = (Path("oma.json"), Path(".oma") / "team.json")
"""Where a session's team is looked for in its directory, in this order."""

CHECK_GOAL = "(the prompt)"
"""The goal a team file is checked with: a prompt takes its place."""


@dataclass
class SessionTeam:
    """A session's run input without its goal (JSON, as the file has it, with
    the editor's additions), and what was left out of the editor's offer."""

    source: Path
    raw: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    """What the editor offered that the team does not take, for the user."""

    def run_input(self, goal: str) -> dict[str, Any]:
        """The run input of a prompt: this team and ``goal``."""
        return {**self.raw, "goal": goal}


def session_dir(cwd: str) -> Path:
    """The session's directory, ``cwd`` as the client gave it (ACP: an
    absolute path). Raises ``AcpSessionCwdError`` when it is not an absolute
    path of an existing directory."""
    path = Path(cwd)
    if not cwd or not path.is_absolute():
        raise AcpSessionCwdError(
            f"the session's cwd {cwd!r} is not an absolute path: the team works in the "
            "session's directory, so give the project's absolute path"
        )
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise AcpSessionCwdError(f"the session's cwd {cwd} {what}: the team works there")
    return path


def find_team_file(team: Path | None, cwd: Path) -> Path:
    """``team`` (``--team``), else the first of ``TEAM_FILES`` in ``cwd``.

    Raises ``TeamFileNotFoundError`` naming where it looked."""
    if team is not None:
        return team
    for name in TEAM_FILES:
        if (cwd / name).is_file():
            return cwd / name
    looked = " or ".join(str(cwd / name) for name in TEAM_FILES)
    raise TeamFileNotFoundError(
        f"no team for this session: start `oma acp --team FILE`, or put the team in {looked} "
        '(a run input without its goal: {"team": {...}, "coordinator"?: {...}, "options"?: {...}})'
    )


def read_team_file(path: Path) -> dict[str, Any]:
    """The team file at ``path``, checked as ``oma run`` checks a run input
    (``oma.client.run_file.run_input_json``, ``checked_team_run_input``) with a goal
    in place. Raises ``InvalidRunInputError`` (and the graph's errors) with
    ``oma run``'s message, the file's path first."""
    from oma.client.run_file import run_input_json

    raw = run_input_json(path)
    if isinstance(raw, dict):
        given = [k for k in ("goal", "tasks", "plan") if k in raw]
        if given:
            raise InvalidRunInputError(
                f"{path}: a team file has no {', '.join(map(repr, given))}: each prompt of the "
                "session is the goal; keep 'team', 'coordinator' and 'options'"
            )
    try:
        checked_team_run_input({**raw, "goal": CHECK_GOAL} if isinstance(raw, dict) else raw)
    except OMAError as err:
        raise type(err)(f"{path}: {err.message}") from None  # (its code said once, by str)
    assert isinstance(raw, dict)  # checked above
    return raw


def session_team(team: Path | None, cwd: Path, mcp_servers: list[Any] | None) -> SessionTeam:
    """The team of a session in ``cwd``, with the editor's additions.

    Raises ``TeamFileNotFoundError``, and what ``read_team_file`` raises."""
    path = find_team_file(team, cwd)
    raw = read_team_file(path)
    servers, notes = editor_mcp_servers(mcp_servers or [])
    return SessionTeam(path, with_editor(raw, cwd, servers), notes)


def with_editor(raw: dict[str, Any], cwd: Path, servers: list[McpServerConfig]) -> dict[str, Any]:
    """``raw`` (a checked team file) with the session's directory as every
    agent's default working directory (relative ones resolved against it)
    and ``servers`` added to every LLM agent's ``mcp_servers`` (a server of
    a name the agent already has is not added again)."""
    out = copy.deepcopy(raw)
    for agent in out["team"]["agents"]:
        holder = agent["backend"] if agent.get("backend") else agent
        given = holder.get("cwd")
        holder["cwd"] = str(cwd / given) if given else str(cwd)
        if agent.get("backend") or not servers:
            continue
        mine = agent.get("mcp_servers") or []
        names = {s.get("name") for s in mine}
        added = [s.model_dump(exclude_defaults=True) for s in servers if s.name not in names]
        agent["mcp_servers"] = [*mine, *added]
    return out


_NOT_A_NAME = re.compile(r"[^A-Za-z0-9-]+")


def server_name(name: str, taken: set[str]) -> str:
    """An editor's MCP server name as the team's tools need it (letters,
    digits, ``-`` and single ``_``, at most ``MAX_SERVER_NAME_CHARS``), not
    one of ``taken``."""
    base = _NOT_A_NAME.sub("_", name).strip("_")[:MAX_SERVER_NAME_CHARS].strip("_") or "mcp"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        suffix = f"-{n}"
        candidate = base[: MAX_SERVER_NAME_CHARS - len(suffix)] + suffix
    return candidate


def editor_mcp_servers(offered: list[Any]) -> tuple[list[McpServerConfig], list[str]]:
    """The editor's MCP servers (ACP ``McpServerStdio``, ``HttpMcpServer``, ...)
    as the team's ``McpServerConfig``s, and a note for each one left out.

    A stdio server is taken whole (its ``env`` goes into the run's history,
    which ``OMA_CODEC_KEYS`` encrypts); an HTTP server without headers is
    taken. One with headers is left out: their values are credentials, and
    a run input names a worker's environment variable instead
    (docs/mcp.md). SSE and other transports are not supported."""
    servers: list[McpServerConfig] = []
    notes: list[str] = []
    taken: set[str] = set()
    for offer in offered:
        kind = type(offer).__name__
        name = str(getattr(offer, "name", "") or "mcp")
        try:
            if kind == "McpServerStdio":
                env = {e.name: e.value for e in offer.env or []}
                config = McpServerConfig(
                    name=server_name(name, taken),
                    command=offer.command,
                    args=list(offer.args or []),
                    env=env,
                )
            elif kind == "HttpMcpServer" and not offer.headers:
                config = McpServerConfig(name=server_name(name, taken), url=offer.url)
            elif kind == "HttpMcpServer":
                notes.append(
                    f"MCP server {name!r} left out: its headers carry credentials, which would "
                    "be written into the run's history; give the team an HTTP server whose "
                    "headers name a worker's environment variable instead (docs/mcp.md)"
                )
                continue
            else:
                notes.append(f"MCP server {name!r} left out: its transport is not supported")
                continue
        except ValueError as err:  # pydantic's, for a server the team cannot take
            notes.append(f"MCP server {name!r} left out: {err}")
            continue
        taken.add(config.name)
        servers.append(config)
    return servers, notes
