"""The ``process_run`` activity against real subprocesses."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

import oma.activities.process_run as process_run_module
from oma.activities.process_run import process_run
from oma.core.contracts.process import ProcessRunInput, ProcessRunOutput
from oma.core.schema.backends import ProcessBackendConfig
from tests.support.activities import run_activity
from tests.support.paths import ROOT
from tests.support.procs import alive

PY = sys.executable
PAUSE = f"{PY} -c 'import signal; signal.pause()'"
CODER = ROOT / "examples" / "agents" / "coder.py"


def python(code: str, **backend: object) -> ProcessBackendConfig:
    """A backend running ``python -c code``."""
    return ProcessBackendConfig(command=PY, args=["-c", code], **backend)


def run_input(backend: ProcessBackendConfig, prompt: str = "do it", **kw: str) -> ProcessRunInput:
    return ProcessRunInput(agent="coder", backend=backend, prompt=prompt, **kw)


async def run_failing(inp: ProcessRunInput) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await run_activity(process_run, inp)
    return caught.value


async def wait_for_file(path: Path, timeout_s: float = 5.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} was not written")


ECHO_STDIN = "import sys; sys.stdout.write(sys.stdin.read())"


async def test_stdin_input_sends_system_prompt_then_prompt() -> None:
    inp = run_input(python(ECHO_STDIN), prompt="write slugify", system_prompt="You are a coder.")

    out = await ActivityEnvironment().run(process_run, inp)

    assert out == ProcessRunOutput(stdout="You are a coder.\n\nwrite slugify", exit_code=0)


async def test_stdin_input_without_system_prompt_sends_prompt_only() -> None:
    out = await ActivityEnvironment().run(process_run, run_input(python(ECHO_STDIN), "just this"))

    assert out.stdout == "just this"


async def test_argument_input_appends_prompt_as_last_argv() -> None:
    backend = ProcessBackendConfig(
        command=PY,
        args=["-c", "import json, sys; print(json.dumps(sys.argv[1:]))", "--flag"],
        input="argument",
    )
    inp = run_input(backend, prompt="the task", system_prompt="sys")

    out = await ActivityEnvironment().run(process_run, inp)

    assert out.stdout == '["--flag", "sys\\n\\nthe task"]\n'


async def test_none_input_gives_empty_stdin_and_allows_empty_prompt() -> None:
    backend = python("import sys; print(repr(sys.stdin.read()))", input="none")

    out = await ActivityEnvironment().run(process_run, run_input(backend, prompt=""))

    assert out.stdout == "''\n"


async def test_env_is_merged_over_worker_env() -> None:
    code = "import os; print(os.environ['OMA_AGENT_ROLE'], os.environ['PATH'])"
    backend = python(code, env={"OMA_AGENT_ROLE": "coder"})

    out = await ActivityEnvironment().run(process_run, run_input(backend))

    assert out.stdout == f"coder {os.environ['PATH']}\n"


async def test_cwd_is_honoured(tmp_path: Path) -> None:
    backend = python("import os; print(os.getcwd())", cwd=str(tmp_path))

    out = await ActivityEnvironment().run(process_run, run_input(backend))

    assert out.stdout == f"{tmp_path}\n"


async def test_relative_cwd_resolves_against_worker_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path)
    backend = python("import os; print(os.getcwd())", cwd="project")

    out = await ActivityEnvironment().run(process_run, run_input(backend))

    assert out.stdout == f"{tmp_path / 'project'}\n"


@pytest.mark.parametrize("mode", ["stdin", "argument"])
async def test_blank_prompt_fails_before_spawning(tmp_path: Path, mode: str) -> None:
    backend = python("open('spawned', 'w').close()", cwd=str(tmp_path), input=mode)

    err = await run_failing(run_input(backend, prompt=" \n\t", system_prompt="You code."))

    assert (err.type, err.non_retryable) == ("EMPTY_PROMPT", True)
    assert not (tmp_path / "spawned").exists()


async def test_stderr_with_exit_zero_is_success_with_stdout_only() -> None:
    backend = python("import sys; print('result'); print('warning: noisy', file=sys.stderr)")

    out = await ActivityEnvironment().run(process_run, run_input(backend))

    assert out == ProcessRunOutput(stdout="result\n", exit_code=0)


async def test_nonzero_exit_fails_with_status_and_redacted_stderr() -> None:
    code = (
        "import sys; print('partial output');"
        "sys.stderr.write('boom: key sk-ant-api03-abcdef0123456789\\n"
        "Authorization: Bearer xyz\\n'); sys.exit(3)"
    )

    err = await run_failing(run_input(python(code)))

    assert (err.type, err.non_retryable) == ("PROCESS_FAILED", True)
    assert err.message == (
        f"agent 'coder': command {PY!r} exited with status 3\n"
        "stderr (redacted):\n"
        "boom: key [redacted]\n"
        "Authorization: Bearer [redacted]"
    )
    assert "sk-ant" not in err.message and "xyz" not in err.message


async def test_long_stderr_keeps_only_its_redacted_end() -> None:
    code = "import sys; sys.stderr.write('x' * 20000 + '\\nlast line\\n'); sys.exit(1)"

    err = await run_failing(run_input(python(code)))

    assert err.message.endswith("the end of stderr (redacted):\nlast line")


async def test_death_by_signal_fails_naming_the_signal() -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"

    err = await run_failing(run_input(python(code)))

    assert err.type == "PROCESS_FAILED"
    assert err.message == f"agent 'coder': command {PY!r} was killed by signal SIGKILL"


async def test_missing_command_fails_to_spawn_naming_it() -> None:
    backend = ProcessBackendConfig(command="oma-no-such-command")

    err = await run_failing(run_input(backend))

    assert (err.type, err.non_retryable) == ("PROCESS_SPAWN_FAILED", True)
    assert err.message == (
        "agent 'coder': cannot start command 'oma-no-such-command': No such file or directory"
    )


async def test_missing_cwd_fails_to_spawn_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "gone"

    err = await run_failing(run_input(python("pass", cwd=str(missing))))

    assert err.type == "PROCESS_SPAWN_FAILED"
    assert err.message == (
        f"agent 'coder': cannot start command {PY!r}: cwd {str(missing)!r} is not a directory"
    )


async def test_heartbeats_report_stdout_progress() -> None:
    code = "import time; print('line one'); print('line two', flush=True); time.sleep(0.6)"
    env = ActivityEnvironment()
    beats: list[object] = []
    env.on_heartbeat = lambda *details: beats.append(details)

    await env.run(process_run, run_input(python(code)))

    assert len(beats) >= 2
    assert ({"stdout_bytes": 18, "last_line": "line two"},) in beats


async def test_cancel_kills_the_process_group_including_grandchild(tmp_path: Path) -> None:
    # The child ignores SIGTERM, and so does the grandchild it leaves running in
    # the background, so only the group SIGKILL after the grace period ends them.
    # The grandchild is a pause()d Python rather than `sleep 300`: in some
    # sandboxes a sleep returns early once its parent is killed, which would
    # let a kill of the child alone pass this test.
    script = f"trap '' TERM; {PAUSE} & echo $! > grandchild.pid; echo $$ > child.pid; wait"
    backend = ProcessBackendConfig(command="sh", args=["-c", script], cwd=str(tmp_path))
    env = ActivityEnvironment()
    run = asyncio.create_task(env.run(process_run, run_input(backend)))
    grandchild = int(await wait_for_file(tmp_path / "grandchild.pid"))
    child = int(await wait_for_file(tmp_path / "child.pid"))
    assert alive(child) and alive(grandchild)

    cancelled_at = time.monotonic()
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    while (alive(child) or alive(grandchild)) and time.monotonic() - cancelled_at < 2.0:
        await asyncio.sleep(0.02)
    assert not alive(child)
    assert not alive(grandchild)


async def test_background_descendant_holding_stdout_does_not_hang_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process_run_module, "PIPE_DRAIN_S", 0.2)
    script = f"{PAUSE} & echo $! > grandchild.pid; echo done"
    backend = ProcessBackendConfig(command="sh", args=["-c", script], cwd=str(tmp_path))

    out = await ActivityEnvironment().run(process_run, run_input(backend))

    assert out.stdout == "done\n"
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    deadline = time.monotonic() + 2.0
    while alive(grandchild) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not alive(grandchild)


async def test_already_cancelled_activity_spawns_nothing(tmp_path: Path) -> None:
    backend = python("open('spawned', 'w').close()", cwd=str(tmp_path))
    env = ActivityEnvironment()
    env.cancel()

    with pytest.raises(asyncio.CancelledError):
        await env.run(process_run, run_input(backend))

    assert not (tmp_path / "spawned").exists()


async def test_coder_example_writes_slugify_and_its_passing_test(tmp_path: Path) -> None:
    backend = ProcessBackendConfig(command=PY, args=[str(CODER)], cwd=str(tmp_path))
    inp = run_input(backend, prompt="Write a slugify() module\nwith tests", system_prompt="")

    out = await ActivityEnvironment().run(process_run, inp)

    assert sorted(p.name for p in tmp_path.iterdir()) == ["slugify.py", "test_slugify.py"]
    assert out.stdout == (
        "task: Write a slugify() module\n"
        f"wrote: slugify.py, test_slugify.py in {tmp_path}\n"
        "test: python3 test_slugify.py -> 7 checks passed\n"
    )


async def test_output_over_the_limit_fails_with_a_clear_error() -> None:
    from oma.core.schema.limits import MAX_OUTPUT_BYTES

    code = "import sys; sys.stdin.read(); sys.stdout.write('y' * 1_000_000)"
    inp = ProcessRunInput(
        agent="big",
        backend=ProcessBackendConfig(command=sys.executable, args=["-c", code]),
        prompt="go",
    )
    with pytest.raises(ApplicationError) as info:
        await run_activity(process_run, inp)
    assert (info.value.type, info.value.non_retryable) == ("OUTPUT_TOO_LARGE", True)
    assert "agent 'big' produced 1000000 bytes of output" in info.value.message
    assert f"at most {MAX_OUTPUT_BYTES} bytes" in info.value.message


async def test_output_at_the_limit_is_returned_whole() -> None:
    from oma.core.schema.limits import MAX_OUTPUT_BYTES

    code = f"import sys; sys.stdin.read(); sys.stdout.write('y' * {MAX_OUTPUT_BYTES})"
    inp = ProcessRunInput(
        agent="big",
        backend=ProcessBackendConfig(command=sys.executable, args=["-c", code]),
        prompt="go",
    )
    out = await ActivityEnvironment().run(process_run, inp)
    assert len(out.stdout) == MAX_OUTPUT_BYTES
