"""Record the replay corpus in ``tests/histories/``.

Runs representative workflows on an embedded dev server and a worker in this
process, and writes one workflow history per scenario as ``temporal workflow
show --output json`` would, to ``tests/histories/<scenario>.json``. The corpus
is kept once recorded: ``tests/workflows/test_histories.py`` replays every file against
the current code, so a change that breaks running histories fails the tests.

    .venv/bin/python -m tests.support.record_histories           # the scenarios without a file yet
    .venv/bin/python -m tests.support.record_histories NAME ...  # these, even over a kept file

Each scenario runs a ``TeamRun`` (or an ``AgentRun``) whose workflow id is the
scenario's name, asserts that the run ended the way the file claims, and
returns the one history to keep: the run itself, one of its ``AgentRun``
children (``<name>/<task id>``), or a later run of a run that continued as
new. A ``TeamRun`` replays only under its own workflow id (its children's ids
and its approval requests' hashes are made from it): ``tests/workflows/test_histories.py``
reads it back from the children's ids, else takes the file's stem, and both
are the scenario's name. An ``AgentRun`` child replays under the stem, which
it never reads (it reads its own id only to key the ACP sessions of a
standalone run).

Record a scenario only for new behaviour; never re-record one to make a
failing replay pass.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError

from oma import worker as oma_worker
from oma.core.contracts.names import QueryName, SignalName, WorkflowName
from oma.core.schema.results import AgentRunResult, TeamRunResult
from oma.core.schema.task import TaskStatus
from oma.runtime.connection import Connection
from oma.runtime.dev_server import DevServer, free_port
from tests.support import paths
from tests.support.anthropic_server import AnthropicServer
from tests.support.approvals import Run, decision, eventually, start_run, wait_for_file
from tests.support.paths import HISTORIES, ROOT
from tests.support.runs import process, scripted, task, worker_activities

TASK_QUEUE = "oma-record"
ACP_AGENT = str(paths.ACP_AGENT)
WAIT_S = 30.0
"""How long a scenario waits for a run to reach a point before it fails."""


class Kept(NamedTuple):
    """The history a scenario keeps: one run of one workflow."""

    workflow_id: str
    run_id: str


Scenario = Callable[[Client, str], Awaitable[Kept]]
"""Runs a scenario under the given workflow id, asserts its outcome, and
returns the history to keep."""


def _team(*agents: dict[str, Any]) -> dict[str, Any]:
    return {"name": "t", "agents": list(agents)}


async def _start(client: Client, workflow_id: str, run_input: dict[str, Any]) -> Run:
    return await start_run(client, workflow_id, run_input, task_queue=TASK_QUEUE)


def _kept(run: Run) -> Kept:
    """The run as started (it did not continue as new)."""
    return Kept(run.id, run.handle.result_run_id or "")


def _statuses(result: TeamRunResult) -> dict[str, TaskStatus]:
    return {t.id: t.status for t in result.tasks}


def _decisions(result: TeamRunResult) -> list[tuple[str, str, str]]:
    return [(d.request_id, d.decision, d.source) for d in result.approval_decisions]


async def _cancelled_state(run: Run) -> TeamRunResult:
    """The state of a run that Temporal cancellation ended."""
    try:
        await run.result()
    except WorkflowFailureError as err:
        assert isinstance(err.cause, CancelledError), err.cause
        return await run.state()
    raise AssertionError(f"run {run.id} was not cancelled")


# -- the demo's hybrid team (examples/hybrid-team-scripted.json) --------------


async def _hybrid_team(client: Client, workflow_id: str) -> Run:
    """The demo run: a scripted planner, the process coder
    (``examples/agents/coder.py``, in ``scratch/`` under the repository as
    ``make demo`` runs it), a scripted reviewer. The kept histories ran the
    same input (the example file did not change since) as ``hybrid-dev-demo``
    on the ``oma`` task queue; a new recording is named after its scenario."""
    (ROOT / "scratch").mkdir(exist_ok=True)
    run_input = json.loads((ROOT / "examples" / "hybrid-team-scripted.json").read_text())
    run = await _start(client, workflow_id, run_input)
    result = await run.result()
    assert result.status == "completed", result
    assert _statuses(result) == {
        "plan": TaskStatus.COMPLETED,
        "code": TaskStatus.COMPLETED,
        "review": TaskStatus.COMPLETED,
    }
    return run


async def hybrid_team(client: Client, workflow_id: str) -> Kept:
    """The demo's hybrid team: planner, process coder, reviewer, one after the other."""
    return _kept(await _hybrid_team(client, workflow_id))


