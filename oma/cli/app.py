"""The ``oma`` command line.

``run`` and ``plan`` start a ``TeamRun`` (and, when nothing listens on
``TEMPORAL_ADDRESS``, the embedded dev server and a worker); ``approvals``,
``approve``, ``reject`` and ``abort`` talk to a run that is already going, on a
server that is already running; ``dev``, ``worker`` and ``replay`` serve and
debug runs.

This module is the thin typer app only: each command imports what it needs
when it runs (``oma.cli.run``, ``oma.cli.control``, ``oma.worker``, the
Temporal SDK), so ``oma --help`` and a mistyped option answer without loading
any of it. Every command connects through ``oma.runtime.connection`` (Temporal's
environment configuration: a profile file, ``TEMPORAL_ADDRESS``,
``TEMPORAL_NAMESPACE``, credentials). The SDK's log lines go to
``.oma/oma.log`` (``oma -v``: stderr); a worker's go to its console.

The console script is ``oma.__main__``: it runs ``main`` in its own process,
or, opted in with ``OMA_FORKSERVER=1``, in a child of the warm forkserver,
which has imported the SDK and the models already (``oma.cli.forkserver``).
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    help="OMA on Temporal: multi-agent team runs as durable Temporal workflows.",
    # plain help: rich's help formatter alone costs more than `oma --help` may take
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

DEV_DB = Path(".oma") / "temporal.db"


@app.callback()
def options(
    verbose: Annotated[
        bool,
        typer.Option("-v", "--verbose", help="Show the Temporal SDK's log lines on stderr."),
    ] = False,
) -> None:
    """OMA on Temporal: multi-agent team runs as durable Temporal workflows."""
    from oma.cli.common import Settings

    Settings.verbose = verbose


def _fail(message: str, code: int = 1) -> typer.Exit:
    from oma.cli.common import fail

    return fail(message, code)


def _run_async(coro: Any) -> Any:
    from oma.cli.common import run_async

    return run_async(coro)


# -- run and plan ----------------------------------------------------------

WorkerOption = Annotated[
    bool | None,
    typer.Option(
        "--worker/--no-worker",
        help="Run a worker in this process (default: only when the embedded server is started).",
    ),
]
WorkflowIdOption = Annotated[str | None, typer.Option(help="Workflow id (default: random).")]


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="A run input: a TeamRun JSON file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw result as JSON.")] = False,
    workflow_id: WorkflowIdOption = None,
    worker: WorkerOption = None,
) -> None:
    """Validate FILE, start a TeamRun, follow its events, and print the tasks and the output.

    FILE has a team and exactly one of goal, tasks or plan. Exits 0 when the
    run succeeded, 1 when it did not, 2 when FILE is invalid, 130 when
    interrupted (the run is cancelled).
    """
    from oma.cli.run import run_command

    run_command(file, as_json, workflow_id, worker)


@app.command()
def plan(
    file: Annotated[
        Path, typer.Argument(help="A goal run input: a TeamRun JSON file with 'goal'.")
    ],
    workflow_id: WorkflowIdOption = None,
    worker: WorkerOption = None,
) -> None:
    """Have the coordinator plan FILE's goal, run nothing, and print the plan as JSON.

    The printed plan artifact runs later as {"team": ..., "plan": <it>}.
    Progress goes to stderr. Exits 2 when FILE has no goal.
    """
    from oma.cli.run import plan_command

    plan_command(file, workflow_id, worker)


# -- approvals and abort ---------------------------------------------------


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name and no USER/LOGNAME
        return ""


ReviewerOption = Annotated[
    str,
    typer.Option(
        help="Your reviewer id, recorded with the decision (default: your login name).",
        default_factory=_current_user,
        show_default=False,
    ),
]
DisplayNameOption = Annotated[str | None, typer.Option(help="Your name, as a person reads it.")]
CommentOption = Annotated[str | None, typer.Option(help="Why, recorded with the decision.")]
WorkflowIdArgument = Annotated[str, typer.Argument(help="The TeamRun's workflow id.")]


@app.command()
def approvals(workflow_id: WorkflowIdArgument) -> None:
    """List the open approval requests of a running TeamRun (the pending_approvals query)."""
    from oma.cli.control import approvals as list_approvals

    list_approvals(workflow_id)


@app.command()
def approve(
    workflow_id: WorkflowIdArgument,
    request_id: Annotated[str, typer.Argument(help="The request to approve (`oma approvals`).")],
    reviewer: ReviewerOption,
    display_name: DisplayNameOption = None,
    comment: CommentOption = None,
) -> None:
    """Approve an open approval request (the decide update); prints what was recorded."""
    from oma.cli.control import decide

    decide(workflow_id, request_id, "approve", reviewer, display_name, comment)


@app.command()
def reject(
    workflow_id: WorkflowIdArgument,
    request_id: Annotated[str, typer.Argument(help="The request to reject (`oma approvals`).")],
    reviewer: ReviewerOption,
    display_name: DisplayNameOption = None,
    comment: CommentOption = None,
) -> None:
    """Reject an open approval request (the decide update).

    A rejected plan, round or dispatch stops the run, which ends rejected; a
    rejected tool call is not run, its agent reads why, and the run goes on.
    """
    from oma.cli.control import decide

    decide(workflow_id, request_id, "reject", reviewer, display_name, comment)


@app.command()
def abort(
    workflow_id: WorkflowIdArgument,
    reason: Annotated[str | None, typer.Option(help="Why, recorded in the run.")] = None,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait for the run to end and print it.")
    ] = False,
) -> None:
    """Abort a running TeamRun gracefully (the abort signal).

    No new task starts, tasks in flight finish, the rest are skipped, and the
    run ends cancelled.
    """
    from oma.cli.control import abort as send_abort

    send_abort(workflow_id, reason, wait)


# -- show ------------------------------------------------------------------


@app.command()
def show(
    workflow_id: Annotated[
        str | None,
        typer.Argument(help="The TeamRun's workflow id (with --history: which one to show)."),
    ] = None,
    history: Annotated[
        list[Path] | None,
        typer.Option(
            "--history",
            help="An exported history (`temporal workflow show --output json`) or a directory "
            "of them, instead of a server; repeat for the children's.",
        ),
    ] = None,
    html: Annotated[
        Path | None, typer.Option(help="Write one self-contained HTML page to this file.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the view as JSON.")] = False,
) -> None:
    """Show a TeamRun: its task DAG with statuses, titles, assignees, timings and errors.

    Read from the Temporal histories of the run and its children (not from
    queries: it works on a closed run, and on exported histories with
    --history). --html FILE writes the DAG and a waterfall of tasks, model
    turns, tool calls, process runs and ACP turns as one page.
    """
    from oma.cli.show import show_command

    show_command(workflow_id, history or [], html, as_json)


# -- replay, worker, dev ---------------------------------------------------


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

    from oma.cli.common import console
    from oma.core.schema.errors import OMAError, ReplayMismatchError
    from oma.runtime import plugin

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
    try:
        _check_codec_keys(parsed)
        replayer = plugin.replayer()
    except OMAError as e:
        raise _fail(str(e)) from None

    async def go() -> Any:
        return await replayer.replay_workflow(parsed, raise_on_replay_failure=False)

    result = _run_async(go())
    if result.replay_failure is not None:
        mismatch = ReplayMismatchError(
            f"{history} no longer replays against the current workflow code: "
            f"{result.replay_failure}"
        )
        raise _fail(str(mismatch))
    console.print(f"{history}: replayed {len(parsed.events)} events, no mismatch")


def _check_codec_keys(history: Any) -> None:
    """Raise ``CodecKeyMissingError`` when the history's input is encrypted with
    a key ``OMA_CODEC_KEYS`` does not hold: the replay would otherwise report a
    mismatch (the run failing on an unreadable input) instead of the cause."""
    from oma.core.schema.errors import CodecKeyMissingError
    from oma.runtime.codec import AesGcmCodec, keys_from_env, undecryptable_reason

    started = history.events[0].workflow_execution_started_event_attributes
    for payload in started.input.payloads:
        keys = keys_from_env()
        shown = AesGcmCodec(keys).decrypt(payload) if keys else payload
        reason = undecryptable_reason(shown)
        if reason is not None:
            raise CodecKeyMissingError(
                f"cannot replay: {reason}; set OMA_CODEC_KEYS (or OMA_CODEC_KEYS_FILE) "
                "to a list holding that key"
            )


def _workflow_id_of(history: Any) -> str | None:
    """The exported history does not carry the workflow id, but a TeamRun names
    its children after it (``<id>/<task id>``, ``<id>/coordinator/<step>``);
    read it back from the first one."""
    from oma.core.contracts.workflow_ids import team_run_id_of

    for event in history.get("events", []):
        attrs = event.get("startChildWorkflowExecutionInitiatedEventAttributes")
        if attrs:
            wid = team_run_id_of(str(attrs.get("workflowId", "")))
            if wid:
                return wid
    return None


@app.command()
def worker() -> None:
    """Run a worker (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE or a TEMPORAL_PROFILE; OMA_TASK_QUEUE)."""
    from oma.cli.common import connection, route_sdk_logs
    from oma.worker import main as worker_main

    route_sdk_logs(to_stderr=True)  # a worker's console is its log
    _run_async(worker_main(connection()))


@app.command()
def dev(
    port: Annotated[int, typer.Option(help="gRPC port of the dev server.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Port of the Temporal Web UI.")] = 8233,
    db: Annotated[Path, typer.Option(help="SQLite file for histories.")] = DEV_DB,
) -> None:
    """Start the embedded Temporal dev server (SQLite under .oma/) and a worker."""
    from oma.cli.common import STATE_DIR, connection, console, route_sdk_logs
    from oma.core.schema.errors import OMAError
    from oma.runtime.dev_server import DevServer
    from oma.worker import main as worker_main

    route_sdk_logs(to_stderr=True)  # a worker's console is its log
    conn = connection()
    server = DevServer(
        port=port,
        ui_port=ui_port,
        db_file=db,
        log_file=STATE_DIR / "dev-server.log",
        namespaces=[conn.namespace],
        started_by="oma dev",
    )
    try:
        server.start()
    except OMAError as e:
        raise _fail(str(e)) from None
    conn = conn.at(server.address)
    console.print(
        f"Temporal dev server at {server.address} (namespace {conn.namespace!r}); "
        f"Web UI at {server.ui_url}"
    )
    console.print(f"Worker running on task queue {conn.task_queue!r}. Ctrl-C stops both.")
    try:
        _run_async(worker_main(conn))
    except typer.Exit:
        pass
    finally:
        server.stop()


@app.command("codec-key")
def codec_key(
    key_id: Annotated[
        str | None, typer.Option(help="The key's id (default: k and 8 random hex digits).")
    ] = None,
) -> None:
    """Print a new AES-256 key entry, key_id:base64_key, for OMA_CODEC_KEYS.

    To rotate, put the new entry first and keep the old ones after it:
    OMA_CODEC_KEYS="<new>,<old>" (docs/security.md)."""
    from oma.runtime.codec import new_key

    print(new_key(key_id))


@app.command("codec-server")
def codec_server(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8081,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    ui_origin: Annotated[
        str | None,
        typer.Option(help="The Web UI's origin allowed by CORS, e.g. http://localhost:8233."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Require Authorization: Bearer TOKEN (default: OMA_CODEC_SERVER_TOKEN, if "
            "set); an empty one is refused.",
        ),
    ] = None,
) -> None:
    """Serve Temporal's codec endpoints (/encode, /decode) with OMA_CODEC_KEYS,
    for the Web UI's Codec Server setting and `temporal ... --codec-endpoint`."""
    import asyncio

    from oma.cli.common import console
    from oma.core.schema.errors import OMAError
    from oma.runtime.codec import AesGcmCodec, keys_from_env
    from oma.runtime.codec_server import codec_app, serve

    try:
        keys = keys_from_env()
    except OMAError as e:
        raise _fail(str(e)) from None
    if keys is None:
        raise _fail("oma codec-server needs OMA_CODEC_KEYS (or OMA_CODEC_KEYS_FILE)", 2)
    # an empty token (a `--token "$TOKEN"` of an unset variable) must not
    # quietly turn authentication off: only leaving both unset does
    source = "--token"
    if token is None and "OMA_CODEC_SERVER_TOKEN" in os.environ:
        source, token = "OMA_CODEC_SERVER_TOKEN", os.environ["OMA_CODEC_SERVER_TOKEN"]
    if token is not None and not token.strip():
        raise _fail(
            f"{source} is empty: give the bearer token callers must send, or leave "
            "--token and OMA_CODEC_SERVER_TOKEN unset to serve without one",
            2,
        )
    token = token.strip() if token is not None else None
    app = codec_app(AesGcmCodec(keys), ui_origin=ui_origin, token=token)

    async def go() -> None:
        runner = await serve(app, host, port)
        try:
            ids = ", ".join(k.key_id for k in keys)
            console.print(
                f"OMA codec server at http://{host}:{port} (keys {ids}"
                f"{'; bearer token required' if token else ''}"
                f"{f'; CORS for {ui_origin}' if ui_origin else ''})"
            )
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    _run_async(go())


def main() -> None:
    """Run the command in ``sys.argv`` (in the ``oma`` process; the forkserver's
    child runs ``invoke`` as that process's stand-in: ``oma.__main__``).

    Leaves with ``os._exit`` once the command has finished and its output is
    flushed: with a client connected, the SDK's Rust core can crash while the
    interpreter tears down (temporalio/sdk-python#300), which would turn a
    command that succeeded into exit status 134.
    """
    os._exit(invoke())


def invoke() -> int:
    """Run the command in ``sys.argv``; its exit status, once its output is flushed.

    A reader that left early (``oma show --json | head``) ends the command
    quietly with status 1, as click does when a write fails so, whether the
    output broke mid-command or at the last flush: no traceback.
    """
    try:
        try:
            app()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        sys.stdout.flush()
    except BrokenPipeError:
        # what is left in the buffer would fail again at every later flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    main()
