"""A prompt's content blocks as a team run's goal, and a follow-up's context.

A goal is text (a ``TeamRun``'s goal is a string, docs/structured-input.md),
so each ACP content block (``session/prompt``'s ``prompt``) becomes text:

- ``text``: as it is;
- ``resource`` with text (an editor's embedded file or selection): inside
  ``<resource uri="...">`` ... ``</resource>``;
- ``resource_link``: one line naming it and its URI;
- ``image`` and a ``resource`` with a blob: written to
  ``.oma/attachments/<session id>/`` in the session's directory and named
  in the goal by that path (an agent with the file tools can read it there);
  at most ``MAX_ATTACHMENT_BYTES`` each, ``MAX_ATTACHMENTS`` a prompt. They
  are written only once the prompt is taken (``Goal.write``, just before its
  run starts): a prompt refused for any reason leaves no file behind.

A later prompt in the same session is a follow-up run: its goal is the new
prompt after the previous run's prompt and outcome (its final output, else
its last tasks' outputs, else its error), at most
``PREVIOUS_OUTPUT_CHARS`` of it (``follow_up_goal``).
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oma.core.schema.errors import InvalidMessageError
from oma.core.schema.limits import cut_text
from oma.core.schema.results import TeamRunResult, TeamRunStatus

MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
"""The largest image or blob a prompt may attach, in bytes (decoded)."""

MAX_ATTACHMENTS = 20
"""The most images and blobs one prompt may attach."""

PREVIOUS_OUTPUT_CHARS = 8000
"""How much of the previous run's outcome a follow-up's goal carries, in characters."""

ATTACHMENTS = Path(".oma") / "attachments"
"""Where a session's attachments go, under its directory."""

MEMO = "oma_acp"
"""The memo key of a run an ``oma acp`` session started: ``{cwd, prompt}``
(a ``/retry``'s: the prompt of the run it retries, and ``command``, the
``/retry`` as typed)."""

MEMO_PROMPT_CHARS = 2000
"""How much of a prompt's text a run's memo keeps (the session's title, a
follow-up's context, ``/status``'s goal), in characters."""


def typed_prompt(memo: Mapping[str, Any]) -> str | None:
    """What the user typed to start a run, from the run's ``memo``
    (``MEMO``); ``None`` for a run ``oma acp`` did not start."""
    mine = memo.get(MEMO)
    prompt = mine.get("prompt") if isinstance(mine, dict) else None
    return str(prompt) if prompt else None


def prompt_text(blocks: list[Any]) -> str:
    """What the user typed: the prompt's ``text`` blocks, joined (the title of
    the session's run, and what a command is read from)."""
    return "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", "") == "text")


@dataclass(frozen=True)
class Attachment:
    """An image or blob of a prompt: ``path`` (relative to the session's
    directory) and its decoded ``data``."""

    path: Path
    data: bytes


@dataclass(frozen=True)
class Goal:
    """A prompt as a goal: its ``text``, which names the ``attachments`` by
    the paths they are written to (``write``)."""

    text: str
    attachments: tuple[Attachment, ...] = ()

    def write(self, cwd: Path) -> None:
        """Write the attachments under ``cwd``. Raises ``OSError`` (what it
        wrote removed)."""
        try:
            for attachment in self.attachments:
                (cwd / attachment.path).parent.mkdir(parents=True, exist_ok=True)
                (cwd / attachment.path).write_bytes(attachment.data)
        except OSError:
            self.remove(cwd)
            raise

    def remove(self, cwd: Path) -> None:
        """Remove what ``write`` wrote (the run was not started after all)."""
        for attachment in self.attachments:
            (cwd / attachment.path).unlink(missing_ok=True)


