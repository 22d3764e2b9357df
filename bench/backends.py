"""How much our external-agent backends cost over driving the agent directly.

Two comparisons, side by side in one run:

1. Process spawn: ``runs`` runs of the ``process_run`` activity (called through
   ``temporalio.testing.ActivityEnvironment``, so heartbeating works) versus
   ``runs`` bare ``asyncio.create_subprocess_exec`` runs of the same command
   with the same stdin, reading stdout (``Process.communicate``; stderr to
   ``/dev/null``). The command
   is ``/bin/cat`` (``--command cat``, default) or this interpreter running
   ``sys.stdout.write(sys.stdin.read())`` (``--command python``).
2. ACP turn: the same scripted agent (``tests/support/acp_agent.py``, every turn
   ``chunks`` ``agent_message_chunk`` updates then ``end_turn``; the script is
   a temporary file given as its argument) driven by
   ``AcpActivities.acp_prompt`` with a ``SessionPool`` (through
   ``ActivityEnvironment``) versus the ``acp`` SDK's client side
   (``acp.spawn_agent_process`` + ``ClientSideConnection``: ``initialize``,
   ``session/new``). Each sends a first prompt untimed, then ``prompts``
   timed prompts, the second turn onwards.

The two sides of each comparison alternate run by run (ABBA order), so that
load from elsewhere on the machine falls on both alike. Each side prints the
mean, median and minimum milliseconds per run; the ratio uses the median
(``--stat mean`` for the mean), which a busy shared machine disturbs least.
``ActivityEnvironment.run`` of a no-op activity is printed too: that much of
"ours" is the test harness, not our code. The last line is::

    process_ratio=<ours/bare> acp_ratio=<ours/sdk>

Every process started is reaped before exit (the bench's leftover children,
if any, are killed and reported); each run is bounded by ``--timeout``.

Run from the repository root, with the venv active: ``python bench/backends.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import acp  # noqa: E402
from temporalio import activity  # noqa: E402
from temporalio.testing import ActivityEnvironment  # noqa: E402

from oma.activities.acp import SessionPool  # noqa: E402
from oma.activities.acp_prompt import AcpActivities  # noqa: E402
from oma.activities.process_run import process_run  # noqa: E402
from oma.core.contracts.acp import AcpPromptInput  # noqa: E402
from oma.core.contracts.process import ProcessRunInput  # noqa: E402
from oma.core.schema.backends import AcpBackendConfig, ProcessBackendConfig  # noqa: E402

AGENT_SCRIPT = os.path.join(ROOT, "tests", "support", "acp_agent.py")
PROMPT = "Summarise the benchmark input.\n" * 8
ECHO_PY = "import sys; sys.stdout.write(sys.stdin.read())"
COMMANDS = {"cat": ["/bin/cat"], "python": [sys.executable, "-c", ECHO_PY]}
WARMUP_RUNS = 3
"""Untimed runs of each side of the process comparison before timing."""

Timed = Callable[[], Awaitable[None]]


# -- measuring -------------------------------------------------------------------


class Stats:
    """Milliseconds per run of one side."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ms: list[float] = []

    @property
    def mean(self) -> float:
        return statistics.mean(self.ms)

    @property
    def median(self) -> float:
        return statistics.median(self.ms)

    def of(self, stat: str) -> float:
        return self.mean if stat == "mean" else self.median

    def line(self) -> str:
        return (
            f"  {self.name:<28} mean {self.mean:7.3f} ms  median {self.median:7.3f} ms  "
            f"min {min(self.ms):7.3f} ms  (n={len(self.ms)})"
        )


async def interleaved(
    a: Timed, b: Timed, n: int, timeout: float
) -> tuple[list[float], list[float]]:
    """Time ``n`` calls of each of ``a`` and ``b``, in ABBA order; milliseconds."""
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(n):
        order = ((0, a), (1, b)) if i % 2 == 0 else ((1, b), (0, a))
        for side, fn in order:
            start = time.perf_counter()
            await asyncio.wait_for(fn(), timeout)
            times[side].append((time.perf_counter() - start) * 1e3)
    return times


# -- (1) process spawn -------------------------------------------------------------


