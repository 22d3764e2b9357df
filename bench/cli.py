"""What the ``oma`` command itself costs: a run's overhead, ``oma --help``,
and what ``from oma import Agent, OpenMultiAgent`` costs.

Starts one embedded dev server and one ``oma worker`` subprocess (on a task
queue of its own, in a scratch copy of ``examples/``), runs one warm-up, then
``--repeat`` times, in both modes side by side (the default, each command in
its own process; and opted in to a warm forkserver, ``OMA_FORKSERVER=1``,
``oma.cli.forkserver``):

- ``oma run --no-worker --json --workflow-id ID examples/goal-team-scripted.json``
  (a scripted coordinator, an LLM planner and reviewer on scripted responses,
  a local-process coder): its wall time, and the span of the run itself, from
  the ``TeamRun``'s start to its close as the server recorded them
  (``describe``). The run's overhead is the wall time minus that span: the
  CLI's start-up, connecting, validating, starting the workflow, following
  it, printing the result and leaving.
- ``oma --help``: its wall time.
- ``python -c "from oma import Agent, OpenMultiAgent"`` (``API_IMPORT``): the
  CPU seconds it takes (user + system, interpreter start-up included), as the
  library's users pay them: compiled bytecode (a scratch
  ``PYTHONPYCACHEPREFIX``, filled by the warm-up, even when
  ``PYTHONDONTWRITEBYTECODE`` is set). Default mode only: it runs no ``oma``.

The forkserver lives in a scratch ``XDG_RUNTIME_DIR`` and is stopped at the
end. Prints one line per repetition, then the medians; the last line is the
default mode's::

    run_overhead_s=<median> help_s=<median> import_s=<median>

(``import_s`` in CPU seconds; the others in wall seconds.)

On a small machine shared with other work the figures move with the load:
compare medians of several repetitions (``--repeat``).

Run from the repository root, with the venv active: ``python bench/cli.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from oma.runtime.connection import Connection  # noqa: E402
from oma.runtime.dev_server import DevServer, free_port  # noqa: E402

OMA = str(Path(sys.executable).parent / "oma")
TASK_QUEUE = "oma-bench-cli"
EXAMPLE = "examples/goal-team-scripted.json"
API_IMPORT = "from oma import Agent, OpenMultiAgent"
"""The library's own entry point (README, "Python API")."""


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of ``cmd``, and its stderr; raises when it fails."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    return wall, proc.stderr


def cpu_seconds(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    """User + system CPU seconds of ``cmd`` (and of any child it waited for);
    raises when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    timed(cmd, cwd, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


async def run_span(address: str, workflow_id: str) -> float:
    """Seconds from the ``TeamRun``'s start to its close, as the server has them."""
    client = await Connection.local(address, TASK_QUEUE).connect()
    described = await client.get_workflow_handle(workflow_id).describe()
    assert described.close_time is not None, f"{workflow_id} has not closed"
    return (described.close_time - described.start_time).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions of each (default 5)")
    args = parser.parse_args()

    project = Path(tempfile.mkdtemp(prefix="oma-bench-cli-"))
    shutil.copytree(ROOT / "examples", project / "examples")
    (project / "scratch").mkdir()
    runtime = project / "runtime"
    runtime.mkdir(mode=0o700)
    server = DevServer(port=free_port(), log_file=project / "dev-server.log").start()
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": server.address,
        "OMA_TASK_QUEUE": TASK_QUEUE,
        "XDG_RUNTIME_DIR": str(runtime),
    }
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("OMA_FORKSERVER", None)
    modes = {"own process": env, "forkserver": {**env, "OMA_FORKSERVER": "1"}}
    imports = [sys.executable, "-c", API_IMPORT]
    import_env = {**env, "PYTHONPYCACHEPREFIX": str(project / "pycache")}
    import_env.pop("PYTHONDONTWRITEBYTECODE", None)
    worker = subprocess.Popen(
        [OMA, "worker"], cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        figures: dict[str, tuple[list[float], list[float]]] = {m: ([], []) for m in modes}
        import_s: list[float] = []
        for i in range(args.repeat + 1):  # the first is a warm-up (it starts the forkserver)
            for mode, mode_env in modes.items():
                workflow_id = f"bench-cli-{i}-{uuid.uuid4().hex[:8]}"
                cmd = [OMA, "run", EXAMPLE, "--no-worker", "--json", "--workflow-id", workflow_id]
                wall, _ = timed(cmd, project, mode_env)
                span = asyncio.run(run_span(server.address, workflow_id))
                help_s, _ = timed([OMA, "--help"], project, mode_env)
                if i == 0:
                    if mode == "own process":
                        cpu_seconds(imports, project, import_env)  # compiles the bytecode
                    if mode == "forkserver":
                        wait_for_forkserver(runtime)
                    continue
                figures[mode][0].append(wall - span)
                figures[mode][1].append(help_s)
                imported = ""
                if mode == "own process":
                    import_s.append(cpu_seconds(imports, project, import_env))
                    imported = f"; {API_IMPORT} {import_s[-1]:.3f} s of CPU"
                print(
                    f"run {i} ({mode}): wall {wall:.3f} s, run span {span:.3f} s, "
                    f"overhead {wall - span:.3f} s; oma --help {help_s:.3f} s{imported}",
                    flush=True,
                )
        overheads, helps = figures["forkserver"]
        print(
            f"forkserver (OMA_FORKSERVER=1): run_overhead_s={statistics.median(overheads):.3f} "
            f"help_s={statistics.median(helps):.3f}"
        )
        overheads, helps = figures["own process"]
        print(
            f"run_overhead_s={statistics.median(overheads):.3f} "
            f"help_s={statistics.median(helps):.3f} import_s={statistics.median(import_s):.3f}"
        )
    finally:
        worker.terminate()
        worker.wait(10)
        server.stop()
        for pid_file in (runtime / "oma").glob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
        shutil.rmtree(project, ignore_errors=True)


def wait_for_forkserver(runtime: Path) -> None:
    """Until the forkserver the warm-up started listens (it imports first)."""
    deadline = time.monotonic() + 30
    while not list((runtime / "oma").glob("*.sock")):
        if time.monotonic() > deadline:
            raise SystemExit(f"no forkserver listens under {runtime}: see its .log there")
        time.sleep(0.1)


if __name__ == "__main__":
    main()