def goal_of(blocks: list[Any], session_id: str, turn: str) -> Goal:
    """The goal of a prompt's ``blocks`` (module docstring), its attachments
    to be written as ``<turn>-<n>.<ext>`` (``Goal.write``); nothing is
    written here.

    Raises ``InvalidMessageError`` for an audio block, an attachment that is
    not base64 or is too large, too many attachments, or a prompt with
    nothing in it."""
    texts: list[str] = []
    attachments: list[Attachment] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind == "resource_link":
            name = block.title or block.name
            texts.append(f"\n[resource: {name} <{block.uri}>]\n")
        elif kind == "resource" and hasattr(block.resource, "text"):
            uri = block.resource.uri
            texts.append(f'\n<resource uri="{uri}">\n{block.resource.text}\n</resource>\n')
        elif kind in ("image", "resource"):
            if len(attachments) == MAX_ATTACHMENTS:
                raise InvalidMessageError(
                    f"a prompt attaches at most {MAX_ATTACHMENTS} images and files"
                )
            data, mime, uri = _blob(block)
            path = _path(mime, session_id, f"{turn}-{len(attachments) + 1}")
            attachments.append(Attachment(path, data))
            what = "image" if kind == "image" else "file"
            source = f" from {uri}" if uri else ""
            texts.append(f"\n[{what} attached{source}: {path} ({mime}, {len(data)} bytes)]\n")
        else:
            raise InvalidMessageError(
                f"a prompt's {kind or 'unknown'} block is not supported: send text, images, "
                "resources and resource links"
            )
    text = "".join(texts).strip()
    if not text:
        raise InvalidMessageError("the prompt is empty: say what the team should achieve")
    return Goal(text, tuple(attachments))


def _blob(block: Any) -> tuple[bytes, str, str | None]:
    if block.type == "image":
        encoded, mime, uri = block.data, block.mime_type, block.uri
    else:
        resource = block.resource
        encoded, mime, uri = resource.blob, resource.mime_type, resource.uri
    if len(encoded) > MAX_ATTACHMENT_BYTES * 4 // 3 + 4:
        raise InvalidMessageError(
            f"an attachment of the prompt is over {MAX_ATTACHMENT_BYTES // (1024 * 1024)} MiB"
        )
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidMessageError("an attachment of the prompt is not base64") from None
    return data, mime or "application/octet-stream", uri


def _path(mime: str, session_id: str, stem: str) -> Path:
    """Where an attachment of ``mime`` goes, relative to the session's directory."""
    ext = mimetypes.guess_extension(mime.split(";")[0].strip()) or ".bin"
    return ATTACHMENTS / _safe(session_id) / f"{stem}{ext}"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:200] or "session"


_ENDED: dict[TeamRunStatus, str] = {
    "completed": "completed",
    "planned": "was only planned",
    "failed": "failed",
    "rejected": "was rejected",
    "cancelled": "was cancelled",
    "running": "stopped",  # (an ended run's state says how it ended: ``ended_as``)
}


def ended_words(status: TeamRunStatus) -> str:
    """How a run of ``status`` ended, in words that follow "The run": "failed",
    "was cancelled", ... (a ``budget`` or time stop is ``failed``: its
    ``error_code`` says which)."""
    return _ENDED[status]


def follow_up_goal(prompt: str, previous_prompt: str, previous: TeamRunResult) -> str:
    """The goal of a follow-up run: ``prompt`` after what the session's
    previous run was asked (``previous_prompt``) and how it ended."""
    outcome = outcome_text(previous)
    return (
        "Earlier in this session the team was asked:\n\n"
        f"{previous_prompt}\n\n"
        f"That run {ended_words(previous.status)}. Its outcome:\n\n"
        f"{cut_text(outcome, PREVIOUS_OUTPUT_CHARS)}\n\n"
        "Now, building on that:\n\n"
        f"{prompt}"
    )


def outputs_text(result: TeamRunResult) -> str | None:
    """What a run produced, for a person: its final output; else the outputs
    of its tasks that no other task depends on; ``None`` when it has neither."""
    if result.final_output:
        return result.final_output
    needed = {d for t in result.tasks for d in t.depends_on}
    last = [t for t in result.tasks if t.id not in needed and t.output]
    if last:
        return "\n\n".join(f"## {t.title or t.id}\n\n{t.output}" for t in last)
    return None


def outcome_text(result: TeamRunResult) -> str:
    """What a run came to, for a person: what it produced (``outputs_text``);
    else why it stopped."""
    produced = outputs_text(result)
    if produced is not None:
        return produced
    if result.error:
        return f"{result.error_code or 'error'}: {result.error}"
    return "(no output)"


def mime_of(path: str) -> str:
    """The MIME type of ``path`` by its name (``application/octet-stream``)."""
    return mimetypes.guess_type(path)[0] or "application/octet-stream"
