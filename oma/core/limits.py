"""The size limits of a run, and their checks.

Outputs and prompts travel in workflow history, where Temporal caps one
payload at 2 MB (and warns past 512 KB), so OMA bounds them well below that
and says so with a clear error instead of a failed workflow task.
"""

from __future__ import annotations

from oma.core.errors import OutputTooLargeError

MAX_OUTPUT_BYTES = 256 * 1024
"""The largest output one task may return (bytes of UTF-8)."""

MAX_DEPENDENCY_PAYLOAD_BYTES = 64 * 1024
"""The largest payload one task receives per dependency (or as the ``all`` summary)."""


MAX_RESULT_MESSAGES_BYTES = 256 * 1024
"""The most JSON of conversation an ``AgentRun`` result carries (the latest
messages); the rest stays readable through the run's ``conversation`` query."""


def check_output_size(agent: str, size: int) -> None:
    """Raise ``OutputTooLargeError`` if an output of ``size`` bytes is over
    ``MAX_OUTPUT_BYTES``."""
    if size > MAX_OUTPUT_BYTES:
        raise OutputTooLargeError(
            f"agent {agent!r} produced {size} bytes of output; a task's output may be at "
            f"most {MAX_OUTPUT_BYTES} bytes (it travels in workflow history): write large "
            "results to files and print their paths"
        )