async def hybrid_team_process_task(client: Client, workflow_id: str) -> Kept:
    """The ``AgentRun`` of the demo's process coder (one ``process_run``)."""
    await _hybrid_team(client, workflow_id)
    return await _child(client, workflow_id, "code")


async def hybrid_team_scripted_task(client: Client, workflow_id: str) -> Kept:
    """The ``AgentRun`` of the demo's scripted planner (a local ``llm_turn``)."""
    await _hybrid_team(client, workflow_id)
    return await _child(client, workflow_id, "plan")


async def _child(client: Client, workflow_id: str, task_id: str) -> Kept:
    """The last ``AgentRun`` of task ``task_id`` of the run ``workflow_id``."""
    description = await client.get_workflow_handle(f"{workflow_id}/{task_id}").describe()
    return Kept(description.id, description.run_id)


# -- goals, approvals, abort ----------------------------------------------------


PLAN = json.dumps(
    [
        {"title": "Research", "description": "list three facts", "assignee": "researcher"},
        {
            "title": "Write",
            "description": "write a paragraph",
            "assignee": "writer",
            "depends_on": ["Research"],
        },
    ]
)


async def goal_run_with_plan_approval(client: Client, workflow_id: str) -> Kept:
    """A goal run: a plan that is not JSON, the correction, the plan approved
    by update, two tasks, the synthesis."""
    run = await _start(
        client,
        workflow_id,
        {
            "team": _team(scripted("researcher", "three facts"), scripted("writer", "prose")),
            "goal": "a paragraph with three facts",
            "coordinator": {
                "provider": "scripted",
                "script": ["no plan yet", PLAN, "the final paragraph"],
            },
            "options": {"approvals": {"plan": True}},
        },
    )
    await run.decide(await run.request("plan", WAIT_S), reviewer="recorder")
    result = await run.result()
    assert result.status == "completed", result
    return _kept(run)


async def dispatch_gate_refused_then_aborted(client: Client, workflow_id: str) -> Kept:
    """A dispatch approval: a stale decision refused (signal), then ``abort``
    while one branch ran."""
    run = await _start(
        client,
        workflow_id,
        {
            "team": _team(scripted("a", "done"), scripted("b", "done")),
            "tasks": [
                {"id": "free", "title": "Free", "assignee": "a"},
                {"id": "gated", "title": "Gated", "assignee": "b"},
            ],
            "options": {"approvals": {"dispatch": ["gated"]}},
        },
    )
    request = await run.request("dispatch-gated", WAIT_S)
    await run.handle.signal(
        SignalName.DECIDE, decision(request.request_id, "stale", reviewer="recorder")
    )
    await run.abort("recorded")
    result = await run.result()
    assert result.status == "cancelled", result
    return _kept(run)


async def dispatch_gates_decided_by_signal_and_update(client: Client, workflow_id: str) -> Kept:
    """Dispatch approvals: ``a`` approved by signal, then ``b`` (which depends
    on ``a``, so its request opens only once ``a`` completed) approved by
    update, then the independent ``c`` rejected by update: the run ends
    ``rejected``."""
    run = await _start(
        client,
        workflow_id,
        {
            "team": _team(scripted("w", "w done")),
            "tasks": [task("a", "w"), task("b", "w", "a"), task("c", "w")],
            "options": {"approvals": {"dispatch": ["a", "b", "c"]}},
        },
    )
    await run.request("dispatch-c", WAIT_S)
    await run.signal_decision(await run.request("dispatch-a", WAIT_S), reviewer="recorder")
    await run.decide(await run.request("dispatch-b", WAIT_S), reviewer="recorder")
    await run.state_where(
        lambda s: s.task("b").status == TaskStatus.COMPLETED, "task b to complete", WAIT_S
    )
    await run.decide(await run.request("dispatch-c", WAIT_S), "reject", reviewer="recorder")
    result = await run.result()
    assert (result.status, result.error_code) == ("rejected", "APPROVAL_REJECTED"), result
    assert _statuses(result) == {
        "a": TaskStatus.COMPLETED,
        "b": TaskStatus.COMPLETED,
        "c": TaskStatus.SKIPPED,
    }
    assert _decisions(result) == [
        ("dispatch-a", "approve", "signal"),
        ("dispatch-b", "approve", "update"),
        ("dispatch-c", "reject", "update"),
    ]
    return _kept(run)


