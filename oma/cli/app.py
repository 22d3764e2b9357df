"""The ``oma`` command line.

``run`` and ``plan`` start a ``TeamRun`` (and, when nothing listens on
``TEMPORAL_ADDRESS``, the embedded dev server and a worker); ``approvals``,
``approve``, ``reject`` and ``abort`` talk to a run that is already going, on a
server that is already running; ``dev``, ``worker`` and ``replay`` serve and
debug runs.

This module is the thin typer app only: each command imports what it needs
when it runs (``oma.cli.run``, ``oma.cli.control``, ``oma.cli.replay``, ``oma.worker``, the
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
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from oma.cli._help import OmaTyper

app = OmaTyper(
    help="OMA on Temporal: multi-agent team runs as durable Temporal workflows.",
    # plain help: rich's help formatter alone costs more than `oma --help` may take
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

DEV_DB = Path(".oma") / "temporal.db"


def _print_version(asked: bool) -> None:
    if asked:
        from oma.cli._help import package_version

        print(f"oma {package_version()}")
        raise typer.Exit()


@app.callback()
def options(
    verbose: Annotated[
        bool,
        typer.Option("-v", "--verbose", help="Show the Temporal SDK's log lines on stderr."),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print oma's version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
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
PathOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--path",
        help="A directory this command's worker imports the run's custom tools, hooks and "
        "evaluators from (repeatable; before OMA_PATH's and the working directory, which are "
        "searched too). oma run, plan and fork run a worker only when they start the embedded "
        "server: with a worker already up, give it to that worker.",
        exists=True,
        file_okay=False,
        resolve_path=True,
    ),
]


def _user_code(paths: list[Path] | None) -> None:
    from oma.cli.common import add_user_code_paths

    add_user_code_paths(paths or ())


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="A run input: a TeamRun JSON file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw result as JSON.")] = False,
    workflow_id: WorkflowIdOption = None,
    worker: WorkerOption = None,
    path: PathOption = None,
    reuse: Annotated[
        str | None,
        typer.Option(
            help="Keep the outputs of this run's tasks that would come out the same "
            "(options.reuse: same task, agent config and upstream; docs/fork.md).",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="With --reuse: print, for every task, reused or run again and why, and the "
            "estimated cost of what runs again; start nothing.",
        ),
    ] = False,
    items: Annotated[
        Path | None,
        typer.Option(
            help="A JSONL file, one JSON object a line: the items FILE's task_template makes "
            "one task each of (docs/orchestration.md, 'Many tasks from one template').",
        ),
    ] = None,
) -> None:
    """Validate FILE, start a TeamRun, follow its events, and print the tasks and the output.

    FILE has a team and exactly one of goal, tasks (and, or instead, a
    task_template with its items, or --items) or plan. Its custom tools
    and hooks are imported, by the worker in this process (when it starts the
    embedded server), from the --path directories, OMA_PATH's and the working
    directory; a worker already up imports them from its own. Exits 0 when the run
    succeeded, 1 when it did not, 2 when FILE is invalid, 130 when
    interrupted (the run is cancelled).
    """
    from oma.cli.run import run_command

    _user_code(path)
    run_command(file, as_json, workflow_id, worker, reuse, dry_run, items)


@app.command()
def plan(
    file: Annotated[
        Path, typer.Argument(help="A goal run input: a TeamRun JSON file with 'goal'.")
    ],
    workflow_id: WorkflowIdOption = None,
    worker: WorkerOption = None,
    path: PathOption = None,
) -> None:
    """Have the coordinator plan FILE's goal, run nothing, and print the plan as JSON.

    The printed plan artifact runs later as {"team": ..., "plan": <it>}.
    Progress goes to stderr. Exits 2 when FILE has no goal.
    """
    from oma.cli.run import plan_command

    _user_code(path)
    plan_command(file, workflow_id, worker)


@app.command()
def fork(
    run_id: Annotated[
        str | None,
        typer.Argument(help="The TeamRun to fork (with --history: default, read from the file)."),
    ] = None,
    rerun: Annotated[
        list[str] | None,
        typer.Option(
            "--from",
            help="Run this task again, and everything downstream of it (repeatable; default: "
            "every task that did not complete).",
        ),
    ] = None,
    team: Annotated[
        Path | None,
        typer.Option(help="A team JSON file (or a run input's) replacing the source's team."),
    ] = None,
    options: Annotated[
        Path | None,
        typer.Option(help="An options JSON file: the options it gives replace the source's."),
    ] = None,
    edit: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="TASK.FIELD=VALUE: change a task (it runs again), e.g. "
            "t3.description='...' (repeatable).",
        ),
    ] = None,
    history: Annotated[
        Path | None,
        typer.Option(
            help="Fork the run an exported history records (`temporal workflow show "
            "--output json`) instead of one on the server.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw result as JSON.")] = False,
    workflow_id: Annotated[
        str | None, typer.Option(help="The fork's workflow id (default: <run id>-fork-<random>).")
    ] = None,
    worker: WorkerOption = None,
    path: PathOption = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print, for every task, kept or run again and why, and the estimated cost of "
            "what runs again; start nothing.",
        ),
    ] = False,
    models: Annotated[
        str | None,
        typer.Option(
            help="recorded: answer each model turn whose request the source recorded with its "
            "recorded answer, calling no provider (options.models); live: call them.",
        ),
    ] = None,
    on_miss: Annotated[
        str | None,
        typer.Option(
            help="With --models recorded: strict (default) fails a task whose turn was not "
            "recorded (RECORDING_MISS); fallback calls the live provider.",
        ),
    ] = None,
) -> None:
    """Fork a TeamRun: a new run keeps every task's outcome but those run again.

    The tasks named with --from, the tasks that did not complete, the tasks
    --set changes and everything downstream of them run again with the
    current code; the others keep their outputs, usage and shared memory
    (the source run is never changed). Exits 0 when the fork succeeded, 1
    when it did not, 2 when it cannot be made (docs/fork.md).
    """
    from oma.cli.fork import fork_command

    _user_code(path)
    fork_command(
        run_id,
        rerun or [],
        team,
        options,
        edit or [],
        history,
        as_json,
        workflow_id,
        worker,
        dry_run,
        models,
        on_miss,
    )


@app.command()
def acp(
    team: Annotated[
        Path | None,
        typer.Option(
            "--team",
            help="The team: a run input without goal or tasks (default: oma.json, else "
            ".oma/team.json, in each session's directory).",
            dir_okay=False,
        ),
    ] = None,
    task_queue: Annotated[
        str | None,
        typer.Option(
            "--task-queue", help="The task queue runs start on (default: OMA_TASK_QUEUE)."
        ),
    ] = None,
) -> None:
    """Serve the team as an Agent Client Protocol agent on stdin/stdout, for an editor.

    Each session is a TeamRun, each prompt its goal; plans, tasks, approvals
    and costs show in the editor, and a run outlives the editor (session/load
    reattaches). Connects as `oma run` does; logs go to stderr, never stdout.
    See docs/editors.md.
    """
    from oma.acp import acp_command
    from oma.cli.common import Settings

    raise typer.Exit(acp_command(team, task_queue, Settings.verbose))


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
def approvals(
    workflow_id: Annotated[
        str | None,
        typer.Argument(help="The TeamRun's workflow id (default: every run that waits)."),
    ] = None,
    full: Annotated[
        bool,
        typer.Option("--full", help="Print the whole output of each task a dispatch would act on."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the requests as JSON.")] = False,
) -> None:
    """List open approval requests: of one running TeamRun (the pending_approvals query),
    what each reviews and, for a dispatch, its dependencies' outputs (previews; --full:
    whole); without WORKFLOW_ID, every open request on the server: run, request, what it
    approves, since when (the runs whose OmaStatus is awaiting_approval)."""
    if workflow_id is None:
        if full:
            raise _fail("--full needs a WORKFLOW_ID: the run whose outputs to print", 2)
        from oma.cli.listing import approvals_command

        approvals_command(as_json)
        return
    from oma.cli.control import approvals as list_approvals

    list_approvals(workflow_id, full, as_json)


@app.command("list")
def list_runs(
    status: Annotated[
        str | None,
        typer.Option(
            help="Only runs with this OmaStatus: running, awaiting_approval, completed, "
            "failed, rejected, cancelled, planned, continued_as_new."
        ),
    ] = None,
    team: Annotated[str | None, typer.Option(help="Only runs of this team (OmaTeam).")] = None,
    limit: Annotated[int, typer.Option(help="How many runs, at most.", min=1, max=1000)] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs as JSON.")] = False,
) -> None:
    """List the newest team runs on the server, newest first: workflow id, status
    (OmaStatus), team, start time. Their AgentRun children are left out."""
    from oma.cli.listing import list_command

    list_command(status, team, limit, as_json)


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
    task: Annotated[
        str | None,
        typer.Option("--task", help="Print this task whole: its facts, output and error."),
    ] = None,
) -> None:
    """Show a TeamRun: its task DAG with statuses, titles, assignees, timings, outputs and
    errors.

    Read from the Temporal histories of the run and its children (not from
    queries: it works on a closed run, and on exported histories with
    --history). --html FILE writes the DAG and a waterfall of tasks, model
    turns, tool calls, process runs and ACP turns as one page. A sharded run
    (more than 10,000 tasks) lists its shards: `oma show RUN/shard/N` shows
    a shard's tasks.
    """
    from oma.cli.show import show_command

    show_command(workflow_id, history or [], html, as_json, task)


# -- replay, worker, dev ---------------------------------------------------


@app.command()
def replay(
    run_or_file: Annotated[
        str | None,
        typer.Argument(
            help="A history from `temporal workflow show --output json`, or a workflow id "
            "on the server."
        ),
    ] = None,
    workflow_id: Annotated[
        str | None,
        typer.Option(help="The run's workflow id (default: read from the history's children)."),
    ] = None,
    temporal_run_id: Annotated[
        str | None,
        typer.Option("--run-id", help="With a workflow id: this execution (default: latest)."),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(
            help="Print the state there: an event id, task_start:TASK, task_complete:TASK, "
            "approval:REQUEST_ID, plan or synthesis."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="--at, --trace: as JSON.")] = False,
    trace: Annotated[
        bool, typer.Option(help="Print what the code decided at each workflow task.")
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(help="One thread, no deadlock timeout: breakpoint() and an IDE stop."),
    ] = False,
    break_at: Annotated[
        str | None,
        typer.Option(help="With --debug: stop in the workflow code at this point (as --at)."),
    ] = None,
    ide: Annotated[
        bool,
        typer.Option(help="Replay for the Temporal Workflow Replay Debugger (VS Code)."),
    ] = False,
    open_runs: Annotated[
        bool,
        typer.Option(
            "--open",
            help="Replay every open TeamRun and AgentRun on the server instead of one run.",
        ),
    ] = False,
    query: Annotated[
        str | None,
        typer.Option(
            help="With --open: only the runs this visibility query also matches "
            "(e.g. 'TaskQueue=\"oma\"').",
        ),
    ] = None,
    limit: Annotated[
        int,
        typer.Option(help="With --open: replay at most this many runs (1 to 10000).", min=1),
    ] = 1000,
) -> None:
    """Replay a run against the current workflow code; exit 1 on a mismatch, saying
    where and why. --at, --trace, --debug: replay to debug (docs/debugging.md).
    --open: every open run on the server, the check before new workflow code
    serves runs in flight (docs/operations.md)."""
    from oma.cli.debug.command import ReplayAsked, replay_debug

    run = run_or_file
    asked = ReplayAsked(run, workflow_id, temporal_run_id, at, as_json, trace, debug, break_at, ide)
    if open_runs:
        if run is not None or workflow_id or temporal_run_id or asked.debugging or as_json:
            raise _fail("--open replays the open runs, alone: give no run and no other mode", 2)
        from oma.cli.replay import replay_open

        return replay_open(query, limit)
    if query is not None or limit != 1000:
        raise _fail("--query and --limit go with --open", 2)
    if run is None or asked.debugging or not Path(run).is_file():
        return replay_debug(asked)
    from oma.cli.replay import replay_file

    replay_file(Path(run), workflow_id)


@app.command()
def worker(path: PathOption = None) -> None:
    """Run a worker (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE or a TEMPORAL_PROFILE; OMA_TASK_QUEUE).

    With TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_WORKER_BUILD_ID it serves that
    build of a Worker Deployment, its runs pinned to it (docs/operations.md).

    Custom tools, hooks and evaluators are imported from the --path
    directories, OMA_PATH's and the working directory (docs/tools.md)."""
    deployment = _worker_deployment()
    from oma.cli.common import connection, route_sdk_logs
    from oma.worker import main as worker_main

    _user_code(path)
    route_sdk_logs(to_stderr=True)  # a worker's console is its log
    _run_async(worker_main(connection(), deployment))


