"""How a task becomes an agent's prompt: its text, then what it reads from
the shared memory (``memory_scope``, ``dependency_payload``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from oma.core.rules.shared_memory import memory_summary
from oma.core.schema.errors import (
    DependencyOutputUnavailableError,
    DependencyPayloadTooLargeError,
    OMAError,
)
from oma.core.schema.limits import MAX_DEPENDENCY_PAYLOAD_BYTES
from oma.core.schema.task import TaskSpec, TaskState


def task_prompt(
    task: TaskSpec, dependencies: Sequence[TaskState], memory: Mapping[str, str]
) -> str:
    """The prompt for ``task``: its title and description, then

    - ``memory_scope`` ``dependencies``: each direct dependency's payload under
      a heading with its title, in ``depends_on`` order: its output
      (``dependency_payload`` ``output``), a JSON record ``{task_id, title,
      assignee, status, output}`` with the output parsed when it is JSON
      (``structured``), or both;
    - ``all``: a summary of every entry of ``memory`` (the run's shared memory).

    Raises ``DependencyPayloadTooLargeError`` when one payload (or the summary)
    is over ``MAX_DEPENDENCY_PAYLOAD_BYTES``, or a dependency's output is one
    the run kept by reference (``output_ref``) when it continued as new: it
    could not carry it within its budget.
    """
    parts = [f"# Task: {task.title}"]
    if task.description:
        parts.append(task.description)
    if task.memory_scope == "all":
        parts.append("## Shared memory of the run")
        parts.append(_capped(task, "the shared-memory summary", memory_summary(memory)))
    elif dependencies:
        parts.append("## Results of the tasks this one depends on")
        for dep in dependencies:
            if dep.output is None and dep.output_ref is not None:
                raise _kept_by_reference(task, dep)
            payload = _payload(dep, task.dependency_payload)
            parts.append(f"### {dep.title}\n{_capped(task, f'dependency {dep.id!r}', payload)}")
    return "\n\n".join(parts)


def _payload(dep: TaskState, kind: str) -> str:
    output = dep.output or ""
    if kind == "output":
        return output
    try:
        parsed: object = json.loads(output)
    except ValueError:
        parsed = output
    record = {
        "task_id": dep.id,
        "title": dep.title,
        "assignee": dep.assignee,
        "status": dep.status.value,
        "output": parsed,
    }
    structured = f"```json\n{json.dumps(record, indent=2, ensure_ascii=False)}\n```"
    return structured if kind == "structured" else f"{output}\n\n{structured}"


def _capped(task: TaskSpec, what: str, payload: str) -> str:
    size = len(payload.encode())
    if size > MAX_DEPENDENCY_PAYLOAD_BYTES:
        raise DependencyPayloadTooLargeError(
            f"task {task.id!r} would receive {size} bytes from {what}; a payload may be at "
            f"most {MAX_DEPENDENCY_PAYLOAD_BYTES} bytes: have the agent write large results "
            "to files and output their paths"
            + (
                ", or use dependency_payload 'output'"
                if task.memory_scope == "dependencies" and task.dependency_payload != "output"
                else ""
            )
        )
    return payload


def _kept_by_reference(task: TaskSpec, dep: TaskState) -> OMAError:
    size = dep.output_bytes or 0
    if size > MAX_DEPENDENCY_PAYLOAD_BYTES:
        return DependencyPayloadTooLargeError(
            f"task {task.id!r} would receive {size} bytes from dependency {dep.id!r}; a "
            f"payload may be at most {MAX_DEPENDENCY_PAYLOAD_BYTES} bytes: have the agent "
            "write large results to files and output their paths"
        )
    # the run read back every output under the cap its waiting tasks read: this one failed
    where = [f"execution {dep.output_run_id}"] if dep.output_run_id else []
    where += [f"made in run {dep.reused_from.run_id}"] if dep.reused_from is not None else []
    shown = f" ({', '.join(where)})" if where else ""
    return DependencyOutputUnavailableError(
        f"task {task.id!r} reads the output of dependency {dep.id!r} ({size} bytes), which "
        f"the run keeps by reference in the result of {dep.output_ref}{shown}; it could not "
        "be read back: that run is gone (past the namespace's retention, or deleted); run "
        f"{dep.id!r} again (oma fork RUN_ID --from {dep.id})"
    )