async def round_gates_approved_then_rejected(client: Client, workflow_id: str) -> Kept:
    """Round approvals: round 1 (``a``, ``b``) approved by update, round 2
    (``c``) approved by signal, round 3 (``d``) rejected by signal."""
    run = await _start(
        client,
        workflow_id,
        {
            "team": _team(scripted("w", "w done")),
            "tasks": [
                task("a", "w"),
                task("b", "w"),
                task("c", "w", "a", "b"),
                task("d", "w", "c"),
            ],
            "options": {"approvals": {"round": True}},
        },
    )
    await run.decide(await run.request("round-1", WAIT_S), reviewer="recorder")
    await run.signal_decision(await run.request("round-2", WAIT_S), reviewer="recorder")
    await run.signal_decision(await run.request("round-3", WAIT_S), "reject", reviewer="recorder")
    result = await run.result()
    assert (result.status, result.error_code) == ("rejected", "APPROVAL_REJECTED"), result
    assert _statuses(result) == {
        "a": TaskStatus.COMPLETED,
        "b": TaskStatus.COMPLETED,
        "c": TaskStatus.COMPLETED,
        "d": TaskStatus.SKIPPED,
    }
    assert _decisions(result) == [
        ("round-1", "approve", "update"),
        ("round-2", "approve", "signal"),
        ("round-3", "reject", "signal"),
    ]
    return _kept(run)


async def approval_expired_and_approved(client: Client, workflow_id: str) -> Kept:
    """A dispatch request on the dependent ``b`` that nobody answers: after
    ``timeout_s`` (1 s) ``on_timeout: approve`` is recorded and ``b`` runs."""
    run = await _start(
        client,
        workflow_id,
        {
            "team": _team(scripted("w", "w done")),
            "tasks": [task("a", "w"), task("b", "w", "a")],
            "options": {"approvals": {"dispatch": ["b"], "timeout_s": 1, "on_timeout": "approve"}},
        },
    )
    result = await run.result()
    assert result.status == "completed", result
    assert _statuses(result) == {"a": TaskStatus.COMPLETED, "b": TaskStatus.COMPLETED}
    [recorded] = result.approval_decisions
    assert (recorded.request_id, recorded.decision, recorded.source, recorded.reviewer.id) == (
        "dispatch-b",
        "approve",
        "timeout",
        "oma:timeout",
    )
    return _kept(run)


async def continued_as_new(client: Client, workflow_id: str) -> Kept:
    """A run past ``history_event_limit``: its first run ends continued as new."""
    tasks = [
        {
            "id": f"c{c}s{s}",
            "title": f"C{c} s{s}",
            "assignee": "w",
            "depends_on": [f"c{c}s{s - 1}"] if s else [],
        }
        for c in range(3)
        for s in range(8)
    ]
    run = await _start(
        client,
        workflow_id,
        {
            "team": _team(scripted("w", "ok")),
            "tasks": tasks,
            "options": {"history_event_limit": 100},
        },
    )
    result = await run.result()
    assert result.status == "completed", result
    return Kept(workflow_id, run.handle.first_execution_run_id or "")


async def resumed_with_an_open_approval(client: Client, workflow_id: str) -> Kept:
    """The second run of a run that continued as new while the dispatch
    request of ``gated`` was open: the request carries over, is approved by
    update in the new run, and ``gated`` runs there."""
    # history_event_limit is at least 100: a chain of 16 passes it after about 11 tasks
    chain = [task(f"s{i}", "w", *([f"s{i - 1}"] if i else [])) for i in range(16)]
    run = await _start(
        client,
        workflow_id,
        {
            "team": _team(scripted("w", "ok")),
            "tasks": [*chain, task("gated", "w")],
            "options": {"history_event_limit": 100, "approvals": {"dispatch": ["gated"]}},
        },
    )
    first_run_id = run.handle.first_execution_run_id

    async def continued() -> str | None:
        latest = await client.get_workflow_handle(workflow_id).describe()
        return latest.run_id if latest.run_id != first_run_id else None

    second_run_id = await eventually(continued, "the run to continue as new", WAIT_S)
    first = await client.get_workflow_handle(workflow_id, run_id=first_run_id).query(
        QueryName.PENDING_APPROVALS
    )
    assert [r["request_id"] for r in first] == ["dispatch-gated"], first
    # the handle follows the latest run: the decision lands in the second one
    await run.decide(await run.request("dispatch-gated", WAIT_S), reviewer="recorder")
    result = await run.result()
    assert result.status == "completed", result
    assert set(_statuses(result).values()) == {TaskStatus.COMPLETED}
    assert _decisions(result) == [("dispatch-gated", "approve", "update")]
    latest = await client.get_workflow_handle(workflow_id).describe()
    assert latest.run_id == second_run_id, "the run continued as new more than once"
    return Kept(workflow_id, second_run_id)


