"""A team run's shared memory: what tasks write and what later tasks read.

Writes are namespaced by the agent that made them, ``<agent>/<key>``, as in
the TypeScript original; a completed task writes its output under
``<assignee>/task:<task id>:result``. The memory is derived from the tasks'
states, so each output is stored once in the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from oma.core.schema.task import TaskState, TaskStatus

SUMMARY_VALUE_CHARS = 500
"""How much of each entry the ``all`` summary shows."""


def result_key(agent: str, task_id: str) -> str:
    """The key under which ``agent``'s output for task ``task_id`` is stored."""
    return f"{agent}/task:{task_id}:result"


def shared_memory(states: Iterable[TaskState]) -> dict[str, str]:
    """The memory of a run whose tasks are ``states``: key -> value. An
    output the run keeps by reference (``output_ref``, after it continued as
    new) reads as where it is: ``(kept by reference: the result of <ref>, N
    bytes)``."""
    return {
        result_key(s.assignee, s.id): s.output if s.output is not None else _reference(s)
        for s in states
        if s.status == TaskStatus.COMPLETED
        and s.assignee is not None
        and (s.output is not None or s.output_ref is not None)
    }


def _reference(state: TaskState) -> str:
    return f"(kept by reference: the result of {state.output_ref}, {state.output_bytes} bytes)"


def memory_summary(memory: Mapping[str, str]) -> str:
    """Every entry as ``- key: value``, each value cut to
    ``SUMMARY_VALUE_CHARS`` characters (the cut is marked)."""
    lines = []
    for key, value in memory.items():
        shown = value.strip()
        if len(shown) > SUMMARY_VALUE_CHARS:
            cut = len(shown) - SUMMARY_VALUE_CHARS
            shown = f"{shown[:SUMMARY_VALUE_CHARS]}… ({cut} more characters)"
        lines.append(f"- {key}: {shown}")
    return "\n".join(lines) or "(empty)"