async def bench_process(argv: list[str], runs: int, timeout: float) -> tuple[Stats, Stats]:
    inp = ProcessRunInput(
        agent="bench",
        backend=ProcessBackendConfig(command=argv[0], args=argv[1:], input="stdin"),
        prompt=PROMPT,
    )
    env = ActivityEnvironment()
    data = PROMPT.encode()

    async def ours() -> None:
        out = await env.run(process_run, inp)
        if out.stdout != PROMPT:
            raise AssertionError(f"process_run returned {out.stdout[:80]!r}")

    async def bare() -> None:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            out, _ = await proc.communicate(data)
        finally:
            await reap(proc)
        if out != data or proc.returncode != 0:
            raise AssertionError(f"bare run: status {proc.returncode}, stdout {out[:80]!r}")

    for _ in range(WARMUP_RUNS):
        await asyncio.wait_for(ours(), timeout)
        await asyncio.wait_for(bare(), timeout)
    ours_stats, bare_stats = Stats("ours (process_run)"), Stats("bare create_subprocess_exec")
    ours_stats.ms, bare_stats.ms = await interleaved(ours, bare, runs, timeout)
    return ours_stats, bare_stats


# -- (2) ACP turn --------------------------------------------------------------------


class SdkClient:
    """The SDK client side's handlers: collects the agent's message text."""

    def __init__(self) -> None:
        self.chunks: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        content = getattr(update, "content", None)
        text = getattr(content, "text", None)
        if getattr(update, "session_update", None) == "agent_message_chunk" and text is not None:
            self.chunks.append(text)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise acp.RequestError.method_not_found("session/request_permission")


async def bench_acp(prompts: int, chunks: int, timeout: float) -> tuple[Stats, Stats]:
    turn = {"steps": [{"text": "ok"}] * chunks, "stop_reason": "end_turn"}
    expected = "ok" * chunks
    with tempfile.TemporaryDirectory(prefix="oma-bench-") as tmp:
        # One scripted turn per prompt each agent gets (first + timed). In a
        # file, not ACP_TEST_SCRIPT: a long script exceeds the limit on one
        # environment string.
        script = os.path.join(tmp, "script.json")
        with open(script, "w") as f:
            json.dump({"turns": [turn] * (prompts + 1)}, f)
        return await _bench_acp(script, expected, prompts, timeout)


async def _bench_acp(
    script: str, expected: str, prompts: int, timeout: float
) -> tuple[Stats, Stats]:
    pool = SessionPool()
    acts = AcpActivities(pool, "oma-bench-worker")
    env = ActivityEnvironment()
    backend = AcpBackendConfig(command=sys.executable, args=[AGENT_SCRIPT, script])
    inp = AcpPromptInput(run_key="bench-run", agent="bench-agent", backend=backend, prompt="hi")

    async def ours() -> None:
        out = await env.run(acts.acp_prompt, inp)
        if out.output != expected or out.stop_reason != "end_turn":
            raise AssertionError(f"acp_prompt returned {out.output!r} / {out.stop_reason}")

    client = SdkClient()
    try:
        async with acp.spawn_agent_process(
            client,
            sys.executable,
            AGENT_SCRIPT,
            script,
            # The environment ours gives the agent (the SDK's default is a trimmed one).
            env=dict(os.environ),
            # Nothing reads the agent's stderr on this side: don't let it fill a pipe.
            transport_kwargs={"stderr": asyncio.subprocess.DEVNULL},
        ) as (conn, proc):
            try:
                await asyncio.wait_for(
                    conn.initialize(protocol_version=acp.PROTOCOL_VERSION), timeout
                )
                session = await asyncio.wait_for(
                    conn.new_session(cwd=os.getcwd(), mcp_servers=[]), timeout
                )

                async def sdk() -> None:
                    client.chunks.clear()
                    response = await conn.prompt(
                        session_id=session.session_id, prompt=[acp.text_block("hi")]
                    )
                    text = "".join(client.chunks)
                    if text != expected or response.stop_reason != "end_turn":
                        raise AssertionError(f"SDK prompt got {text!r} / {response.stop_reason}")

                # The first prompt of each, untimed: ours opens its session here.
                await asyncio.wait_for(ours(), timeout)
                await asyncio.wait_for(sdk(), timeout)
                ours_stats, sdk_stats = Stats("ours (acp_prompt)"), Stats("acp SDK client")
                ours_stats.ms, sdk_stats.ms = await interleaved(ours, sdk, prompts, timeout)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()  # else the SDK waits up to 2 s for it to end by itself
    finally:
        await pool.close_all()
    return ours_stats, sdk_stats