# -- failures, retries, timeouts, budgets, cancellation ---------------------------


async def failed_task_cascades(client: Client, workflow_id: str) -> Kept:
    """A process task exits 3: its transitive dependents are skipped while an
    independent branch completes."""
    run = await _start(
        client,
        workflow_id,
        {
            "team": _team(
                scripted("ok", "fine"),
                process("broken", "import sys; sys.stdin.read(); sys.exit(3)"),
            ),
            "tasks": [
                task("root", "ok"),
                task("bad", "broken", "root"),
                task("child", "ok", "bad"),
                task("grandchild", "ok", "child"),
                task("sibling", "ok", "root"),
            ],
        },
    )
    result = await run.result()
    assert (result.status, result.success) == ("failed", False), result
    assert _statuses(result) == {
        "root": TaskStatus.COMPLETED,
        "bad": TaskStatus.FAILED,
        "child": TaskStatus.SKIPPED,
        "grandchild": TaskStatus.SKIPPED,
        "sibling": TaskStatus.COMPLETED,
    }
    assert result.task("bad").error_code == "PROCESS_FAILED"
    assert result.task("grandchild").error == "skipped: dependency 'bad' (Bad) failed"
    return _kept(run)


async def task_timeout_retried_with_backoff(client: Client, workflow_id: str) -> Kept:
    """A task whose first two attempts outlive ``timeout_s`` (1 s; the child
    is cancelled, ``TASK_TIMEOUT``, retryable) and whose third completes; the
    retries wait 0.5 s, then 1 s (``retry_delay_s`` 0.5, ``retry_backoff`` 2)."""
    with tempfile.TemporaryDirectory(prefix="oma-record-") as tmp:
        attempts = Path(tmp) / "attempts"
        flaky = (
            f"import pathlib, sys, time; sys.stdin.read(); log = pathlib.Path({str(attempts)!r}); "
            "n = len(log.read_text()) if log.exists() else 0; log.write_text('x' * (n + 1)); "
            "time.sleep(30 if n < 2 else 0); sys.stdout.write(f'done on attempt {n + 1}')"
        )
        job = task("job", "flaky") | {
            "timeout_s": 1,
            "max_retries": 3,
            "retry_delay_s": 0.5,
            "retry_backoff": 2,
        }
        run = await _start(
            client,
            workflow_id,
            {"team": _team(process("flaky", flaky)), "tasks": [job]},
        )
        result = await run.result()
    state = result.task("job")
    assert (result.status, state.status, state.attempts, state.output) == (
        "completed",
        TaskStatus.COMPLETED,
        3,
        "done on attempt 3",
    ), result
    retries = [e.detail for e in await run.events() if e.type == "task_retry"]
    timed_out = "after TASK_TIMEOUT: task 'job' ran longer than its timeout_s (1 s)"
    assert retries == [f"attempt 2 in 0.5 s {timed_out}", f"attempt 3 in 1 s {timed_out}"]
    return _kept(run)


async def run_timeout(client: Client, workflow_id: str) -> Kept:
    """``options.timeout_s`` (1 s) passes while a process task runs: it is
    cancelled (``RUN_TIMEOUT``), its dependent skipped, the run ``failed``."""
    sleepy = "import sys, time; sys.stdin.read(); time.sleep(30)"
    run = await _start(
        client,
        workflow_id,
        {
            "team": _team(process("sleepy", sleepy)),
            "tasks": [task("slow", "sleepy"), task("next", "sleepy", "slow")],
            "options": {"timeout_s": 1},
        },
    )
    result = await run.result()
    assert (result.status, result.error_code) == ("failed", "RUN_TIMEOUT"), result
    assert (result.task("slow").status, result.task("slow").error_code) == (
        TaskStatus.FAILED,
        "RUN_TIMEOUT",
    )
    assert result.task("next").status == TaskStatus.SKIPPED
    return _kept(run)


async def token_budget_exceeded(client: Client, workflow_id: str) -> Kept:
    """``options.max_token_budget`` (20) is crossed after two tasks of a
    chain of four: the rest are skipped, the run ``failed``."""
    run = await _start(
        client,
        workflow_id,
        {
            "team": _team(scripted("w", "one two three")),
            "tasks": [
                task("a", "w"),
                task("b", "w", "a"),
                task("c", "w", "b"),
                task("d", "w", "c"),
            ],
            "options": {"max_concurrency": 1, "max_token_budget": 20},
        },
    )
    result = await run.result()
    assert (result.status, result.error_code, result.budget_exceeded) == (
        "failed",
        "BUDGET_EXCEEDED",
        True,
    ), result
    assert _statuses(result) == {
        "a": TaskStatus.COMPLETED,
        "b": TaskStatus.COMPLETED,
        "c": TaskStatus.SKIPPED,
        "d": TaskStatus.SKIPPED,
    }
    return _kept(run)


