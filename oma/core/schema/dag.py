"""Pure checks and walks over a task graph (no I/O; safe inside workflows),
and its split into shards (``shard_plan``): one ``TeamRun`` builds every
task's state in its first workflow task, inside the Temporal SDK's 2 s
deadlock timer, so it holds at most ``MAX_RUN_TASKS`` tasks; a larger tasks
run runs its graph's connected parts (no dependency crosses two), packed in
the run's order into shards of at most ``SHARD_TASKS`` tasks, each as a
``TeamRun`` child (``oma.workflows._shards``)."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence

from oma.core.schema import limits
from oma.core.schema.errors import DagValidationError, InvalidRunInputError
from oma.core.schema.task import TaskSpec
from oma.core.schema.validation import did_you_mean


def validate_task_graph(tasks: Sequence[TaskSpec], agent_names: Iterable[str]) -> None:
    """Check ids, assignees, dependencies and acyclicity; linear in tasks +
    dependencies. A task without an assignee is left to the scheduler.

    Raises ``DagValidationError`` listing every problem at once, in this
    order: duplicate ids, unknown assignees, a dependency listed twice,
    unknown dependencies (each unknown name with the nearest known one, as
    ``(did you mean 'reviewer'?)``), and a cycle (named as ``a -> b -> a``).
    """
    problems: list[str] = []
    ids = [t.id for t in tasks]
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    if duplicates:
        problems.append(f"duplicate task id(s): {', '.join(duplicates)}")

    agents = set(agent_names)
    unknown_assignees = [
        f"task {t.id!r} -> {t.assignee!r}{_meant(t.assignee, agents)}"
        for t in tasks
        if t.assignee is not None and t.assignee not in agents
    ]
    if unknown_assignees:
        problems.append(
            f"unknown assignee(s): {'; '.join(unknown_assignees)} "
            f"(team agents: {', '.join(sorted(agents))})"
        )

    repeated = [
        f"task {t.id!r} lists {d!r} twice"
        for t in tasks
        if len(set(t.depends_on)) != len(t.depends_on)
        for d in sorted({d for d in t.depends_on if t.depends_on.count(d) > 1})
    ]
    if repeated:
        problems.append(f"repeated dependency: {'; '.join(repeated)}")

    position = {task_id: i for i, task_id in enumerate(ids)}
    unknown_deps = [
        f"task {t.id!r} depends on {d!r}{_meant(d, position)}"
        for t in tasks
        for d in t.depends_on
        if d not in position
    ]
    if unknown_deps:
        problems.append(f"unknown dependency: {'; '.join(unknown_deps)}")

    # tasks listed after their dependencies (as a template's and most inputs
    # are) make no cycle: the search is skipped, a third of this check's time
    # at 100,000 tasks, which runs in a workflow's first activation
    listed_after = all(position.get(d, i) < i for i, t in enumerate(tasks) for d in t.depends_on)
    cycle = None if listed_after else find_cycle({t.id: t.depends_on for t in tasks})
    if cycle:
        problems.append(f"dependency cycle: {' -> '.join(cycle)}")
    if problems:
        raise DagValidationError("; ".join(problems))


def _meant(name: str, known: Iterable[str]) -> str:
    # sorted: the same suggestion on every worker, whatever a set's order
    meant = did_you_mean(name, sorted(known))
    return f" (did you mean {meant!r}?)" if meant else ""


def find_cycle(depends_on: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle in the graph as a closed path ``[a, b, ..., a]``, or ``None``.

    Iterative depth-first search: linear in nodes + edges, no recursion limit.
    """
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(depends_on, white)
    for root in depends_on:
        if color[root] != white:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = [root]
        color[root] = grey
        while stack:
            node, i = stack[-1]
            deps = depends_on[node]
            if i < len(deps):
                stack[-1] = (node, i + 1)
                nxt = deps[i]
                if color.get(nxt) == grey:
                    return [*path[path.index(nxt) :], nxt]
                if color.get(nxt) == white:
                    color[nxt] = grey
                    stack.append((nxt, 0))
                    path.append(nxt)
            else:
                color[node] = black
                stack.pop()
                path.pop()
    return None


def dependents_map(tasks: Sequence[TaskSpec]) -> dict[str, list[str]]:
    """Task id -> ids of the tasks that depend on it directly, in input order."""
    out: dict[str, list[str]] = {t.id: [] for t in tasks}
    for t in tasks:
        for d in t.depends_on:
            out[d].append(t.id)
    return out


def transitive_dependents(task_id: str, dependents: Mapping[str, Sequence[str]]) -> list[str]:
    """Every task reachable from ``task_id`` through dependents, breadth first."""
    seen: set[str] = set()
    order: list[str] = []
    frontier = deque(dependents[task_id])
    while frontier:
        nxt = frontier.popleft()
        if nxt in seen:
            continue
        seen.add(nxt)
        order.append(nxt)
        frontier.extend(dependents[nxt])
    return order


def shard_plan(tasks: Sequence[TaskSpec]) -> list[list[int]]:
    """``tasks`` (a valid graph: every dependency names a task) as shards: the
    indices into ``tasks`` of each shard's tasks, ascending. A connected part
    of the graph never spans two shards; parts are taken in the order of
    their first task and packed while a shard stays within ``SHARD_TASKS``
    (a larger part is a shard of its own).

    Raises ``InvalidRunInputError`` for a connected part of more than
    ``MAX_RUN_TASKS`` tasks (one ``TeamRun`` could not hold it), naming its
    first task."""
    index = {task.id: i for i, task in enumerate(tasks)}
    root = list(range(len(tasks)))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    for i, task in enumerate(tasks):
        for dependency in task.depends_on:
            a, b = find(i), find(index[dependency])
            if a != b:  # the part's root: its first task
                root[max(a, b)] = min(a, b)
    parts: dict[int, list[int]] = {}
    for i in range(len(tasks)):
        parts.setdefault(find(i), []).append(i)
    shards: list[list[int]] = []
    current: list[int] = []
    for first, part in parts.items():
        if len(part) > limits.MAX_RUN_TASKS:
            raise InvalidRunInputError(
                f"tasks: task {tasks[first].id!r} and the {len(part) - 1} tasks it is "
                f"connected to by depends_on make a graph of {len(part)} tasks; a connected "
                f"graph may have at most {limits.MAX_RUN_TASKS} (a run of more tasks runs "
                "each connected graph in one shard): split it into runs that do not depend "
                "on each other"
            )
        if current and len(current) + len(part) > limits.SHARD_TASKS:
            shards.append(sorted(current))
            current = []
        current.extend(part)
    if current:
        shards.append(sorted(current))
    return shards
