"""The ``oma`` command line: ``dev``, ``worker``, ``run``, ``replay``.

Only this client side talks to Temporal. Commands that need a worker import
the top-level ``worker`` module lazily, so ``oma`` itself never imports the
workflow or activity code.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

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
        _, port = split_address(settings.address)
        err_console.print(f"[dim]starting the embedded Temporal dev server on port {port}[/]")
        server = DevServer(port=port, db_file=DEV_DB, log_file=STATE_DIR / "dev-server.log")
        await asyncio.to_thread(server.start)
        settings = wm.WorkerSettings(server.address, settings.namespace, settings.task_queue)
    try:
        client = await wm.connect(settings)
        if with_worker if with_worker is not None else server is not None:
            async with wm.build_worker(client, settings.task_queue):
                yield client, settings.task_queue
        else:
            yield client, settings.task_queue
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)


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
            err_console.print(f"[dim]started TeamRun {wid} on task queue {task_queue!r}[/]")
            result: TeamRunResult = await client.execute_workflow(
                "TeamRun", inp, id=wid, task_queue=task_queue, result_type=TeamRunResult
            )
            return result

    result = asyncio.run(go())
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
        wid = workflow_id or _workflow_id_of(raw) or history.stem
        parsed = WorkflowHistory.from_json(wid, raw)
    except OSError as e:
        raise _fail(f"cannot read {history}: {e.strerror}", 2) from None
    except (ValueError, KeyError, TypeError) as e:
        raise _fail(f"{history} is not a workflow history in JSON: {e}", 2) from None
    replayer = Replayer(
        workflows=list(_worker_module().WORKFLOWS), data_converter=pydantic_data_converter
    )

    async def go() -> Any:
        return await replayer.replay_workflow(parsed, raise_on_replay_failure=False)

    result = asyncio.run(go())
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
    asyncio.run(_worker_module().main())


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
    console.print(f"Temporal dev server at {server.address}; Web UI at {server.ui_url}")
    console.print("Worker running on task queue 'oma'. Ctrl-C stops both.")
    try:
        asyncio.run(_worker_module().main())
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
