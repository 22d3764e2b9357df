"""The ``oma`` command line: ``dev``, ``worker``, ``run``, ``replay``.

Only this client side talks to Temporal. Commands that need a worker import
the top-level ``worker`` module lazily, so ``oma`` itself never imports the
workflow or activity code.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import WorkflowAlreadyStartedError

from oma.dev_server import DevServer, is_listening, split_address
from oma.errors import OMAError
from oma.results import TeamRunResult
from oma.run_input import parse_team_run_input

app = typer.Typer(help="OMA on Temporal: multi-agent team runs as durable Temporal workflows.")
console = Console()
err_console = Console(stderr=True)

STATE_DIR = Path(".oma")
DEV_DB = STATE_DIR / "temporal.db"


def _worker_module() -> ModuleType:
    return importlib.import_module("worker")


def _fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@asynccontextmanager
async def _temporal(with_worker: bool | None) -> AsyncIterator[tuple[Any, str]]:
    """A connected client and task queue. Starts the embedded dev server (and a
    worker in this process) when nothing listens on ``TEMPORAL_ADDRESS``;
    everything started here is stopped on exit."""
    wm = _worker_module()
    settings = wm.WorkerSettings.from_env()
    server: DevServer | None = None
    if not is_listening(settings.address):
        if with_worker is False:
            raise _fail(
                f"nothing listens on {settings.address} and --no-worker leaves no worker to "
                "run the workflow: start `oma dev`, or drop --no-worker"
            )
        _, port = split_address(settings.address)
        err_console.print(f"[dim]starting the embedded Temporal dev server on port {port}[/]")
        server = DevServer(port=port, db_file=DEV_DB, log_file=STATE_DIR / "dev-server.log")
        try:
            await asyncio.to_thread(server.start)
        except OMAError as e:
            # e.g. another `oma run` holds .oma/temporal.db
            raise _fail(f"{e}; see {server.log_file}") from None
        settings = wm.WorkerSettings(server.address, settings.namespace, settings.task_queue)
    try:
        client = await _connect(wm, settings)
        if with_worker if with_worker is not None else server is not None:
            async with wm.build_worker(client, settings.task_queue):
                yield client, settings.task_queue
        else:
            yield client, settings.task_queue
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)


async def _connect(wm: ModuleType, settings: Any) -> Any:
    # a dev server that just started listens a moment before its frontend is
    # healthy; give it a few seconds
    for attempt in range(20):
        try:
            return await wm.connect(settings)
        except RuntimeError:
            if attempt == 19:
                raise
            await asyncio.sleep(0.5)


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="A run input: a TeamRun JSON file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw result as JSON.")] = False,
    workflow_id: Annotated[str | None, typer.Option(help="Workflow id (default: random).")] = None,
    worker: Annotated[
        bool | None,
        typer.Option(
            "--worker/--no-worker",
            help="Run a worker in this process "
            "(default: only when the embedded server is started).",
        ),
    ] = None,
) -> None:
    """Validate FILE, start a TeamRun, wait for it, and print the tasks and the output."""
    try:
        raw = json.loads(file.read_text())
    except OSError as e:
        raise _fail(f"cannot read {file}: {e.strerror}", 2) from None
    except UnicodeDecodeError:
        raise _fail(f"{file} is not UTF-8 text", 2) from None
    except json.JSONDecodeError as e:
        raise _fail(f"{file} is not valid JSON: {e}", 2) from None
    try:
        inp = parse_team_run_input(raw)
        from oma.dag import validate_task_graph

        validate_task_graph(inp.tasks, (a.name for a in inp.team.agents))
    except OMAError as e:
        raise _fail(f"{file}: {e}", 2) from None

    async def go() -> TeamRunResult:
        async with _temporal(worker) as (client, task_queue):
            wid = workflow_id or f"team-{inp.team.name}-{uuid.uuid4().hex[:8]}"
            try:
                handle = await client.start_workflow(
                    "TeamRun", inp, id=wid, task_queue=task_queue, result_type=TeamRunResult
                )
            except WorkflowAlreadyStartedError:
                raise _fail(f"a run with workflow id {wid!r} is already running") from None
            err_console.print(f"[dim]started TeamRun {wid} on task queue {task_queue!r}[/]")
            try:
                result: TeamRunResult = await handle.result()
            except asyncio.CancelledError:
                # Ctrl-C or SIGTERM: the run would otherwise go on (or come back
                # with the next embedded server); cancel it and let it drain
                err_console.print(f"interrupted: cancelling TeamRun {wid}")
                await _cancel_and_wait(handle)
                raise
            except WorkflowFailureError as err:
                raise _fail(f"TeamRun {wid} did not complete: {_cause(err)}") from None
            return result

    result = _run_async(go())
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        _print_result(result)
    raise typer.Exit(0 if result.success else 1)


def _print_result(result: TeamRunResult) -> None:
    table = Table(title=f"TeamRun: {result.status}")
    for col in ("task", "assignee", "status", "tokens in/out", "output or error"):
        table.add_column(col)
    for t in result.tasks:
        tr = result.task_results.get(t.id)
        usage = f"{tr.token_usage.input_tokens}/{tr.token_usage.output_tokens}" if tr else ""
        detail = (t.output if t.output is not None else t.error) or ""
        first = detail.strip().splitlines()[0] if detail.strip() else ""
        table.add_row(t.id, t.assignee, t.status.value, usage, first[:80])
    console.print(table)
    u = result.total_token_usage
    console.print(f"total tokens: {u.input_tokens} in, {u.output_tokens} out")
    sinks = _final_tasks(result)
    for t in sinks:
        console.rule(f"output of {t.id} ({t.title})")
        console.print(t.output or t.error or "", highlight=False, markup=False)


def _final_tasks(result: TeamRunResult) -> list[Any]:
    """The tasks nothing depends on: their outputs are the run's final output."""
    depended_on = {d for t in result.tasks for d in t.depends_on}
    return [t for t in result.tasks if t.id not in depended_on]