async def cancelled_while_a_process_runs(client: Client, workflow_id: str) -> Kept:
    """Temporal cancellation of the run while a process task runs: the task
    fails ``CANCELLED``, its dependent is skipped, the run ends Canceled."""
    with tempfile.TemporaryDirectory(prefix="oma-record-") as tmp:
        started = Path(tmp) / "started"
        hang = (
            "import sys, time; sys.stdin.read(); "
            f"open({str(started)!r}, 'w').write('yes\\n'); time.sleep(60)"
        )
        run = await _start(
            client,
            workflow_id,
            {
                "team": _team(process("hang", hang), scripted("w", "w done")),
                "tasks": [task("hang", "hang"), task("after", "w", "hang")],
            },
        )
        await wait_for_file(started, WAIT_S)
        await run.handle.cancel()
        state = await _cancelled_state(run)
    assert state.status == "cancelled", state
    assert (state.task("hang").status, state.task("hang").error_code) == (
        TaskStatus.FAILED,
        "CANCELLED",
    )
    assert state.task("after").error == "skipped: the run was cancelled"
    return _kept(run)


async def tool_call_approved_at_the_team_run(client: Client, workflow_id: str) -> Kept:
    """A task's gated ``file_write`` call (``options.approvals.tools``),
    listed at the team run and approved there by update; the call runs. Kept
    as recorded before ``_patches.TOOL_DECISIONS_AT_THE_TASK``: the team run recorded the
    decision itself and sent it to the task's run as a ``decide`` signal (a
    recording now shows the decision forwarded as ``forwarded_decision``)."""
    with tempfile.TemporaryDirectory(prefix="oma-record-") as tmp:
        write = {
            "type": "tool_use",
            "id": "u1",
            "name": "file_write",
            "input": {"path": "out.txt", "content": "hi"},
        }
        writer = {
            "name": "writer",
            "provider": "scripted",
            "script": [[write], "wrote it"],
            "tools": ["readwrite"],
            "cwd": tmp,
        }
        run = await _start(
            client,
            workflow_id,
            {
                "team": _team(writer),
                "tasks": [task("w", "writer")],
                "options": {"approvals": {"tools": ["file_write"]}},
            },
        )
        await run.decide(await run.request("tool-w-1", WAIT_S), reviewer="recorder")
        result = await run.result()
        assert result.status == "completed", result
        assert (Path(tmp) / "out.txt").read_text() == "hi"
    assert _decisions(result) == [("tool-w-1", "approve", "update")]
    return _kept(run)


async def awaiting_approval(client: Client, workflow_id: str) -> Kept:
    """A task's gated ``file_write`` call approved at the team run, then the
    dispatch of its dependent approved: ``OmaStatus`` goes
    ``awaiting_approval``, ``running``, ``awaiting_approval``, ``running``,
    ``completed`` (``_patches.AWAITING_APPROVAL_STATUS``). (The task's run is
    not kept: its tool request's hash is made from its own workflow id,
    ``<run id>/draft``, which a file's stem cannot be.)"""
    with tempfile.TemporaryDirectory(prefix="oma-record-") as tmp:
        write = {
            "type": "tool_use",
            "id": "u1",
            "name": "file_write",
            "input": {"path": "notes.md", "content": "1.4.0"},
        }
        writer = {
            "name": "writer",
            "provider": "scripted",
            "script": [[write], "drafted"],
            "tools": ["readwrite"],
            "cwd": tmp,
        }
        run = await _start(
            client,
            workflow_id,
            {
                "team": _team(writer, scripted("publisher", "published")),
                "tasks": [task("draft", "writer"), task("publish", "publisher", "draft")],
                "options": {"approvals": {"tools": ["file_write"], "dispatch": ["publish"]}},
            },
        )
        await run.decide(await run.request("tool-draft-1", WAIT_S), reviewer="recorder")
        await run.decide(await run.request("dispatch-publish", WAIT_S), reviewer="recorder")
        result = await run.result()
    assert result.status == "completed", result
    assert _decisions(result) == [
        ("tool-draft-1", "approve", "update"),
        ("dispatch-publish", "approve", "update"),
    ]
    return _kept(run)


# -- ACP agents -----------------------------------------------------------------


