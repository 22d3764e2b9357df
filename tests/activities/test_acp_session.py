"""The ACP activities and session pool against a real ACP agent subprocess
(``tests/support/acp_agent.py``, built on the SDK's agent side)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from oma.activities.acp import AcpSession, SessionPool
from oma.activities.acp_prompt import AcpActivities
from oma.core.contracts.acp import (
    AcpCloseRunInput,
    AcpCloseRunOutput,
    AcpPromptInput,
    AcpPromptOutput,
)
from oma.core.schema.backends import AcpBackendConfig, PermissionPolicy, PermissionRule
from oma.core.schema.errors import AcpProtocolError, AcpSpawnError
from oma.core.schema.results import PermissionRecord, ToolCallRecord
from oma.core.schema.usage import TokenUsage
from tests.support.acp_script import (
    WORKER_QUEUE,
    Heartbeats,
    ScriptedAgent,
    eventually,
    permission,
    text,
    thought,
    tool_call,
    turn,
)
from tests.support.activities import run_activity
from tests.support.procs import alive

STOP_REASONS = ["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]

# -- harness -------------------------------------------------------------------


@pytest.fixture
def agent(tmp_path: Path) -> ScriptedAgent:
    return ScriptedAgent(tmp_path)


@pytest.fixture
def acts(pool: SessionPool) -> AcpActivities:
    return AcpActivities(pool, WORKER_QUEUE)


async def prompt(
    acts: AcpActivities,
    backend: AcpBackendConfig,
    text: str = "go",
    *,
    run_key: str = "run-1",
    env: ActivityEnvironment | None = None,
    **inp: Any,
) -> AcpPromptOutput:
    request = AcpPromptInput(run_key=run_key, agent="coder", backend=backend, prompt=text, **inp)
    return await run_activity(acts.acp_prompt, request, env=env)


async def prompt_failing(
    acts: AcpActivities, backend: AcpBackendConfig, **inp: Any
) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await prompt(acts, backend, **inp)
    return caught.value


# Permission callables, referenced by import path as a worker would load them.
CALLABLE_REQUESTS: list[dict[str, Any]] = []


def approve_reads(request: dict[str, Any]) -> bool:
    CALLABLE_REQUESTS.append(request)
    return bool(request["kind"] == "read")


async def never_decides(request: dict[str, Any]) -> bool:
    CALLABLE_REQUESTS.append(request)
    await asyncio.Event().wait()
    return True


# -- prompt turns ----------------------------------------------------------------


async def test_text_chunks_are_assembled_exactly_as_sent(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    chunks = ["Hello", ",  ", "world\n", "", "\t  indented  \n\n"]

    out = await prompt(acts, agent.backend(turn(*map(text, chunks))))

    assert out.output == "Hello,  world\n\t  indented  \n\n"


# -- agent messages: messageId ----------------------------------------------------


async def test_a_message_re_sent_whole_under_a_new_message_id_is_kept_once(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    # streamed under A, then the whole block again under B (claude-agent-acp's
    # consolidated copy when its own dedup misses)
    steps = [text("Hello", "A"), text(" world", "A"), text("Hello world", "B")]

    out = await prompt(acts, agent.backend(turn(*steps)))

    assert out.output == "Hello world"


async def test_repeated_chunks_of_one_message_are_all_kept(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    # the repeats are the message; only its whole re-send under B is dropped
    steps = [text("ab", "A"), text("ab", "A"), text("ab", "A"), text("ababab", "B")]

    out = await prompt(acts, agent.backend(turn(*steps)))

    assert out.output == "ababab"


async def test_chunks_without_message_id_are_joined_as_sent_repeats_included(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    steps = [text("ab"), tool_call("t1"), text("ab"), thought("hmm"), text("ab")]

    out = await prompt(acts, agent.backend(turn(*steps)))

    assert out.output == "ababab"


async def test_a_re_send_with_a_message_id_of_chunks_streamed_without_one_is_kept_once(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    # deltas without messageId, the consolidated copy with one
    steps = [text("ab"), text("ab"), text("ab"), text("ababab", "msg_1")]

    out = await prompt(acts, agent.backend(turn(*steps)))

    assert out.output == "ababab"


async def test_distinct_messages_are_joined_with_a_blank_line(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    steps = [
        text("Running", "A"),
        text(" the tests.", "A"),
        tool_call("t1"),
        thought("they pass"),
        text("All 12 tests pass.", "B"),
    ]

    out = await prompt(acts, agent.backend(turn(*steps)))

    assert out.output == "Running the tests.\n\nAll 12 tests pass."


async def test_chunks_are_assembled_per_message_id_in_order_of_first_chunk(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    steps = [text("Hel", "A"), text("Other", "B"), text("lo", "A"), text("!", "B")]

    out = await prompt(acts, agent.backend(turn(*steps)))

    assert out.output == "Hello\n\nOther!"


async def test_tool_call_updates_merge_into_the_record_of_their_tool_call(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    steps: list[dict[str, Any]] = [
        {"tool_call": {"id": "t1", "title": "Edit slug.py", "kind": "edit", "status": "pending",
                       "raw_input": {"path": "slug.py"}}},
        {"tool_call": {"id": "t2", "title": "Run tests", "kind": "execute", "status": "pending"}},
        {"tool_call_update": {"id": "t1", "status": "in_progress"}},
        {"tool_call_update": {"id": "t1", "status": "completed", "raw_output": "wrote 3 lines"}},
        {"tool_call_update": {"id": "t2", "title": "Run pytest", "status": "failed",
                              "text": "1 failed"}},
    ]  # fmt: skip

    out = await prompt(acts, agent.backend(turn(*steps)))

    assert out.tool_calls == [
        ToolCallRecord(
            id="t1",
            name="Edit slug.py",
            input={"kind": "edit", "rawInput": {"path": "slug.py"}},
            status="completed",
            output="wrote 3 lines",
        ),
        ToolCallRecord(
            id="t2",
            name="Run pytest",
            input={"kind": "execute"},
            status="failed",
            output="1 failed",
        ),
    ]


async def test_usage_is_the_increment_of_used_since_the_previous_reading(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    backend = agent.backend(turn({"usage": 100}), turn({"usage": 180}, {"usage": 250}))

    first = await prompt(acts, backend)
    second = await prompt(acts, backend)

    unpriced = ["ACP agent 'coder' (it reports no usage_update.cost)"]
    assert first.token_usage == TokenUsage(input_tokens=100, unpriced=unpriced)
    assert second.token_usage == TokenUsage(input_tokens=150, unpriced=unpriced)


async def test_turn_without_usage_update_reports_zero_tokens_at_an_unknown_cost(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    out = await prompt(acts, agent.backend(turn(text("done"))))

    assert out.token_usage == TokenUsage(
        input_tokens=0, unpriced=["ACP agent 'coder' (it reports no usage_update.cost)"]
    )


async def test_cost_is_the_increment_of_usage_update_cost_since_the_previous_reading(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    backend = agent.backend(
        turn({"usage": 100, "cost": 0.05}),
        turn({"usage": 180, "cost": 0.08}, {"usage": 250, "cost": 0.125}),
        turn(text("no new reading")),
    )

    first, second, third = [await prompt(acts, backend) for _ in range(3)]

    assert (first.token_usage.cost_usd, first.token_usage.unpriced) == (0.05, [])
    assert second.token_usage.cost_usd == pytest.approx(0.075)
    # the session reported its cost before: a turn without a reading cost nothing more
    assert (third.token_usage.cost_usd, third.token_usage.cost_known) == (0.0, True)


async def test_a_cost_in_another_currency_is_not_counted_and_says_so(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    out = await prompt(acts, agent.backend(turn({"usage": 10, "cost": 2.5, "currency": "EUR"})))

    assert out.token_usage.cost_usd == 0.0
    assert out.token_usage.unpriced == ["ACP agent 'coder' (its cost is in EUR)"]


async def test_unknown_and_unreadable_updates_are_ignored(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    steps = [
        text("a"),
        {"raw_update": {"sessionUpdate": "future_kind", "payload": 1}},
        {"raw_update": {"sessionUpdate": "agent_thought_chunk",
                        "content": {"type": "text", "text": "thinking"}}},
        {"usage": 50},
        {"usage": None},
        text("b"),
    ]  # fmt: skip

    out = await prompt(acts, agent.backend(turn(*steps)))

    assert (out.output, out.stop_reason, out.token_usage.input_tokens) == ("ab", "end_turn", 50)


async def test_each_stop_reason_is_returned_verbatim(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    backend = agent.backend(*(turn(stop_reason=reason) for reason in STOP_REASONS))

    outs = [await prompt(acts, backend) for _ in STOP_REASONS]

    assert [out.stop_reason for out in outs] == STOP_REASONS


async def test_heartbeats_report_the_output_length_so_far(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    beats = Heartbeats()

    await prompt(acts, agent.backend(turn(text("abc"), {"sleep": 0.6}, text("de"))), env=beats.env)

    assert {"output_chars": 3, "last_text": "abc"} in beats.details
    assert {key for detail in beats.details for key in detail} == {"output_chars", "last_text"}


# -- sessions --------------------------------------------------------------------


async def test_session_opens_with_no_client_capabilities_in_the_absolute_cwd(
    acts: AcpActivities, agent: ScriptedAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    (agent.dir / "project").mkdir()
    monkeypatch.chdir(agent.dir)

    await prompt(acts, agent.backend(turn(), cwd="project"))

    project = str(agent.dir / "project")
    [initialize] = agent.events("initialize")
    assert initialize["params"]["protocolVersion"] == 1
    assert initialize["params"]["clientCapabilities"] == {}
    assert [e["params"] for e in agent.events("session/new")] == [
        {"cwd": project, "mcpServers": []}
    ]
    assert [e["cwd"] for e in agent.events("start")] == [project]


async def test_system_prompt_is_prepended_to_the_first_prompt_only(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    backend = agent.backend()

    await prompt(acts, backend, "write slugify", system_prompt="You are a coder.")
    await prompt(acts, backend, "now test it", system_prompt="You are a coder.")

    assert [e["text"] for e in agent.events("prompt")] == [
        "You are a coder.\n\nwrite slugify",
        "now test it",
    ]


async def test_prompts_of_one_run_and_agent_share_one_session_and_subprocess(
    acts: AcpActivities, pool: SessionPool, agent: ScriptedAgent
) -> None:
    backend = agent.backend()

    first = await prompt(acts, backend)
    second = await prompt(acts, backend)

    [pid] = agent.pids()
    assert (first.new_session, second.new_session) == (True, False)
    assert first.session_id == second.session_id == f"sess-{pid}-1"
    assert first.worker_task_queue == second.worker_task_queue == WORKER_QUEUE
    assert (pool.spawn_count, len(pool)) == (1, 1)


async def test_different_runs_get_their_own_subprocess(
    acts: AcpActivities, pool: SessionPool, agent: ScriptedAgent
) -> None:
    backend = agent.backend()

    await prompt(acts, backend, run_key="run-1")
    await prompt(acts, backend, run_key="run-2")

    assert (pool.spawn_count, len(pool), len(set(agent.pids()))) == (2, 2, 2)


async def test_concurrent_first_prompts_open_one_session(
    pool: SessionPool, agent: ScriptedAgent
) -> None:
    backend = agent.backend()

    (a, a_new), (b, b_new) = await asyncio.gather(
        pool.get_or_open("run-1", "coder", backend), pool.get_or_open("run-1", "coder", backend)
    )

    assert a is b
    assert sorted([a_new, b_new]) == [False, True]
    assert pool.spawn_count == 1


async def test_resume_loads_the_session_when_the_agent_advertises_load_session(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    backend = agent.backend(script={"load_session": True})

    out = await prompt(acts, backend, resume_session_id="sess-earlier", system_prompt="SYS")

    assert (out.session_id, out.new_session, out.loaded_session) == ("sess-earlier", True, True)
    assert [e["params"]["sessionId"] for e in agent.events("session/load")] == ["sess-earlier"]
    # the loaded history already holds the system prompt
    assert [e["text"] for e in agent.events("prompt")] == ["go"]


async def test_resume_opens_a_new_session_when_the_agent_cannot_load(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    out = await prompt(acts, agent.backend(), resume_session_id="sess-earlier", system_prompt="SYS")

    assert (out.session_id, out.loaded_session) == (f"sess-{agent.pids()[0]}-1", False)
    assert agent.events("session/load") == []
    assert [e["text"] for e in agent.events("prompt")] == ["SYS\n\ngo"]


async def test_failed_session_load_falls_back_to_a_new_session(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    backend = agent.backend(script={"load_session": True, "load_fails": True})

    out = await prompt(acts, backend, resume_session_id="sess-earlier")

    assert (out.session_id, out.loaded_session) == (f"sess-{agent.pids()[0]}-1", False)
    assert len(agent.events("session/new")) == 1


async def test_close_run_kills_the_process_tree_and_empties_the_pool(
    acts: AcpActivities, pool: SessionPool, agent: ScriptedAgent
) -> None:
    # SIGTERM is ignored by agent and child alike: only the group SIGKILL ends them.
    await prompt(acts, agent.backend(script={"spawn_child": True, "ignore_sigterm": True}))
    pids = agent.pids("agent") + agent.pids("child")
    assert len(pids) == 2 and all(map(alive, pids))

    out = await ActivityEnvironment().run(acts.acp_close_run, AcpCloseRunInput(run_key="run-1"))

    assert out == AcpCloseRunOutput(closed_sessions=1)
    await eventually(lambda: not any(map(alive, pids)))
    assert len(pool) == 0
    assert await pool.close_run("run-1") == 0


# -- errors ----------------------------------------------------------------------


async def test_missing_command_is_a_spawn_error_naming_it(
    acts: AcpActivities, pool: SessionPool
) -> None:
    err = await prompt_failing(acts, AcpBackendConfig(command="oma-no-such-acp-agent"))

    assert (err.type, err.non_retryable) == ("ACP_SPAWN_FAILED", True)
    assert "'oma-no-such-acp-agent'" in err.message
    assert (pool.spawn_count, len(pool)) == (0, 0)


async def test_unsupported_protocol_version_is_a_protocol_error(
    acts: AcpActivities, pool: SessionPool, agent: ScriptedAgent
) -> None:
    err = await prompt_failing(acts, agent.backend(script={"protocol_version": 2}))

    assert (err.type, err.non_retryable) == ("ACP_PROTOCOL_ERROR", True)
    assert "protocol version 2" in err.message
    await eventually(lambda: not alive(agent.pids()[0]))
    assert len(pool) == 0


async def test_agent_dying_mid_turn_is_retryable_and_the_next_prompt_opens_a_fresh_session(
    acts: AcpActivities, pool: SessionPool, agent: ScriptedAgent
) -> None:
    err = await prompt_failing(acts, agent.backend(turn(text("half"), {"exit": 3})))

    assert (err.type, err.non_retryable) == ("ACP_AGENT_EXITED", False)
    assert "exit status 3" in err.message
    assert len(pool) == 0

    out = await prompt(acts, agent.backend(turn(text("whole"))))

    assert (out.output, out.new_session, pool.spawn_count) == ("whole", True, 2)


async def test_fs_and_terminal_requests_get_method_not_found(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    steps = [
        {"client_call": "read_text_file", "params": {"path": "/etc/hostname"}},
        {"client_call": "write_text_file", "params": {"path": "/tmp/x", "content": "x"}},
        {"client_call": "create_terminal", "params": {"command": "ls"}},
    ]

    out = await prompt(acts, agent.backend(turn(*steps)))

    assert [(e["method"], e["error_code"]) for e in agent.events("client_call")] == [
        ("read_text_file", -32601),
        ("write_text_file", -32601),
        ("create_terminal", -32601),
    ]
    assert out.stop_reason == "end_turn"


# -- permissions -----------------------------------------------------------------


def record(
    option_kinds: list[str], option_id: str | None, approved: bool, **ask: Any
) -> PermissionRecord:
    return PermissionRecord(
        tool_call_id=ask.get("tool_call_id", "perm-1"),
        title=ask.get("title", ""),
        kind=ask.get("kind"),
        option_kinds=option_kinds,
        outcome="selected" if option_id else "cancelled",
        option_id=option_id,
        approved=approved,
    )


async def test_auto_approve_selects_allow_once_else_allow_always_else_rejects(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    files = [agent.dir / name for name in ("once", "always", "none")]
    steps = [
        permission("allow_always", "allow_once", "reject_once", write_file=str(files[0])),
        permission("allow_always", "reject_always", write_file=str(files[1])),
        permission("reject_once", write_file=str(files[2])),
    ]

    out = await prompt(acts, agent.backend(turn(*steps), permission="auto-approve"))

    assert out.permission_requests == [
        record(["allow_always", "allow_once", "reject_once"], "opt_allow_once", True),
        record(["allow_always", "reject_always"], "opt_allow_always", True),
        record(["reject_once"], "opt_reject_once", False),
    ]
    assert [f.exists() for f in files] == [True, True, False]


async def test_reject_selects_reject_once_else_reject_always_else_cancels(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    written = agent.dir / "written"
    steps = [
        permission("allow_once", "reject_always", "reject_once", write_file=str(written)),
        permission("allow_once", "reject_always", write_file=str(written)),
        permission("allow_once", write_file=str(written)),
    ]

    out = await prompt(acts, agent.backend(turn(*steps), permission="reject"))

    assert out.permission_requests == [
        record(["allow_once", "reject_always", "reject_once"], "opt_reject_once", False),
        record(["allow_once", "reject_always"], "opt_reject_always", False),
        record(["allow_once"], None, False),
    ]
    assert [e["outcome"] for e in agent.events("permission")] == [
        "selected",
        "selected",
        "cancelled",
    ]
    assert not written.exists()


async def test_policy_rules_decide_by_kind_and_title_pattern_then_default(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    policy = PermissionPolicy(
        rules=[
            PermissionRule(kind="delete", decision="reject"),
            PermissionRule(title_pattern=r"^Edit .*\.py$", decision="approve"),
        ],
        default="reject",
    )
    asks = [
        {"title": "Edit old.py", "kind": "delete"},
        {"title": "Edit slug.py", "kind": "edit"},
        {"title": "Edit notes.md", "kind": "edit"},
    ]
    steps = [permission("allow_once", "reject_once", **ask) for ask in asks]

    out = await prompt(acts, agent.backend(turn(*steps), permission=policy))

    assert [(r.title, r.option_id, r.approved) for r in out.permission_requests] == [
        ("Edit old.py", "opt_reject_once", False),
        ("Edit slug.py", "opt_allow_once", True),
        ("Edit notes.md", "opt_reject_once", False),
    ]


async def test_callable_policy_gets_title_kind_and_option_kinds(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    CALLABLE_REQUESTS.clear()
    policy = PermissionPolicy(callable="tests.activities.test_acp_session:approve_reads")
    steps = [
        permission("allow_once", "reject_once", title="Read a.txt", kind="read"),
        permission("allow_always", "reject_once", title="Edit a.txt", kind="edit"),
    ]

    out = await prompt(acts, agent.backend(turn(*steps), permission=policy))

    assert CALLABLE_REQUESTS == [
        {"title": "Read a.txt", "kind": "read", "option_kinds": ["allow_once", "reject_once"]},
        {"title": "Edit a.txt", "kind": "edit", "option_kinds": ["allow_always", "reject_once"]},
    ]
    assert [(r.option_id, r.approved) for r in out.permission_requests] == [
        ("opt_allow_once", True),
        ("opt_reject_once", False),
    ]


async def test_permission_request_naming_only_a_tool_call_takes_its_title_and_kind(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    steps: list[dict[str, Any]] = [
        {"tool_call": {"id": "t1", "title": "Delete build/", "kind": "delete"}},
        permission("allow_once", "reject_once", tool_call_id="t1"),
    ]
    policy = PermissionPolicy(
        rules=[PermissionRule(kind="delete", decision="reject")], default="approve"
    )

    out = await prompt(acts, agent.backend(turn(*steps), permission=policy))

    assert out.permission_requests == [
        record(["allow_once", "reject_once"], "opt_reject_once", False,
               tool_call_id="t1", title="Delete build/", kind="delete"),
    ]  # fmt: skip


async def test_permission_callable_that_cannot_be_imported_fails_before_spawning(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    policy = PermissionPolicy(callable="tests.no_such_module:decide")

    err = await prompt_failing(acts, agent.backend(permission=policy))

    assert (err.type, err.non_retryable) == ("INVALID_RUN_INPUT", True)
    assert agent.pids() == []


# -- cancellation ----------------------------------------------------------------


async def test_cancel_mid_stream_returns_the_partial_output_and_keeps_the_agent(
    acts: AcpActivities, pool: SessionPool, agent: ScriptedAgent
) -> None:
    backend = agent.backend(
        turn(text("partial "), {"sleep": 30}, text("never")), turn(text("next"))
    )
    beats = Heartbeats()
    running = asyncio.create_task(prompt(acts, backend, env=beats.env))
    await beats.until_output_chars(8)

    beats.env.cancel()
    out = await running

    assert (out.output, out.stop_reason) == ("partial ", "cancelled")
    assert [e["session_id"] for e in agent.events("cancel")] == [out.session_id]
    [pid] = agent.pids()
    assert alive(pid)
    following = await prompt(acts, backend)
    assert (following.output, following.new_session, pool.spawn_count) == ("next", False, 1)


async def test_cancel_answers_an_open_permission_request_cancelled(
    acts: AcpActivities, agent: ScriptedAgent
) -> None:
    CALLABLE_REQUESTS.clear()
    written = agent.dir / "written"
    policy = PermissionPolicy(callable="tests.activities.test_acp_session:never_decides")
    ask = permission(
        "allow_once", "reject_once", title="Edit a.py", kind="edit", write_file=str(written)
    )
    env = ActivityEnvironment()
    running = asyncio.create_task(
        prompt(acts, agent.backend(turn(ask), permission=policy), env=env)
    )
    await eventually(lambda: len(CALLABLE_REQUESTS) == 1)

    env.cancel()
    out = await running

    assert out.stop_reason == "cancelled"
    assert out.permission_requests == [
        record(["allow_once", "reject_once"], None, False, title="Edit a.py", kind="edit")
    ]
    assert [e["outcome"] for e in agent.events("permission")] == ["cancelled"]
    assert not written.exists()


async def test_agent_ignoring_cancel_is_killed_after_the_grace(agent: ScriptedAgent) -> None:
    pool = SessionPool(cancel_grace_s=0.3, kill_grace_s=0.2)
    acts = AcpActivities(pool, WORKER_QUEUE)
    backend = agent.backend(turn(text("x"), {"sleep": 30, "ignore_cancel": True}))
    beats = Heartbeats()
    running = asyncio.create_task(prompt(acts, backend, env=beats.env))
    await beats.until_output_chars(1)

    started = time.monotonic()
    beats.env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    assert time.monotonic() - started < 2.0
    assert [e["event"] for e in agent.events("cancel")] == ["cancel"]
    assert not alive(agent.pids()[0])
    assert len(pool) == 0


async def test_a_command_that_is_not_an_acp_agent_fails_the_handshake_in_time(
    tmp_path: Path,
) -> None:
    # prints a banner line per input line, as a CLI started without its ACP flag might
    backend = AcpBackendConfig(
        command=sys.executable,
        args=["-c", "import sys\nfor line in sys.stdin:\n    print('Welcome!', flush=True)"],
    )
    with pytest.raises(AcpSpawnError) as info:
        await AcpSession.open(backend, agent="not-acp", handshake_timeout_s=1.0)
    assert "did not answer within 1 s; is it an ACP agent?" in info.value.message


async def test_initialize_method_not_found_suggests_it_is_not_an_acp_agent(
    tmp_path: Path,
) -> None:
    answer = (
        "import sys, json\n"
        "for line in sys.stdin:\n"
        "    req = json.loads(line)\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': req['id'], "
        "'error': {'code': -32601, 'message': 'Method not found'}}), flush=True)"
    )
    backend = AcpBackendConfig(command=sys.executable, args=["-c", answer])
    with pytest.raises(AcpProtocolError) as info:
        await AcpSession.open(backend, agent="not-acp")
    assert "(is this command an ACP agent?)" in info.value.message
