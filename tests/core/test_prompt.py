"""Task prompts and the shared memory they read (oma/prompt.py,
oma/shared_memory.py). Pure logic, no Temporal."""

from __future__ import annotations

from typing import Any

import pytest

from oma.core.rules.prompt import task_prompt
from oma.core.rules.shared_memory import (
    SUMMARY_VALUE_CHARS,
    memory_summary,
    result_key,
    shared_memory,
)
from oma.core.schema.errors import DependencyPayloadTooLargeError
from oma.core.schema.limits import MAX_DEPENDENCY_PAYLOAD_BYTES
from oma.core.schema.task import TaskSpec, TaskState, TaskStatus


def spec(**extra: Any) -> TaskSpec:
    fields: dict[str, Any] = {
        "id": "report",
        "title": "Write the report",
        "description": "Summarize the findings.",
        "depends_on": ["collect", "analyse"],
    }
    return TaskSpec(**(fields | extra))


def done(task_id: str, title: str, assignee: str | None, output: str | None) -> TaskState:
    return TaskState(
        id=task_id, title=title, assignee=assignee, status=TaskStatus.COMPLETED, output=output
    )


COLLECT = done("collect", "Collect data", "collector", "rows: 3")
ANALYSE = done("analyse", "Analyse", "analyst", '{"mean": 2.5, "note": "café"}')

HEADER = "# Task: Write the report\n\nSummarize the findings."
DEPS = "## Results of the tasks this one depends on"
ANALYSE_RECORD = """```json
{
  "task_id": "analyse",
  "title": "Analyse",
  "assignee": "analyst",
  "status": "completed",
  "output": {
    "mean": 2.5,
    "note": "café"
  }
}
```"""


# memory_scope: dependencies


def test_a_task_without_dependencies_is_its_title_and_description() -> None:
    assert task_prompt(spec(depends_on=[]), [], {}) == HEADER


def test_a_task_without_description_is_its_title() -> None:
    task = TaskSpec(id="t", title="Say hello")

    assert task_prompt(task, [], {}) == "# Task: Say hello"


def test_output_payload_gives_each_dependencys_output_under_its_title() -> None:
    prompt = task_prompt(spec(), [COLLECT, ANALYSE], {"ignored/key": "not shown"})

    assert prompt == (
        f"{HEADER}\n\n{DEPS}\n\n"
        "### Collect data\nrows: 3\n\n"
        '### Analyse\n{"mean": 2.5, "note": "café"}'
    )


def test_structured_payload_is_a_json_record_with_json_output_parsed() -> None:
    prompt = task_prompt(spec(dependency_payload="structured"), [ANALYSE], {})

    assert prompt == f"{HEADER}\n\n{DEPS}\n\n### Analyse\n{ANALYSE_RECORD}"


def test_structured_payload_keeps_non_json_output_as_text() -> None:
    prompt = task_prompt(spec(dependency_payload="structured"), [COLLECT], {})

    assert prompt == (
        f"{HEADER}\n\n{DEPS}\n\n### Collect data\n```json\n"
        "{\n"
        '  "task_id": "collect",\n'
        '  "title": "Collect data",\n'
        '  "assignee": "collector",\n'
        '  "status": "completed",\n'
        '  "output": "rows: 3"\n'
        "}\n```"
    )


def test_structured_payload_of_a_dependency_without_output_has_empty_output() -> None:
    nothing = done("collect", "Collect data", None, None)

    prompt = task_prompt(spec(dependency_payload="structured"), [nothing], {})

    assert prompt.endswith('"assignee": null,\n  "status": "completed",\n  "output": ""\n}\n```')


def test_both_payload_is_the_output_then_the_record() -> None:
    prompt = task_prompt(spec(dependency_payload="both"), [ANALYSE], {})

    assert prompt == (
        f'{HEADER}\n\n{DEPS}\n\n### Analyse\n{{"mean": 2.5, "note": "café"}}\n\n{ANALYSE_RECORD}'
    )


def test_dependencies_appear_in_the_order_given() -> None:
    prompt = task_prompt(spec(), [ANALYSE, COLLECT], {})

    assert prompt.index("### Analyse") < prompt.index("### Collect data")


# memory_scope: all


def test_all_scope_summarizes_every_entry_of_the_memory() -> None:
    memory = {"collector/task:collect:result": "  rows: 3\n", "analyst/task:analyse:result": "ok"}

    prompt = task_prompt(spec(memory_scope="all"), [COLLECT], memory)

    assert prompt == (
        f"{HEADER}\n\n## Shared memory of the run\n\n"
        "- collector/task:collect:result: rows: 3\n"
        "- analyst/task:analyse:result: ok"
    )


