"""``session/fork``: a new session that branches another's latest run.

An editor forks a session as it branches a chat: the new session has the
same past and a future of its own. Here the past is the session's latest
run: the fork pins that execution (its workflow id and Temporal run id) as
the new session's ``Branch``, and the new session's id is the workflow id of
the fork's runs, ``<session id>-fork-<8 hex>``, as ``oma fork`` names a fork.
Nothing starts until the new session is prompted (an editor prompts a
forked session at once, as it does a new one); then its first run is a fork
of the pinned run: a prompt is a follow-up of it (its outcome in the goal,
``oma.acp.prompt``), ``/retry`` a fork of it in Temporal's sense
(``oma.acp.retry``: what completed kept, the rest run again).
The session forked, and its runs, are never touched.

A session that has no run of its own yet (a fork not prompted yet) is
forked at its branch; one with neither cannot be forked
(``ACP_SESSION_NO_RUN``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from oma.core.contracts.names import WorkflowName
from oma.core.schema.errors import AcpSessionNoRunError, AcpSessionUnknownError

QUERY_TIMEOUT = timedelta(seconds=10)


@dataclass(frozen=True)
class Branch:
    """The run a forked session's runs start from until it has one of its
    own: the session it was forked from (``workflow_id``) and the execution
    that was that session's latest (``temporal_run_id``)."""

    workflow_id: str
    temporal_run_id: str


def fork_id(session_id: str) -> str:
    """The id of a new fork of ``session_id``: ``<session id>-fork-<8 hex>``."""
    return f"{session_id}-fork-{uuid.uuid4().hex[:8]}"


async def branch_of(
    client: Client, session_id: str, *, opened: bool, branch: Branch | None
) -> Branch:
    """Where a fork of the session ``session_id`` branches: its latest run
    (any ``TeamRun`` of that workflow id, running or ended); for a session
    of this connection (``opened``) that has no run of its own, its own
    ``branch``. Raises ``AcpSessionNoRunError`` for a session of this
    connection with neither, ``AcpSessionUnknownError`` for an id that is
    neither that nor a ``TeamRun``, and ``RPCError``."""
    try:
        described = await client.get_workflow_handle(session_id).describe(rpc_timeout=QUERY_TIMEOUT)
    except RPCError as err:
        if err.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            raise
        if branch is not None:
            return branch
        if opened:
            raise AcpSessionNoRunError(
                f"session {session_id!r} has no run yet: a fork branches the session's latest "
                "run; prompt the session first, or open a new session"
            ) from None
        raise AcpSessionUnknownError(
            f"no team run {session_id!r} on this Temporal server (namespace "
            f"{client.namespace!r}) and no such session on this connection: a session exists "
            "once its first prompt started a run"
        ) from None
    if described.workflow_type != WorkflowName.TEAM_RUN:
        raise AcpSessionUnknownError(
            f"{session_id!r} is a {described.workflow_type}, not a TeamRun"
        )
    return Branch(session_id, described.run_id)