async def _acp_two_turns(client: Client, workflow_id: str) -> Run:
    """Two dependent tasks of one ACP agent (``tests/support/acp_agent.py``): the
    first opens the session on the shared task queue, the second is routed to
    the session worker's own queue, and the run closes the session."""
    with tempfile.TemporaryDirectory(prefix="oma-record-") as tmp:
        script = {"turns": [{"steps": [{"text": "first"}]}, {"steps": [{"text": "second"}]}]}
        coder = {
            "name": "coder",
            "system_prompt": "You write code.",
            "backend": {
                "kind": "acp",
                "command": sys.executable,
                "args": [ACP_AGENT],
                "cwd": tmp,
                "env": {"ACP_TEST_SCRIPT": json.dumps(script)},
            },
        }
        run = await _start(
            client,
            workflow_id,
            {"team": _team(coder), "tasks": [task("one", "coder"), task("two", "coder", "one")]},
        )
        result = await run.result()
    assert result.status == "completed", result
    assert (result.task("one").output, result.task("two").output) == ("first", "second")
    sessions = []
    for task_id in ("one", "two"):
        handle = client.get_workflow_handle(f"{workflow_id}/{task_id}", result_type=AgentRunResult)
        sessions.append((await handle.result()).acp_session)
    assert sessions[0] is not None and sessions[1] is not None
    assert sessions[0].session_id == sessions[1].session_id
    assert (sessions[0].new_session, sessions[1].new_session) == (True, False)
    return run


async def acp_agent_over_two_turns(client: Client, workflow_id: str) -> Kept:
    """The ``TeamRun`` of an ACP agent's two tasks, with its ``acp_close_run``."""
    return _kept(await _acp_two_turns(client, workflow_id))


async def acp_agent_routed_turn(client: Client, workflow_id: str) -> Kept:
    """The ``AgentRun`` of an ACP agent's second task: its ``acp_prompt`` runs
    on the task queue of the worker that holds the session."""
    await _acp_two_turns(client, workflow_id)
    return await _child(client, workflow_id, "two")


# -- a model turn on the Anthropic API, hooks, evaluation ------------------------


async def anthropic_turn_retried_with_hooks(client: Client, workflow_id: str) -> Kept:
    """An ``AgentRun`` of an Anthropic agent against the local Messages API
    server: the ``before_run`` hook (``tests.support.hooks:shout``), the ``llm_turn``
    activity (a 429 first, retried by Temporal after its ``retry-after-ms``,
    then the answer) and the ``evaluate`` activity (``tests.support.hooks:output_length``)."""
    queue = f"{TASK_QUEUE}-anthropic"
    with AnthropicServer() as api:
        activities = worker_activities(queue, api.base_url)
        api.reply_error(429, "Rate limited.", headers={"retry-after-ms": "200"})
        api.reply_text("four", input_tokens=12, output_tokens=1)
        agent = {
            "name": "a",
            "provider": "anthropic",
            "before_run": "tests.support.hooks:shout",
            "evaluation": {"evaluator": "tests.support.hooks:output_length", "sample_rate": 1.0},
        }
        async with oma_worker.build_worker(client, queue, activities):
            handle: WorkflowHandle[Any, AgentRunResult] = await client.start_workflow(
                WorkflowName.AGENT_RUN,
                {"agent": agent, "input": "quiet please"},
                id=workflow_id,
                task_queue=queue,
                result_type=AgentRunResult,
            )
            result = await handle.result()
        sent = [r.body["messages"][0]["content"][0]["text"] for r in api.requests]
    assert (result.status, result.output, result.turns) == ("completed", "four", 1), result
    assert sent == ["QUIET PLEASE", "QUIET PLEASE"]
    assert result.evaluation is not None
    assert (result.evaluation.sampled, result.evaluation.score) == (True, 4.0)
    return Kept(workflow_id, handle.result_run_id or "")


# -- forks ------------------------------------------------------------------------

FLAKY = "import pathlib, sys; sys.stdin.read(); sys.exit(0 if pathlib.Path('ok').exists() else 3)"
"""A process agent that fails (exit 3) until a file ``ok`` exists in its ``cwd``."""


async def _fork_of_a_failed_run(client: Client, workflow_id: str) -> Run:
    """A run whose last task fails (``one`` -> ``two`` -> ``three``), then
    the fork ``workflow_id`` of it once the file the task needs exists: it
    keeps ``one`` and ``two`` and runs ``three`` again."""
    with tempfile.TemporaryDirectory() as cwd:
        team = _team(scripted("a", "fine"), process("flaky", FLAKY, cwd=cwd))
        tasks = [task("one", "a"), task("two", "a", "one"), task("three", "flaky", "two")]
        source = await _start(client, f"{workflow_id}-source", {"team": team, "tasks": tasks})
        assert (await source.result()).status == "failed"
        (Path(cwd) / "ok").touch()
        fork = await _start(client, workflow_id, {"fork": {"run_id": source.id}})
        result = await fork.result()
    assert result.status == "completed", result
    assert [t.reused_from is not None for t in result.tasks] == [True, True, False]
    return fork


