"""The size limits of a run, and their checks.

Outputs and prompts travel in workflow history, where Temporal caps one
payload at 2 MB (and warns past 512 KB), so OMA bounds them well below that
and says so with a clear error instead of a failed workflow task.
"""

from __future__ import annotations

import json
from typing import Any

from oma.core.errors import InvalidRunInputError, OutputTooLargeError

MAX_OUTPUT_BYTES = 256 * 1024
"""The largest output one task may return (bytes of UTF-8)."""

MAX_DEPENDENCY_PAYLOAD_BYTES = 64 * 1024
"""The largest payload one task receives per dependency (or as the ``all`` summary)."""


MAX_RESULT_MESSAGES_BYTES = 256 * 1024
"""The most JSON of conversation an ``AgentRun`` result carries (the latest
messages); the rest stays readable through the run's ``conversation`` query."""

MAX_PAYLOAD_BYTES = 2 * 1024 * 1024
"""Temporal's limit on one payload (a workflow's input, a result): 2 MB
(the server's ``limit.blobSize.error``; past it a start fails with "Blob data
size exceeds limit")."""


def largest_field(data: Any, path: str = "") -> tuple[str, int]:
    """The path (``tasks[0].description``) and JSON size in bytes of the
    largest text or number leaf of ``data`` (decoded JSON)."""
    if isinstance(data, dict):
        items: list[tuple[str, Any]] = [
            (f"{path}.{k}" if path else str(k), v) for k, v in data.items()
        ]
    elif isinstance(data, list):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(data)]
    else:
        return path or "(input)", len(json.dumps(data).encode())
    best = (path or "(input)", 0)
    for sub_path, value in items:
        found = largest_field(value, sub_path)
        if found[1] > best[1]:
            best = found
    return best


def check_payload_size(data: bytes, what: str) -> None:
    """Raise ``InvalidRunInputError`` when ``data`` (the JSON of ``what``) is
    over ``MAX_PAYLOAD_BYTES``, naming the largest field and the limit."""
    if len(data) <= MAX_PAYLOAD_BYTES:
        return
    field, size = largest_field(json.loads(data))
    raise InvalidRunInputError(
        f"{what} is {len(data)} bytes of JSON, over Temporal's payload limit of "
        f"{MAX_PAYLOAD_BYTES} bytes (2 MB); its largest field is {field} ({size} bytes): "
        "put large content in a file the agent reads, and give its path"
    )


def check_output_size(agent: str, size: int) -> None:
    """Raise ``OutputTooLargeError`` if an output of ``size`` bytes is over
    ``MAX_OUTPUT_BYTES``."""
    if size > MAX_OUTPUT_BYTES:
        raise OutputTooLargeError(
            f"agent {agent!r} produced {size} bytes of output; a task's output may be at "
            f"most {MAX_OUTPUT_BYTES} bytes (it travels in workflow history): write large "
            "results to files and print their paths"
        )
