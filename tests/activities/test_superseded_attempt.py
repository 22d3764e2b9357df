"""A backend activity's attempt, as the activity sees it: stopped at once when
Temporal no longer accepts it, and its number reported in every outcome."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path

import pytest
from temporalio.activity import ActivityCancellationDetails
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    RetryState,
    TimeoutError,
    TimeoutType,
)
from temporalio.testing import ActivityEnvironment

from oma.activities.acp import SessionPool
from oma.activities.acp_prompt import AcpActivities
from oma.activities.process_run import process_run
from oma.core.contracts.acp import AcpPromptInput
from oma.core.contracts.names import ActivityName
from oma.core.contracts.process import ProcessRunInput
from oma.core.schema.backends import ProcessBackendConfig
from oma.workflows._agent_ports import failed_backend_attempts
from tests.support.acp_script import WORKER_QUEUE, Heartbeats, ScriptedAgent, text, turn
from tests.support.activities import run_activity
from tests.support.attempts import SUPERSEDED
from tests.support.procs import dead_within, read_when_written

pytestmark = pytest.mark.fault

PAUSE = f"{sys.executable} -c 'import signal; signal.pause()'"


def env_at(attempt: int) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=attempt)
    return env


class TermRecorder:
    """A process command whose shell writes down every SIGTERM it gets (and
    lives on), with a paused grandchild in its process group."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        script = (
            "trap 'echo TERM >> signals' TERM; "
            f"{PAUSE} & echo $! > grandchild.pid; echo $$ > child.pid; "
            "while true; do wait; sleep 0.05; done"
        )
        self.backend = ProcessBackendConfig(command="sh", args=["-c", script], cwd=str(tmp_path))

    async def pids(self) -> list[int]:
        return [
            await read_when_written(self.dir / "child.pid"),
            await read_when_written(self.dir / "grandchild.pid"),
        ]

    def signals(self) -> list[str]:
        path = self.dir / "signals"
        return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("why", SUPERSEDED)
async def test_a_superseded_process_run_gets_sigkill_at_once(tmp_path: Path, why: str) -> None:
    command = TermRecorder(tmp_path)
    env = ActivityEnvironment()
    run = asyncio.create_task(
        env.run(process_run, ProcessRunInput(agent="coder", backend=command.backend, prompt="go"))
    )
    pids = await command.pids()

    env.cancel(SUPERSEDED[why])
    with pytest.raises(asyncio.CancelledError):
        await run

    # dead well within the 1 s grace a cancel request gets, and never asked
    # to terminate: nothing of it ran on
    assert await dead_within(pids, timeout_s=0.5)
    assert command.signals() == []


async def test_a_cancel_request_still_gives_the_process_sigterm_and_its_grace(
    tmp_path: Path,
) -> None:
    command = TermRecorder(tmp_path)
    env = ActivityEnvironment()
    run = asyncio.create_task(
        env.run(process_run, ProcessRunInput(agent="coder", backend=command.backend, prompt="go"))
    )
    pids = await command.pids()

    env.cancel(ActivityCancellationDetails(cancel_requested=True))
    with pytest.raises(asyncio.CancelledError):
        await run

    assert await dead_within(pids, timeout_s=3.0)
    assert command.signals() == ["TERM"]


@pytest.mark.parametrize("why", SUPERSEDED)
async def test_a_superseded_acp_turn_kills_the_agent_at_once_and_drops_its_session(
    tmp_path: Path, why: str
) -> None:
    # grace periods long enough that only a kill without them passes
    pool = SessionPool(cancel_grace_s=5.0, kill_grace_s=5.0)
    acts = AcpActivities(pool, WORKER_QUEUE)
    agent = ScriptedAgent(tmp_path)
    backend = agent.backend(
        turn(text("partial"), {"sleep": 30}),
        script={"ignore_sigterm": True, "spawn_child": True},
    )
    beats = Heartbeats()
    running = asyncio.create_task(
        beats.env.run(
            acts.acp_prompt,
            AcpPromptInput(run_key="run-1", agent="coder", backend=backend, prompt="go"),
        )
    )
    await beats.until_output_chars(7)

    beats.env.cancel(SUPERSEDED[why])
    with pytest.raises(asyncio.CancelledError):
        await running

    assert await dead_within(agent.pids("agent") + agent.pids("child"), timeout_s=0.5)
    assert agent.events("cancel") == []
    assert len(pool) == 0