async def fork_of_a_failed_run(client: Client, workflow_id: str) -> Kept:
    """A fork: the ``read_fork_source`` activity, then the task that failed
    run again, the others kept."""
    return _kept(await _fork_of_a_failed_run(client, workflow_id))


async def fork_of_a_goal_run(client: Client, workflow_id: str) -> Kept:
    """A fork of a goal run from its second task, with another prompt for its
    agent: the plan kept, the kept output read back, the synthesis run again."""
    coordinator = {"provider": "scripted", "script": [PLAN, "final"]}
    team = _team(scripted("researcher", "facts"), scripted("writer", "draft"))
    source = await _start(
        client,
        f"{workflow_id}-source",
        {"team": team, "goal": "Write about the sky.", "coordinator": coordinator},
    )
    assert (await source.result()).status == "completed"
    new_team = _team(scripted("researcher", "facts"), scripted("writer", "a better draft"))
    fork = await _start(
        client, workflow_id, {"fork": {"run_id": source.id, "rerun": ["t2"]}, "team": new_team}
    )
    result = await fork.result()
    assert (result.status, result.final_output) == ("completed", "final"), result
    assert [t.output for t in result.tasks] == ["facts", "a better draft"]
    return _kept(fork)


async def reuse_by_content(client: Client, workflow_id: str) -> Kept:
    """A run with ``options.reuse``: its reference run's tasks whose content
    did not change are kept (``one``), the task of the agent whose prompt
    changed runs (``two``), and so does what depends on it (``three``)."""

    def team(prompt: str) -> dict[str, Any]:
        return _team(scripted("a", "fine"), scripted("b", "fine", system_prompt=prompt))

    tasks = [task("one", "a"), task("two", "b", "one"), task("three", "a", "two")]
    reference = await _start(
        client, f"{workflow_id}-reference", {"team": team("B1"), "tasks": tasks}
    )
    assert (await reference.result()).success
    options = {"reuse": {"from": reference.id}}
    run = await _start(
        client, workflow_id, {"team": team("B2"), "tasks": tasks, "options": options}
    )
    result = await run.result()
    assert result.status == "completed", result
    assert [t.reused_from is not None for t in result.tasks] == [True, False, False]
    return _kept(run)


async def fork_refused(client: Client, workflow_id: str) -> Kept:
    """A fork naming a task its source lacks: it fails ``INVALID_FORK`` before
    anything runs."""
    source = await _start(
        client,
        f"{workflow_id}-source",
        {"team": _team(scripted("a", "x")), "tasks": [task("one", "a")]},
    )
    await source.result()
    fork = await _start(client, workflow_id, {"fork": {"run_id": source.id, "rerun": ["on"]}})
    try:
        await fork.result()
    except WorkflowFailureError as err:
        assert "has no task 'on' (did you mean 'one'?)" in str(err.cause), err.cause
    else:
        raise AssertionError("the fork did not fail")
    return _kept(fork)


async def _recorded_forks(client: Client, workflow_id: str) -> None:
    """An Anthropic run (``t1`` -> ``t2``), then, with the model server
    stopped, its fork replaying the recorded turns (``workflow_id``) and one
    whose edited ``t2`` misses the recording (``<workflow_id>-miss``)."""
    queue = f"{TASK_QUEUE}-recorded"
    agent = {"name": "writer", "provider": "anthropic", "system_prompt": "Be brief."}
    run_input = {
        "team": {"name": "rec", "agents": [agent]},
        "tasks": [task("t1", "writer"), task("t2", "writer", "t1")],
    }
    with AnthropicServer() as api:
        api.reply_text("alpha")
        api.reply_text("beta")
        async with oma_worker.build_worker(client, queue, worker_activities(queue, api.base_url)):
            source_id = f"{workflow_id}-source"
            source = await start_run(client, source_id, run_input, task_queue=queue)
            assert (await source.result()).success
            api.stop()
            options = {"models": "recorded"}
            fork = {"fork": {"run_id": source_id, "rerun": ["t1"]}, "options": options}
            forked = await start_run(client, workflow_id, fork, task_queue=queue)
            assert (await forked.result()).status == "completed"
            edit = {"t2": {"description": "do t2 otherwise"}}
            miss = {"fork": {"run_id": source_id, "edit": edit}, "options": options}
            missed = await start_run(client, f"{workflow_id}-miss", miss, task_queue=queue)
            assert (await missed.result()).task("t2").error_code == "RECORDING_MISS"