def _worker_deployment() -> Any:
    """The worker's Worker Deployment Version (``TEMPORAL_DEPLOYMENT_NAME``,
    ``TEMPORAL_WORKER_BUILD_ID``: docs/operations.md), or ``None``; a half-set
    or refused one raises ``WorkerDeploymentInvalidError`` (one line, exit 1),
    before anything connects."""
    from oma.runtime.deployment import deployment_from_env

    return deployment_from_env()


PORT: dict[str, Any] = {"min": 1, "max": 65535}
"""A TCP port option's range: out of it, click says so (exit 2), no traceback."""


CODEC_TOKEN_IN_DEV = (
    "oma dev's codec server cannot require OMA_CODEC_SERVER_TOKEN: the dev server's Web UI "
    "sends no bearer token of ours (it passes only its own login's access token, and only "
    "to an https endpoint), so every payload would stay encrypted. oma dev serves the codec "
    "endpoint on 127.0.0.1 without a token instead (docs/security.md says why that is "
    "safe). Unset OMA_CODEC_SERVER_TOKEN, or start `oma dev --no-codec-server` and run "
    "`oma codec-server --token ...` yourself for the temporal CLI"
)


@app.command()
def dev(
    port: Annotated[int, typer.Option(help="gRPC port of the dev server.", **PORT)] = 7233,
    ui_port: Annotated[int, typer.Option(help="Port of the Temporal Web UI.", **PORT)] = 8233,
    db: Annotated[Path, typer.Option(help="SQLite file for histories.")] = DEV_DB,
    path: PathOption = None,
    codec_server: Annotated[
        bool | None,
        typer.Option(
            "--codec-server/--no-codec-server",
            help="Serve the codec endpoint on 127.0.0.1 and point the Web UI at it, so it "
            "shows stored and encrypted payloads as they were sent (default: on).",
        ),
    ] = None,
    codec_port: Annotated[
        int | None,
        typer.Option(
            help="Port of the codec endpoint (default: 8081, or a free port when 8081 is taken).",
            **PORT,
        ),
    ] = None,
) -> None:
    """Start the embedded Temporal dev server (SQLite under .oma/, large payloads in
    .oma/payloads/) and a worker, and a codec endpoint the Web UI reads stored
    (and, with OMA_CODEC_KEYS, encrypted) payloads through.

    The worker imports custom tools, hooks and evaluators from the --path
    directories, OMA_PATH's and the working directory (docs/tools.md)."""
    # refused before the worker's heavy imports: a misconfiguration answers at once
    deployment = _worker_deployment()
    if codec_port is not None and codec_port in (port, ui_port):
        which = "the dev server's (--port)" if codec_port == port else "the Web UI's (--ui-port)"
        raise _fail(f"--codec-port {codec_port} is {which}: give the codec endpoint another", 2)

    from oma.cli.common import STATE_DIR, connection, console, route_sdk_logs
    from oma.runtime.dev_server import DevServer

    conn = connection()
    store = conn.at(conn.address, db).store
    codec = _dev_codec_app(ui_port, store) if codec_server is not False else None

    from oma.worker import main as worker_main

    _user_code(path)
    route_sdk_logs(to_stderr=True)  # a worker's console is its log
    sock = _codec_socket(codec_port) if codec is not None else None
    codec_url = f"http://127.0.0.1:{sock.getsockname()[1]}" if sock is not None else None
    server = DevServer(
        port=port,
        ui_port=ui_port,
        db_file=db,
        log_file=STATE_DIR / "dev-server.log",
        namespaces=[conn.namespace],
        started_by="oma dev",
        ui_codec_endpoint=codec_url,
    )
    try:
        server.start()
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    conn = conn.at(server.address, db)
    console.print(
        f"Temporal dev server at {server.address} (namespace {conn.namespace!r}); "
        f"Web UI at {server.ui_url}"
    )
    if codec_url:
        console.print(f"Codec endpoint at {codec_url}: the Web UI shows payloads decoded.")
    if store is not None:
        console.print(
            f"Payloads of {store.threshold_bytes // 1024} KiB or more are kept in {store.url}."
        )
    console.print(f"Worker running on task queue {conn.task_queue!r}. Ctrl-C stops both.")

    async def go() -> None:
        from oma.runtime.codec_server import serve_on

        runner = await serve_on(codec, sock) if codec is not None and sock is not None else None
        try:
            await worker_main(conn, deployment)
        finally:
            if runner is not None:
                await runner.cleanup()

    try:
        _run_async(go())
    except typer.Exit:
        pass
    finally:
        server.stop()


