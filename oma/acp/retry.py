"""``/retry [TASK ...]``: run the session's latest run again from its tasks.

A retry is a fork (docs/fork.md) of the session's latest run that takes
the session's own workflow id, as a follow-up prompt's run does: it keeps
every task that is not named nor downstream of one, and runs the rest again
with the code and the team file as they are now. Without a task, it runs
again what did not complete (``oma fork`` without ``--from``). The fork
names the execution it retries (``fork.temporal_run_id``): by the workflow
id alone it would read itself once it starts.

A session forked from another (``session/fork``) that has no run of its
own yet retries the run it branches (``oma.acp.session_fork``):
a fork of that run under the new session's id, even while it still goes (it
keeps what has settled).

A run this session's ``oma acp`` started (its memo says so) is retried with
the session's team file read again, so a fix to an agent's prompt or
configuration applies to the tasks that run again; any other run (one
``oma run`` started, then loaded) with its own team. ``retry_of`` makes and
checks the fork before anything starts; what it cannot make is a message
for the user (``Refusal``), never a failed turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from oma.acp.session_fork import Branch
from oma.client.fork import preview
from oma.core.contracts.fork import ForkedRun
from oma.core.schema.errors import AcpSessionBusyError, OMAError
from oma.core.schema.fork import ForkInput, parse_fork_input

QUERY_TIMEOUT = timedelta(seconds=10)

TEAM_KEYS = ("team", "coordinator", "options")
"""What a retry takes from the session's team file, replacing the source's."""


@dataclass(frozen=True)
class Refusal:
    """Why ``/retry`` starts nothing: the message for the user."""

    text: str


@dataclass(frozen=True)
class Retry:
    """A retry, checked: the fork to start and what it keeps and runs again."""

    fork: ForkInput
    forked: ForkedRun
    source_temporal_run_id: str
    """The Temporal run id of the execution it retries."""
    source_memo: dict[str, Any] | None
    """That execution's ``oma acp`` memo (``None``: another client started it)."""

    def said(self) -> str:
        """What the user is told as it starts: what runs again, what is kept, the warnings."""
        again = ", ".join(self.forked.rerun) or "the synthesis"
        kept = ", ".join(self.forked.reused) or "nothing"
        lines = [f"Retrying {again}; keeping {kept}."]
        lines += [f"Warning: {w}" for w in self.forked.warnings]
        return "\n".join(lines) + "\n\n"


def busy(workflow_id: str, elsewhere: bool = False) -> Refusal:
    """The refusal of a retry while a run of the session goes."""
    how = " (started elsewhere)" if elsewhere else ""
    error = AcpSessionBusyError(
        f"the session's run {workflow_id} is still going{how}: wait for it, or end it with "
        "/abort (or cancel), then /retry; /status shows it"
    )
    return Refusal(f"/retry: {error}")


async def retry_of(
    client: Client,
    workflow_id: str,
    tasks: list[str],
    *,
    memo_key: str,
    team_file: Callable[[], dict[str, Any]],
    branch: Branch | None = None,
) -> Retry | Refusal:
    """The retry of the latest run of ``workflow_id`` from ``tasks`` (none:
    what did not complete), checked as its run will check it
    (``oma.client.fork.preview``); ``team_file`` gives the session's team
    file as it is now (a run input without its goal; it raises
    ``OMAError``), used for a run whose memo has ``memo_key``. Without a run
    of ``workflow_id``, the retry of ``branch``, the run a forked session
    branches. A ``Refusal`` when there is no run yet, the session's run
    still goes, the team file has errors, or the fork cannot be made
    (``INVALID_FORK``: an unknown task with the nearest id, nothing to run
    again, ...)."""
    try:
        described = await _source(client, workflow_id, branch)
        source_id = described.id
        if source_id == workflow_id and described.status == WorkflowExecutionStatus.RUNNING:
            return busy(workflow_id, elsewhere=True)
        mine = (await described.memo()).get(memo_key)
        memo = mine if isinstance(mine, dict) else None
        raw: dict[str, Any] = {
            "fork": {
                "run_id": source_id,
                "temporal_run_id": described.run_id,
                **({"rerun": tasks} if tasks else {}),
            }
        }
        if memo is not None:
            given = team_file()
            raw |= {k: given[k] for k in TEAM_KEYS if k in given}
        fork = parse_fork_input(raw)
        forked = await preview(client, fork, workflow_id)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return Refusal(f"No run in this session yet ({workflow_id}): send a goal first.")
        return Refusal(f"/retry failed: {err}")
    except OMAError as err:
        return Refusal(f"/retry: {err}")
    return Retry(fork, forked, described.run_id, memo)


async def _source(
    client: Client, workflow_id: str, branch: Branch | None
) -> WorkflowExecutionDescription:
    """The execution a retry forks: the latest of ``workflow_id``, else the
    one ``branch`` pins. Raises ``RPCError`` (``NOT_FOUND``: neither)."""
    try:
        return await client.get_workflow_handle(workflow_id).describe(rpc_timeout=QUERY_TIMEOUT)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND or branch is None:
            raise
    pinned = client.get_workflow_handle(branch.workflow_id, run_id=branch.temporal_run_id)
    return await pinned.describe(rpc_timeout=QUERY_TIMEOUT)