async def fork_replaying_recorded_turns(client: Client, workflow_id: str) -> Kept:
    """A fork with ``options.models`` ``recorded``: its tasks' model turns
    answered from its source's recording, the model server stopped."""
    await _recorded_forks(client, workflow_id)
    return await _child(client, workflow_id, "t2")


async def recording_missed(client: Client, workflow_id: str) -> Kept:
    """A replayed model turn whose request the recording lacks: the task's
    ``AgentRun`` fails ``RECORDING_MISS``."""
    await _recorded_forks(client, workflow_id)
    return await _child(client, f"{workflow_id}-miss", "t2")


SCENARIOS: dict[str, Scenario] = {
    "team_run_hybrid_scripted": hybrid_team,
    "agent_run_process": hybrid_team_process_task,
    "agent_run_scripted": hybrid_team_scripted_task,
    "team_run_goal_plan_approval": goal_run_with_plan_approval,
    "team_run_dispatch_gate_abort": dispatch_gate_refused_then_aborted,
    "team_run_continued_as_new": continued_as_new,
    "team_run_dispatch_gates_decided": dispatch_gates_decided_by_signal_and_update,
    "team_run_round_gates": round_gates_approved_then_rejected,
    "team_run_approval_expired": approval_expired_and_approved,
    "team_run_resumed_with_open_approval": resumed_with_an_open_approval,
    "team_run_failed_task_cascade": failed_task_cascades,
    "team_run_task_timeout_retries": task_timeout_retried_with_backoff,
    "team_run_run_timeout": run_timeout,
    "team_run_token_budget": token_budget_exceeded,
    "team_run_cancelled": cancelled_while_a_process_runs,
    "team_run_tool_call_approved": tool_call_approved_at_the_team_run,
    "team_run_acp_two_turns": acp_agent_over_two_turns,
    "agent_run_acp_routed_turn": acp_agent_routed_turn,
    "agent_run_anthropic_retry_hooks": anthropic_turn_retried_with_hooks,
    "team_run_fork": fork_of_a_failed_run,
    "team_run_fork_of_a_goal_run": fork_of_a_goal_run,
    "team_run_fork_refused": fork_refused,
    "team_run_reuse": reuse_by_content,
    "agent_run_recorded_turn": fork_replaying_recorded_turns,
    "agent_run_recording_miss": recording_missed,
    # the same runs as the first two, recorded with one patch marker (ONE_MARKER)
    "team_run_one_marker": hybrid_team,
    "agent_run_one_marker": hybrid_team_scripted_task,
    "team_run_awaiting_approval": awaiting_approval,
    # recorded with the one marker a run records as it starts (ONE_MARKER_2)
    "team_run_awaiting_approval_one_marker_2": awaiting_approval,
    "agent_run_one_marker_2": hybrid_team_scripted_task,
    # a task's run its team run started with ONE_MARKER_2 (AgentRunInput.patched): no marker
    "agent_run_one_marker_2_from_parent": hybrid_team_scripted_task,
}
"""Every file of the corpus, by its stem, and the scenario that records it."""


async def record(address: str, names: list[str]) -> None:
    client = await Connection.local(address, TASK_QUEUE).connect()
    async with oma_worker.build_worker(client, TASK_QUEUE):
        for name in names:
            kept = await SCENARIOS[name](client, name)
            handle = client.get_workflow_handle(kept.workflow_id, run_id=kept.run_id)
            history = await handle.fetch_history()
            path = HISTORIES / f"{name}.json"
            path.write_text(json.dumps(history.to_json_dict(), indent=2) + "\n")
            size = path.stat().st_size
            print(f"{path}: {len(history.events)} events, {size} bytes", flush=True)


def main() -> None:
    names = sys.argv[1:] or [n for n in SCENARIOS if not (HISTORIES / f"{n}.json").exists()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(
            f"unknown scenario(s): {', '.join(unknown)} (have: {', '.join(SCENARIOS)})"
        )
    if not names:
        print("every scenario has its history; name one to record it again")
        return
    # the demo's process agent runs in scratch/ relative to the worker's directory
    os.chdir(ROOT)
    with DevServer(port=free_port()) as server:
        asyncio.run(record(server.address, names))


if __name__ == "__main__":
    main()