async def _cancel_and_wait(handle: Any) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(handle.cancel(), 5)
        await asyncio.wait_for(handle.result(), 15)


def _cause(err: BaseException) -> str:
    """The innermost cause of a Temporal failure, as ``TYPE: message``."""
    while err.__cause__ is not None or getattr(err, "cause", None) is not None:
        err = getattr(err, "cause", None) or err.__cause__  # type: ignore[assignment]
    kind = getattr(err, "type", None) or type(err).__name__
    return f"{kind}: {err}"


def _run_async(coro: Any) -> Any:
    """Run ``coro``; Ctrl-C and SIGTERM (a closed terminal, ``kill``, a service
    manager) both cancel it, so its cleanup runs, and exit with status 130."""

    async def cancellable() -> Any:
        main = asyncio.current_task()
        assert main is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
        return await coro

    try:
        return asyncio.run(cancellable())
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise typer.Exit(130) from None


@app.command()
def replay(
    history: Annotated[
        Path, typer.Argument(help="A history from `temporal workflow show --output json`.")
    ],
    workflow_id: Annotated[
        str | None,
        typer.Option(help="The run's workflow id (default: read from the history's children)."),
    ] = None,
) -> None:
    """Replay HISTORY against the current workflow code; exit 1 on a mismatch."""
    from temporalio.client import WorkflowHistory
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Replayer

    try:
        raw = json.loads(history.read_text())
        if not isinstance(raw, dict) or not raw.get("events"):
            raise ValueError("expected an object with a non-empty 'events' list")
        wid = workflow_id or _workflow_id_of(raw) or history.stem
        parsed = WorkflowHistory.from_json(wid, raw)
        if not parsed.events[0].HasField("workflow_execution_started_event_attributes"):
            raise ValueError("its first event is not WorkflowExecutionStarted")
    except OSError as e:
        raise _fail(f"cannot read {history}: {e.strerror}", 2) from None
    except (ValueError, KeyError, TypeError) as e:
        raise _fail(f"{history} is not a workflow history in JSON: {e}", 2) from None
    replayer = Replayer(
        workflows=list(_worker_module().WORKFLOWS), data_converter=pydantic_data_converter
    )

    async def go() -> Any:
        return await replayer.replay_workflow(parsed, raise_on_replay_failure=False)

    result = _run_async(go())
    if result.replay_failure is not None:
        raise _fail(
            f"{history} no longer replays against the current workflow code "
            f"(REPLAY_MISMATCH): {result.replay_failure}"
        )
    console.print(f"{history}: replayed {len(parsed.events)} events, no mismatch")


def _workflow_id_of(history: Any) -> str | None:
    """The exported history does not carry the workflow id, but a TeamRun names
    its children ``<workflow id>/<task id>``; read it back from the first one."""
    for event in history.get("events", []):
        attrs = event.get("startChildWorkflowExecutionInitiatedEventAttributes")
        if attrs and "/" in attrs.get("workflowId", ""):
            return str(attrs["workflowId"]).rsplit("/", 1)[0]
    return None


@app.command()
def worker() -> None:
    """Run a worker (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, OMA_TASK_QUEUE)."""
    _run_async(_worker_module().main())


@app.command()
def dev(
    port: Annotated[int, typer.Option(help="gRPC port of the dev server.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Port of the Temporal Web UI.")] = 8233,
    db: Annotated[Path, typer.Option(help="SQLite file for histories.")] = DEV_DB,
) -> None:
    """Start the embedded Temporal dev server (SQLite under .oma/) and a worker."""
    server = DevServer(
        port=port, ui_port=ui_port, db_file=db, log_file=STATE_DIR / "dev-server.log"
    )
    try:
        server.start()
    except OMAError as e:
        raise _fail(str(e)) from None
    os.environ["TEMPORAL_ADDRESS"] = server.address
    task_queue = _worker_module().WorkerSettings.from_env().task_queue
    console.print(f"Temporal dev server at {server.address}; Web UI at {server.ui_url}")
    console.print(f"Worker running on task queue {task_queue!r}. Ctrl-C stops both.")
    try:
        _run_async(_worker_module().main())
    except typer.Exit:
        pass
    finally:
        server.stop()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