DEFAULT_CODEC_PORT = 8081


def _codec_socket(port: int | None) -> Any:
    """A socket bound on 127.0.0.1 for ``oma dev``'s codec endpoint, before the
    dev server starts (it is told the endpoint's URL): ``port``, refused when
    taken; with none, ``DEFAULT_CODEC_PORT``, or a free port when that is
    taken (two ``oma dev`` on one machine)."""
    import errno
    import socket

    def bound(at: int) -> socket.socket:
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", at))
        except OSError:
            sock.close()
            raise
        return sock

    try:
        return bound(DEFAULT_CODEC_PORT if port is None else port)
    except OSError as err:
        if err.errno != errno.EADDRINUSE:
            raise _fail(f"cannot listen on 127.0.0.1:{port}: {err.strerror}") from None
        if port is not None:
            raise _fail(
                f"port {port} is already in use: choose the codec endpoint's port with "
                "--codec-port, or start without it (--no-codec-server)"
            ) from None
    return bound(0)


def _dev_codec_app(ui_port: int, store: Any) -> Any:
    """The codec endpoint ``oma dev`` serves (an aiohttp application): it reads
    ``store``'s payloads back (``oma dev`` always has a store: its own, or
    ``OMA_PAYLOAD_STORE``'s) and, with ``OMA_CODEC_KEYS``, decrypts.

    No token, loopback only, CORS for the dev UI under both of its names: the
    dev UI cannot send a token (``CODEC_TOKEN_IN_DEV``), and whoever reaches
    127.0.0.1 can already start runs on this worker, which holds the keys and
    reads the store."""
    from oma.runtime.codec import AesGcmCodec, keys_from_env
    from oma.runtime.codec_server import codec_app

    keys = keys_from_env()
    if keys is not None and "OMA_CODEC_SERVER_TOKEN" in os.environ:
        raise _fail(CODEC_TOKEN_IN_DEV, 2)
    return codec_app(
        AesGcmCodec(keys) if keys is not None else None,
        store=store,
        ui_origin=f"http://127.0.0.1:{ui_port}",
        loopback_only=True,
    )