# -- harness floor ---------------------------------------------------------------------


@activity.defn(name="bench_noop")
async def noop() -> None:
    """Does nothing."""


async def bench_harness(runs: int) -> Stats:
    env = ActivityEnvironment()
    stats = Stats("ActivityEnvironment no-op")
    for _ in range(max(runs, 100)):
        start = time.perf_counter()
        await env.run(noop)
        stats.ms.append((time.perf_counter() - start) * 1e3)
    return stats


# -- processes -------------------------------------------------------------------------


async def reap(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


def children() -> list[int]:
    """Our live child processes (zombies left out: they are only awaiting a reap)."""
    me, pids = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[1]) == me:
            pids.append(int(entry))
    return pids


def kill_leftovers() -> None:
    for pid in children():
        print(f"warning: child process {pid} outlived the benchmark; killing it", file=sys.stderr)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # started with start_new_session: its group
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# -- main ---------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> tuple[float, float]:
    # SIGINT (even when inherited as ignored) and SIGTERM cancel the run, so
    # that every cleanup below still happens.
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    argv = COMMANDS[args.command]
    stat = args.stat
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load} on {os.cpu_count()} CPUs (figures swing with it)")
    harness = await bench_harness(args.runs)

    print(
        f"(1) process spawn: {' '.join(argv[:2])}{' -c …' if len(argv) > 2 else ''}, "
        f"{len(PROMPT)} bytes on stdin, {args.runs} runs each, interleaved, "
        f"{WARMUP_RUNS} warm-up"
    )
    ours_p, bare_p = await bench_process(argv, args.runs, args.timeout)
    print(ours_p.line())
    print(bare_p.line())
    print(
        f"  extra per run: {ours_p.of(stat) - bare_p.of(stat):.3f} ms ({stat}); "
        f"ratio mean {ours_p.mean / bare_p.mean:.2f}, median {ours_p.median / bare_p.median:.2f}"
    )

    print(
        f"(2) ACP turn, second prompt on: tests/support/acp_agent.py, {args.chunks} "
        f"agent_message_chunk per turn, {args.prompts} prompts each, interleaved"
    )
    ours_a, sdk_a = await bench_acp(args.prompts, args.chunks, args.timeout)
    print(ours_a.line())
    print(sdk_a.line())
    print(
        f"  extra per prompt: {ours_a.of(stat) - sdk_a.of(stat):.3f} ms ({stat}); "
        f"ratio mean {ours_a.mean / sdk_a.mean:.2f}, median {ours_a.median / sdk_a.median:.2f}"
    )
    print(f"harness floor (part of every 'ours' figure):\n{harness.line()}")
    return ours_p.of(stat) / bare_p.of(stat), ours_a.of(stat) / sdk_a.of(stat)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="timed process runs per side")
    parser.add_argument("--prompts", type=int, default=30, help="timed ACP prompts per side")
    parser.add_argument("--chunks", type=int, default=1, help="message chunks per agent turn")
    parser.add_argument("--command", choices=sorted(COMMANDS), default="cat")
    parser.add_argument("--stat", choices=["median", "mean"], default="median")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds any one run may take")
    args = parser.parse_args()
    if not (1 <= args.runs <= 10_000 and 1 <= args.prompts <= 10_000 and 0 <= args.chunks <= 100):
        parser.error("--runs and --prompts must be 1..10000, --chunks 0..100")
    try:
        process_ratio, acp_ratio = asyncio.run(run(args))
    except asyncio.CancelledError:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        kill_leftovers()
    print(f"process_ratio={process_ratio:.2f} acp_ratio={acp_ratio:.2f}")


if __name__ == "__main__":
    main()