async def test_a_process_run_reports_its_attempt_in_its_output(tmp_path: Path) -> None:
    backend = ProcessBackendConfig(command="echo", args=["hi"], input="none")

    out = await env_at(3).run(
        process_run, ProcessRunInput(agent="coder", backend=backend, prompt="")
    )

    assert (out.stdout, out.attempt) == ("hi\n", 3)


async def test_a_failed_process_run_reports_its_attempt_in_the_error_details() -> None:
    backend = ProcessBackendConfig(command="false", input="none")

    with pytest.raises(ApplicationError) as failed:
        await run_activity(
            process_run, ProcessRunInput(agent="coder", backend=backend, prompt=""), env=env_at(2)
        )

    assert (failed.value.type, failed.value.details) == (
        "PROCESS_FAILED",
        ({"code": "PROCESS_FAILED", "attempt": 2},),
    )


async def test_an_acp_turn_reports_its_attempt_in_its_output(tmp_path: Path) -> None:
    pool = SessionPool()
    agent = ScriptedAgent(tmp_path)
    inp = AcpPromptInput(
        run_key="run-1", agent="coder", backend=agent.backend(turn(text("ok"))), prompt="go"
    )
    try:
        out = await env_at(2).run(AcpActivities(pool, WORKER_QUEUE).acp_prompt, inp)
    finally:
        await pool.close_all()

    assert (out.output, out.attempt) == ("ok", 2)


async def test_heartbeats_name_the_attempt_from_the_second_on() -> None:
    backend = ProcessBackendConfig(command="echo", args=["hi"], input="none")
    beats: dict[int, list[object]] = {1: [], 2: []}
    for attempt, seen in beats.items():
        env = env_at(attempt)
        env.on_heartbeat = lambda *details, seen=seen: seen.extend(details)
        await env.run(process_run, ProcessRunInput(agent="coder", backend=backend, prompt=""))

    assert {"stdout_bytes": 0, "last_line": ""} in beats[1]
    assert {"stdout_bytes": 0, "last_line": "", "attempt": 2} in beats[2]


def activity_error(
    cause: BaseException, activity_type: str = ActivityName.PROCESS_RUN
) -> ActivityError:
    err = ActivityError(
        "activity failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="worker",
        activity_type=activity_type,
        activity_id="1",
        retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED,
    )
    err.__cause__ = cause
    return err


def heartbeat_timeout(*details: object) -> TimeoutError:
    return TimeoutError("timed out", type=TimeoutType.HEARTBEAT, last_heartbeat_details=details)


@pytest.mark.parametrize(
    ("cause", "attempts"),
    [
        (ApplicationError("exit 1", {"code": "PROCESS_FAILED", "attempt": 2}), 2),
        (heartbeat_timeout({"stdout_bytes": 3, "last_line": "x", "attempt": 3}), 3),
        (heartbeat_timeout({"stdout_bytes": 3, "last_line": "x"}), 1),
        (heartbeat_timeout(), 1),
    ],
    ids=["error-details", "heartbeat-of-attempt-3", "heartbeat-of-attempt-1", "no-heartbeat"],
)
def test_a_failed_backend_activity_tells_how_many_attempts_ran(
    cause: BaseException, attempts: int
) -> None:
    assert failed_backend_attempts(activity_error(cause)) == attempts


def test_a_failed_model_turn_has_no_backend_attempts() -> None:
    cause = ApplicationError("overloaded", {"code": "PROVIDER_ERROR", "attempt": 2})

    assert failed_backend_attempts(activity_error(cause, ActivityName.LLM_TURN)) is None
