"""``oma fork``: start a new ``TeamRun`` from another run's outcome (docs/fork.md).

The fork is checked first, as its run will make it (``oma.client.fork.preview``):
an unknown task or a task to run again whose agent the team lacks exits 2
before anything starts; what it keeps and runs again, and its warnings, go to
stderr. Then the run is followed as ``oma run`` follows one. Imported by
``oma.cli.app`` only when ``oma fork`` runs.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import typer

from oma.cli.common import connection, err_console, fail, run_async, run_text
from oma.cli.run import follow_start, print_dry_run, temporal
from oma.cli.summary import print_result
from oma.core.schema.errors import OMAError
from oma.core.schema.fork import TaskEdit, parse_fork_input
from oma.core.schema.results import TeamRunResult

TEXT_FIELDS = frozenset({"title", "description", "assignee"})
"""The ``--set`` fields whose value is taken as text; the others read as JSON."""


def fork_command(
    run_id: str | None,
    rerun: list[str],
    team: Path | None,
    options: Path | None,
    edits: list[str],
    history: Path | None,
    as_json: bool,
    workflow_id: str | None,
    worker: bool | None,
    dry_run: bool = False,
    models: str | None = None,
    on_miss: str | None = None,
) -> None:
    """``oma fork``: exits 0 when the fork succeeded, 1 when it did not, 2
    when the fork cannot be made (an unknown run or task, a bad file or
    ``--set``), 130 when interrupted (the fork is cancelled)."""
    raw: dict[str, Any] = {"fork": {}}
    if team is not None:
        raw["team"] = _object_in(team, "team")
    if options is not None:
        raw["options"] = _object_in(options, "options")
    if models is not None or on_miss is not None:
        if (models or "recorded") not in ("live", "recorded"):
            raise fail(f"--models {models!r}: live or recorded", 2)
        if on_miss not in (None, "strict", "fallback"):
            raise fail(f"--on-miss {on_miss!r}: strict or fallback", 2)
        chosen: Any = models or "recorded"
        if chosen == "live" and on_miss is not None:
            raise fail(
                "--on-miss says what a recorded turn's miss does: it needs --models recorded", 2
            )
        if chosen == "recorded" and on_miss is not None:
            chosen = {"on_miss": on_miss}
        raw["options"] = {**raw.get("options", {}), "models": chosen}
    if rerun:
        raw["fork"]["rerun"] = rerun
    if edits:
        raw["fork"]["edit"] = _edits(edits)

    async def go() -> TeamRunResult:
        from oma.client.fork import forked_input, preview, start_fork

        async with temporal(worker) as (client, task_queue):
            source_id = run_id
            if history is not None:
                from oma.client.fork import history_source

                found, source = await history_source(history, client.data_converter)
                source_id = run_id or found
                raw["fork"]["source"] = source.model_dump(mode="json")
            if not source_id:
                raise fail("give the workflow id of the run to fork, or --history FILE", 2)
            raw["fork"]["run_id"] = source_id
            # exit 2 for any, as below, but said before the worker and the server
            # started here stop (with -v, before their log lines)
            try:
                fork = parse_fork_input(raw)
                wid = workflow_id or f"{source_id}-fork-{uuid.uuid4().hex[:8]}"
                forked = await preview(client, fork, wid)
            except OMAError as e:
                raise fail(str(e), 2) from None
            if dry_run:
                print_dry_run(forked, source_id, fork=True)
                raise typer.Exit(0)
            for warning in forked.warnings:
                err_console.print(run_text(f"warning: {warning}", "bold yellow"))
            kept = ", ".join(forked.reused) or "none"
            again = ", ".join(forked.rerun) or "the synthesis"
            err_console.print(run_text(f"fork of {source_id}: keeps {kept}; runs {again} again"))
            team_name = str(forked.input["team"]["name"])
            starting = start_fork(client, fork, id=wid, task_queue=task_queue, team=team_name)
            inp = forked_input(forked)
            return await follow_start(client, task_queue, inp, wid, starting, on_interrupt=show)

    def show(result: TeamRunResult) -> None:
        if as_json:
            print(result.model_dump_json(indent=2))
        else:
            print_result(result)

    # a bad configuration's SetupError ends the command here, exit 1 as in
    # every command: raised in go(), the fork's block below would make it 2
    connection()
    try:
        result = run_async(go())
    except OMAError as e:
        # every OMA error of the fork exits 2, whatever its class: a fork too
        # large to carry (RUN_STATE_TOO_LARGE), a key or a store missing as the
        # source or the result is read (a SetupError) too
        raise fail(str(e), 2) from None
    show(result)
    raise typer.Exit(0 if result.success else 1)


def _object_in(path: Path, key: str) -> dict[str, Any]:
    """The JSON object ``path`` holds (or its ``key``'s, a run input's).
    Exits 2 when it is no object: a null would mean the source's."""
    data = _read_json(path)
    if isinstance(data, dict) and key in data:
        data = data[key]
    if not isinstance(data, dict):
        raise fail(f"{path} holds no {key}: a JSON object (or a run input with '{key}')", 2)
    return data


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise fail(f"cannot read {path}: {e.strerror}", 2) from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise fail(f"{path} is not JSON: {e}", 2) from None


def _edits(edits: list[str]) -> dict[str, dict[str, Any]]:
    """``TASK.FIELD=VALUE`` items as ``{task: {field: value}}``: the text of
    ``title``, ``description`` and ``assignee``; the others as JSON."""
    out: dict[str, dict[str, Any]] = {}
    for item in edits:
        target, sep, value = item.partition("=")
        task_id, dot, field = target.partition(".")
        if not sep or not dot or not task_id or not field:
            raise fail(f"--set {item!r}: write TASK.FIELD=VALUE, e.g. t3.description='...'", 2)
        if field not in TaskEdit.model_fields:
            fields = ", ".join(TaskEdit.model_fields)
            raise fail(f"--set {item!r}: a task's {field!r} cannot be set (fields: {fields})", 2)
        if field not in TEXT_FIELDS:
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise fail(f"--set {item!r}: {field} takes a JSON value", 2) from None
        out.setdefault(task_id, {})[field] = value
    return out
