"""How ``oma`` shows the outputs a dispatch request's task will act on (its
dependencies' outputs, ``PendingApproval.upstream``): in ``oma approvals``
and ``oma approve`` (previews, or whole with ``--full``) and, shorter, in
``oma run``'s progress when a run stops at the gate. Lines of plain text:
the callers print each through ``run_text``."""

from __future__ import annotations

from oma.core.schema.approvals import UpstreamOutput

LIVE_LINES = 3
"""How many lines of each output ``oma run``'s progress shows."""

LIVE_LINE_CHARS = 160
"""How much of each of those lines it shows."""


def upstream_header(up: UpstreamOutput) -> str:
    """``draft (Draft the notes) by writer, completed, 1234 characters:``"""
    parts = [f"{up.task_id} ({up.title})" + (f" by {up.assignee}" if up.assignee else "")]
    parts.append(up.status)
    if up.output_chars is not None:
        parts.append(f"{up.output_chars} characters")
    elif up.output_bytes is not None:
        parts.append(f"{up.output_bytes} bytes, kept by reference")
    return ", ".join(parts) + ":"


def output_lines(up: UpstreamOutput, text: str | None, whole: bool) -> list[str]:
    """``text`` (the preview, or the ``whole`` output) indented, and what was
    left out; ``None``: it could not be read."""
    if text is None:
        return [f"  (cannot be read: the result of {up.output_ref})"]
    lines = [f"  {line}" for line in text.splitlines() or [""]]
    if not whole and up.truncated and up.output_chars is not None:
        lines.append(f"  … {up.output_chars - len(text)} more characters")
    return lines


def live_lines(upstream: list[UpstreamOutput], workflow_id: str) -> list[str]:
    """What ``oma run`` prints under "approval needed": each dependency's
    header and the first ``LIVE_LINES`` lines of its output, each cut to
    ``LIVE_LINE_CHARS``; then, if anything was left out, where to read it."""
    out = [f"the outputs it will act on ({len(upstream)}):"]
    left_out = False
    for up in upstream:
        out.append(f"  {upstream_header(up)}")
        if up.preview is None:
            out.append("    (kept by reference)")
            left_out = True
            continue
        lines = up.preview.splitlines() or [""]
        for line in lines[:LIVE_LINES]:
            cut = len(line) > LIVE_LINE_CHARS
            left_out |= cut
            out.append(f"    {line[:LIVE_LINE_CHARS]}{'…' if cut else ''}")
        if len(lines) > LIVE_LINES or up.truncated:
            left_out = True
            out.append("    …")
    if left_out:
        out.append(f"  (all of it: oma approvals {workflow_id} --full)")
    return out
