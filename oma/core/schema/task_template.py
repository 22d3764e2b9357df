"""Tasks made from a template: ``task_template`` and ``items`` of a run input.

A job of many like tasks (an agent over every file of a repository, every
ticket of a backlog) is one task written once, ``task_template``, whose
``id``, ``title``, ``description``, ``assignee`` and ``depends_on`` entries
may hold ``{field}`` placeholders, and ``items``, one object per task
(``oma run --items FILE.jsonl`` reads them from a JSONL file). Task *n* is the
template with each ``{field}`` replaced by ``items[n][field]`` (a string as
it is, a number or a boolean as JSON writes it; a field no placeholder names
may hold anything); ``{{`` and ``}}`` are a brace; any other brace is kept as
written. The ``TeamRun`` workflow expands
them, so its input stays one template and the items.

The substitution is a scan for ``{name}`` (a letter or ``_``, then letters,
digits, ``_``), not Python's ``str.format``: a template is the user's text,
and a format string could reach an object's attributes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from oma.core.schema.limits import MAX_TASK_ID_CHARS, cut_text
from oma.core.schema.task import TaskSpec

PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""``{{``, ``}}`` (a brace) or a ``{field}`` placeholder."""

TEMPLATE_TEXTS = ("id", "title", "description", "assignee")
"""The fields of ``task_template`` whose placeholders are filled (and each
entry of ``depends_on``)."""

MAX_SHOWN_CHARS = 100
"""The most characters of a made task id an error shows."""


def placeholders(text: str) -> list[str]:
    """The fields ``text`` names, in order (a field named twice, twice)."""
    return [m.group(1) for m in PLACEHOLDER.finditer(text) if m.group(1)]


def expand(template: TaskSpec, items: Sequence[Mapping[str, Any]]) -> list[TaskSpec]:
    """One task per item, in the items' order: ``template`` with its
    placeholders filled from the item.

    Raises ``ValueError`` naming the item (``items[n]``) and the template's
    field when a field of an item is not a string, a number or a boolean,
    when an item lacks a field a placeholder names, when a made id is
    empty, has a ``/`` or is longer than ``MAX_TASK_ID_CHARS``, when a made
    title is empty, and when two items make the same id."""
    texts = {
        f"task_template.{f}": getattr(template, f)
        for f in TEMPLATE_TEXTS
        if getattr(template, f) is not None
    }
    texts |= {f"task_template.depends_on[{k}]": d for k, d in enumerate(template.depends_on)}
    parts = {where: _parts(text) for where, text in texts.items()}
    made: list[TaskSpec] = []
    first_of: dict[str, int] = {}
    for n, item in enumerate(items):
        filled = {where: _fill(pieces, item, where, n) for where, pieces in parts.items()}
        fields = {
            f: filled.pop(f"task_template.{f}")
            for f in TEMPLATE_TEXTS
            if f"task_template.{f}" in filled
        }
        _check(fields, n)
        task_id = fields["id"]
        if task_id in first_of:
            again = "" if placeholders(template.id) else ": task_template.id has no {field} in it"
            raise ValueError(
                f"items[{first_of[task_id]}] and items[{n}] both make task id "
                f"{cut_text(task_id, MAX_SHOWN_CHARS)!r}{again}"
            )
        first_of[task_id] = n
        # (the template was validated: each task is it with its texts filled, checked above)
        made.append(template.model_copy(update={**fields, "depends_on": [*filled.values()]}))
    return made


def _parts(text: str) -> list[tuple[str, bool]]:
    """``text`` as pieces: ``(literal text, False)`` and ``(field name, True)``."""
    pieces: list[tuple[str, bool]] = []
    at = 0
    for match in PLACEHOLDER.finditer(text):
        pieces.append((text[at : match.start()], False))
        token = match.group(0)
        pieces.append((match.group(1), True) if match.group(1) else (token[0], False))
        at = match.end()
    pieces.append((text[at:], False))
    return [p for p in pieces if p[1] or p[0]]


def _fill(pieces: list[tuple[str, bool]], item: Mapping[str, Any], where: str, n: int) -> str:
    out = []
    for piece, is_field in pieces:
        if not is_field:
            out.append(piece)
            continue
        if piece not in item:
            fields = ", ".join(sorted(item)[:10]) or "none"
            raise ValueError(
                f"items[{n}] has no field {piece!r}, which {where} names (its fields: {fields})"
            )
        found = item[piece]
        if isinstance(found, str):
            out.append(found)
        elif isinstance(found, bool):
            out.append("true" if found else "false")
        elif isinstance(found, int):
            out.append(str(found))
        elif isinstance(found, float):
            out.append(json.dumps(found))
        else:
            kind = (
                "an object"
                if isinstance(found, dict)
                else "a list"
                if isinstance(found, list)
                else "null"
            )
            raise ValueError(
                f"items[{n}].{piece} is {kind}: a field of an item is a string, a number or a "
                "boolean"
            )
    return "".join(out)


def _check(filled: Mapping[str, Any], n: int) -> None:
    task_id = filled["id"]
    shown = cut_text(task_id, MAX_SHOWN_CHARS)
    if not task_id:
        raise ValueError(f"items[{n}] makes an empty task id")
    if "/" in task_id:
        raise ValueError(
            f"items[{n}] makes task id {shown!r}, which contains '/': a task's workflow id is "
            "'<run id>/<task id>'"
        )
    if len(task_id) > MAX_TASK_ID_CHARS:
        raise ValueError(
            f"items[{n}] makes a task id of {len(task_id)} characters, over "
            f"{MAX_TASK_ID_CHARS}: {shown!r}"
        )
    if not filled["title"]:
        raise ValueError(f"items[{n}] makes task {shown!r} an empty title")
