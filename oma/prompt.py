"""How a task becomes an agent's prompt."""

from __future__ import annotations

from collections.abc import Sequence

from oma.task import TaskSpec


def task_prompt(task: TaskSpec, dependency_outputs: Sequence[tuple[str, str]]) -> str:
    """The prompt for ``task``: its title and description, then each direct
    dependency's output under a heading with that dependency's title.

    ``dependency_outputs`` is ``[(title, output), ...]`` in ``depends_on`` order.
    """
    parts = [f"# Task: {task.title}"]
    if task.description:
        parts.append(task.description)
    if dependency_outputs:
        parts.append("## Results of the tasks this one depends on")
        parts.extend(f"### {title}\n{output}" for title, output in dependency_outputs)
    return "\n\n".join(parts)