@app.command("codec-key")
def codec_key(
    key_id: Annotated[
        str | None, typer.Option(help="The key's id (default: k and 8 random hex digits).")
    ] = None,
) -> None:
    """Print a new AES-256 key entry, key_id:base64_key, for OMA_CODEC_KEYS.

    To rotate, put the new entry first and keep the old ones after it:
    OMA_CODEC_KEYS="<new>,<old>" (docs/security.md)."""
    from oma.core.schema.errors import OMAError
    from oma.runtime.codec import new_key

    try:
        print(new_key(key_id))
    except OMAError as e:
        # a bad --key-id: CODEC_KEYS_INVALID, a SetupError, which would exit 1
        raise _fail(str(e), 2) from None


@app.command("codec-server")
def codec_server(
    port: Annotated[int, typer.Option(help="Port to listen on.", **PORT)] = 8081,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    ui_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="The Web UI's origin allowed by CORS, e.g. http://localhost:8233 (repeatable; "
            "a localhost or 127.0.0.1 origin admits the other name too).",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Require Authorization: Bearer TOKEN (default: OMA_CODEC_SERVER_TOKEN, if "
            "set); an empty one is refused.",
        ),
    ] = None,
) -> None:
    """Serve Temporal's codec endpoints (/encode, /decode) with OMA_CODEC_KEYS and
    the payload store (OMA_PAYLOAD_STORE), for the Web UI's Codec Server setting
    and `temporal ... --codec-endpoint`."""
    import asyncio

    from oma.cli.common import console, route_sdk_logs
    from oma.runtime.codec import AesGcmCodec, keys_from_env
    from oma.runtime.codec_server import LOOPBACK_HOSTS, codec_app, serve, ui_origins
    from oma.runtime.connection import Connection

    keys = keys_from_env()
    store = Connection.from_env().store
    if keys is None and store is None:
        raise _fail(
            "oma codec-server needs OMA_CODEC_KEYS (or OMA_CODEC_KEYS_FILE) or "
            "OMA_PAYLOAD_STORE: it has nothing to decode",
            2,
        )
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
    route_sdk_logs(to_stderr=True)  # a server's console is its log: refusals show there
    loopback = host in LOOPBACK_HOSTS or host == "::1"
    app = codec_app(
        AesGcmCodec(keys) if keys is not None else None,
        store=store,
        ui_origin=ui_origin,
        token=token,
        loopback_only=loopback,
    )
    allowed = ", ".join(sorted(ui_origins(ui_origin or ())))

    async def go() -> None:
        runner = await serve(app, host, port)
        try:
            ids = ", ".join(k.key_id for k in keys) if keys is not None else "none"
            kept = f"; payloads stored in {store.url}" if store is not None else ""
            console.print(
                f"OMA codec server at http://{host}:{port} (keys {ids}{kept}"
                f"{'; bearer token required' if token else ''}"
                f"{f'; CORS for {allowed}' if allowed else ''})"
            )
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    _run_async(go())