def test_all_scope_with_an_empty_memory_says_so() -> None:
    prompt = task_prompt(spec(memory_scope="all"), [], {})

    assert prompt == f"{HEADER}\n\n## Shared memory of the run\n\n(empty)"


def test_the_summary_cuts_long_values_and_marks_the_cut() -> None:
    value = "x" * SUMMARY_VALUE_CHARS + "y" * 20

    assert memory_summary({"a/k": value}) == (
        f"- a/k: {'x' * SUMMARY_VALUE_CHARS}… (20 more characters)"
    )


def test_the_summary_keeps_a_value_of_exactly_the_limit_whole() -> None:
    value = "z" * SUMMARY_VALUE_CHARS

    assert memory_summary({"a/k": value}) == f"- a/k: {value}"


# the payload cap


def test_a_payload_of_exactly_the_cap_is_accepted() -> None:
    big = done("collect", "Collect data", "collector", "x" * MAX_DEPENDENCY_PAYLOAD_BYTES)

    assert task_prompt(spec(), [big], {}).endswith("x" * MAX_DEPENDENCY_PAYLOAD_BYTES)


def test_a_payload_over_the_cap_fails_the_task() -> None:
    size = MAX_DEPENDENCY_PAYLOAD_BYTES + 1
    big = done("collect", "Collect data", "collector", "x" * size)

    with pytest.raises(DependencyPayloadTooLargeError) as info:
        task_prompt(spec(), [COLLECT, big], {})

    assert MAX_DEPENDENCY_PAYLOAD_BYTES == 64 * 1024
    assert info.value.code == "DEPENDENCY_PAYLOAD_TOO_LARGE"
    assert info.value.message == (
        f"task 'report' would receive {size} bytes from dependency 'collect'; a payload may "
        f"be at most {MAX_DEPENDENCY_PAYLOAD_BYTES} bytes: have the agent write large "
        "results to files and output their paths"
    )


def test_an_oversized_structured_payload_suggests_the_plain_output() -> None:
    big = done("collect", "Collect data", "collector", "x" * MAX_DEPENDENCY_PAYLOAD_BYTES)

    with pytest.raises(DependencyPayloadTooLargeError, match=r"use dependency_payload 'output'$"):
        task_prompt(spec(dependency_payload="both"), [big], {})


def test_the_cap_counts_utf8_bytes_not_characters() -> None:
    chars = MAX_DEPENDENCY_PAYLOAD_BYTES // 2 + 1
    big = done("collect", "Collect data", "collector", "é" * chars)

    with pytest.raises(DependencyPayloadTooLargeError, match=f"receive {2 * chars} bytes"):
        task_prompt(spec(), [big], {})


def test_the_cap_applies_to_the_structured_record() -> None:
    fits_as_output = done(
        "collect", "Collect data", "collector", "x" * MAX_DEPENDENCY_PAYLOAD_BYTES
    )

    assert task_prompt(spec(), [fits_as_output], {})
    with pytest.raises(DependencyPayloadTooLargeError):
        task_prompt(spec(dependency_payload="structured"), [fits_as_output], {})


def test_a_summary_over_the_cap_fails_the_task() -> None:
    memory = {f"a/task:t{i}:result": "v" * SUMMARY_VALUE_CHARS for i in range(130)}
    size = len(memory_summary(memory).encode())

    with pytest.raises(DependencyPayloadTooLargeError) as info:
        task_prompt(spec(memory_scope="all"), [], memory)

    assert size > MAX_DEPENDENCY_PAYLOAD_BYTES
    assert info.value.code == "DEPENDENCY_PAYLOAD_TOO_LARGE"
    assert info.value.message.startswith(
        f"task 'report' would receive {size} bytes from the shared-memory summary; "
    )


# shared_memory and result_key


def test_result_key_is_namespaced_by_the_agent() -> None:
    assert result_key("writer", "draft") == "writer/task:draft:result"


def test_shared_memory_holds_the_outputs_of_completed_tasks_only() -> None:
    states = [
        COLLECT,
        TaskState(id="f", title="F", assignee="a", status=TaskStatus.FAILED, output="boom"),
        TaskState(id="r", title="R", assignee="a", status=TaskStatus.IN_PROGRESS, output="half"),
        TaskState(id="s", title="S", assignee="a", status=TaskStatus.SKIPPED),
        done("empty", "Empty", "writer", ""),
        done("none", "None", "writer", None),
        ANALYSE,
    ]

    assert shared_memory(states) == {
        "collector/task:collect:result": "rows: 3",
        "writer/task:empty:result": "",
        "analyst/task:analyse:result": '{"mean": 2.5, "note": "café"}',
    }
