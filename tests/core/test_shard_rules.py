"""A sharded run's input checked and split in the ``plan_shards`` activity,
and its shards' inputs made of the tasks as given: the same shards and the
same tasks as the run built them in its first activation before
(``ShardInputs.of_tasks``), and the same refusals."""

from __future__ import annotations

from typing import Any

import pytest

from oma.core.contracts.shards import PlannedShards, spans_of
from oma.core.rules.shards import ShardInputs, parent_input, plan_shards, reads_first
from oma.core.schema import limits
from oma.core.schema.errors import DagValidationError, InvalidRunInputError
from oma.core.schema.results import ShardOutcome, TeamRunResult
from oma.core.schema.run_input import parse_team_run_input
from oma.runtime.converter import OmaPayloadConverter
from tests.support.runs import scripted, task


@pytest.fixture(autouse=True)
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_RUN_TASKS", 4)
    monkeypatch.setattr(limits, "SHARD_TASKS", 3)
    monkeypatch.setattr(limits, "MAX_SHARDED_RUN_TASKS", 12)


def _run(**fields: Any) -> dict[str, Any]:
    return {"team": {"name": "t", "agents": [scripted("w", "done")]}, **fields}


TEMPLATE = {**task("m-{k}", "w"), "title": "M {k}", "description": "do {k}"}


@pytest.mark.parametrize(
    "raw",
    [
        _run(
            tasks=[
                *(task(t, "w") for t in ("a1", "b1")),
                task("a2", "w", "a1"),
                task("c1", "w"),
                task("b2", "w", "b1"),
                task("d1", "w"),
            ]
        ),
        _run(
            tasks=[task("g1", "w"), task("g2", "w", "m-b")],
            task_template=TEMPLATE,
            items=[{"k": "a"}, {"k": "b"}, {"k": "c"}, {"k": "d"}],
            options={"approvals": {"dispatch": ["m-a", "g2", "w"]}},
        ),
        _run(task_template=TEMPLATE, items=[{"k": str(n)} for n in range(7)]),
        _run(plan={"version": 1, "goal": "g", "tasks": [task(f"p{n}", "w") for n in range(5)]}),
    ],
    ids=["tasks", "tasks_and_template", "template", "plan"],
)
def test_each_shard_gets_the_tasks_the_run_built_before(raw: dict[str, Any]) -> None:
    assert reads_first(raw)
    planned = plan_shards(raw, "run", stored=False)
    inp = parse_team_run_input(raw)
    tasks = inp.given_tasks()
    split = inp.check_tasks(tasks)
    assert split is not None and [planned.indices(n) for n in range(len(split))] == split
    before = ShardInputs.of_tasks(inp, tasks, split)
    now = ShardInputs.of_input(parent_input(raw), raw, planned)
    assert (now.sizes, now.first_tasks) == (before.sizes, before.first_tasks)
    for n in range(len(split)):
        made, built = before.payload(n), now.payload(n)
        assert parse_team_run_input(built).given_tasks() == parse_team_run_input(made).given_tasks()
        assert built.get("options") == made.get("options")
        if dispatch := raw.get("options", {}).get("approvals", {}).get("dispatch"):
            known = {tasks[i].id for i in split[n]} | {"w"}  # its tasks' and the agent's
            said = built["options"]["approvals"]["dispatch"]
            assert said == [name for name in dispatch if name in known]
        assert built["team"] == made["team"]


def test_a_refusal_is_the_one_the_run_made_before() -> None:
    raw = _run(tasks=[*(task(f"t{n}", "w") for n in range(5)), task("x", "w", "nowhere")])
    with pytest.raises(DagValidationError) as refused:
        plan_shards(raw, "run", stored=False)
    with pytest.raises(DagValidationError) as before:
        inp = parse_team_run_input(raw)
        inp.check_tasks(inp.given_tasks())
    assert refused.value.message == before.value.message


def test_only_a_new_run_past_max_run_tasks_is_split_apart() -> None:
    five = [task(f"t{n}", "w") for n in range(5)]
    assert reads_first(_run(tasks=five))
    assert not reads_first(_run(tasks=five[:4]))
    assert not reads_first(_run(tasks=five, resume={}))  # a run continued as new
    assert not reads_first(_run(items=[{}] * 5))  # items without a template: refused later
    assert not reads_first(["not", "an", "object"])
    with pytest.raises(InvalidRunInputError):
        plan_shards(_run(tasks=five[:4]), "run", stored=False)  # one TeamRun holds it


def test_spans_round_trip() -> None:
    for indices in ([], [0], [0, 1, 2, 5], [1, 3, 4, 9, 10, 11]):
        planned = PlannedShards(spans=[spans_of(indices)], first_tasks=["x"])
        assert planned.indices(0) == indices
    assert spans_of([0, 1, 2, 5]) == [0, 3, 5, 6]


def test_a_sharded_run_reads_of_a_shards_result_what_it_counts_and_nothing_else() -> None:
    # (the whole result of a 5,000-task shard took 0.19-0.29 s of CPU to
    # validate, in a workflow task of the sharded run: ShardOutcome 0.02 s)
    states = [
        {**task(f"t{n}", "w"), "status": status, "output": "x" * 100}
        for n, status in enumerate(["completed", "failed", "skipped", "completed"])
    ]
    result = TeamRunResult.model_validate(
        {
            "success": False,
            "status": "failed",
            "tasks": states,
            "total_token_usage": {"input_tokens": 7, "output_tokens": 3},
            "recorded_turns": 2,
            "budget_exceeded": True,
            "error": "t1 failed",
            "error_code": "TASK_FAILED",
        }
    )
    converter = OmaPayloadConverter()
    [payload] = converter.to_payloads([result])
    outcome = converter.from_payload(payload, ShardOutcome)
    assert [t.status for t in outcome.tasks] == [t.status for t in result.tasks]
    assert outcome.model_dump(exclude={"tasks"}) == result.model_dump(
        include={
            "status",
            "total_token_usage",
            "recorded_turns",
            "budget_exceeded",
            "error",
            "error_code",
        }
    )