def main() -> None:
    """Run the command in ``sys.argv`` (in the ``oma`` process; the forkserver's
    child runs ``invoke`` as that process's stand-in: ``oma.__main__``).

    Leaves with ``os._exit`` once the command has finished and its output and
    spans are flushed: with a client connected, the SDK's Rust core can crash
    while the interpreter tears down (temporalio/sdk-python#300), which would
    turn a command that succeeded into exit status 134.
    """
    os._exit(invoke())


def invoke() -> int:
    """Run the command in ``sys.argv``; its exit status, once its output and
    its spans (``oma.runtime.tracing.shutdown``: ``os._exit`` skips the SDK's
    ``atexit`` hook) are flushed, however it ended.

    An ``OMAError`` a command lets escape is converted here, the CLI's one
    place for it (``oma.cli.common.failed``): one line on stderr with its code,
    exit 2 for an ``InputError``, else 1. A reader that left early (``oma
    show --json | head``) ends the command quietly with status 1, as click
    does when a write fails so, whether the output broke mid-command or at
    the last flush: no traceback.
    """
    try:
        try:
            app()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception as err:
            # (imported only now: `oma --help` and `oma --version` load neither)
            from oma.core.schema.errors import OMAError

            if not isinstance(err, OMAError):
                raise
            from oma.cli.common import failed

            code = failed(err)
        finally:
            _flush_spans()
        sys.stdout.flush()
    except BrokenPipeError:
        # what is left in the buffer would fail again at every later flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.stderr.flush()
    return code


def _flush_spans() -> None:
    # a command that never loaded the tracing module (`oma --help`) has no
    # spans, and need not pay for importing it now
    tracing = sys.modules.get("oma.runtime.tracing")
    if tracing is not None:
        tracing.shutdown()


if __name__ == "__main__":
    main()
