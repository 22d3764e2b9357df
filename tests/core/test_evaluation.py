"""Online evaluation (oma/core/rules/evaluation.py, its models in
oma/core/schema/evaluation.py): sampling, stored payloads, running evaluators."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from oma.core.rules.evaluation import (
    evaluate,
    is_sampled,
    load_evaluator,
    not_sampled,
    stored_payload,
)
from oma.core.schema.errors import InvalidHookError
from oma.core.schema.evaluation import EvaluationConfig, EvaluationRecord
from oma.core.schema.messages import LLMMessage, TextBlock, ToolUseBlock

KEY = "sk-ant-api03-abcdefGHIJ_klmn-0123456789"
THIS = "tests.core.test_evaluation"


def length_score(run: dict[str, Any]) -> float:
    """An evaluator importable as ``tests.core.test_evaluation:length_score``."""
    return len(run["output"]) / 100


NOT_CALLABLE = 42


def config(**fields: Any) -> EvaluationConfig:
    return EvaluationConfig.model_validate({"evaluator": f"{THIS}:length_score", **fields})


def messages_with_key() -> list[dict[str, Any]]:
    prompt = LLMMessage(role="user", content=[TextBlock(text=f"Deploy with {KEY} please.")])
    return [prompt.model_dump(mode="json")]


def compact_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


# -- configuration ---------------------------------------------------------------


def test_config_defaults_store_nothing_and_evaluate_every_run() -> None:
    assert config().model_dump() == {
        "evaluator": f"{THIS}:length_score",
        "sample_rate": 1.0,
        "store_payloads": "none",
        "max_payload_bytes": 16384,
    }


@pytest.mark.parametrize(
    "path", ["tests.core.test_evaluation", "pkg:mod:fn", "pkg.mod:fn()", ":fn"]
)
def test_config_rejects_an_evaluator_that_is_not_an_import_path(path: str) -> None:
    with pytest.raises(ValidationError, match="evaluator"):
        EvaluationConfig(evaluator=path)


@pytest.mark.parametrize("rate", [-0.1, 1.5])
def test_config_rejects_a_sample_rate_outside_zero_to_one(rate: float) -> None:
    with pytest.raises(ValidationError, match="sample_rate"):
        config(sample_rate=rate)


# -- sampling --------------------------------------------------------------------


@pytest.mark.parametrize("draw", [0.0, 0.5, 0.999999])
def test_rate_zero_never_samples(draw: float) -> None:
    assert is_sampled(0.0, draw) is False


@pytest.mark.parametrize("draw", [0.0, 0.5, 0.999999])
def test_rate_one_always_samples(draw: float) -> None:
    assert is_sampled(1.0, draw) is True


def test_a_draw_below_the_rate_samples_and_one_at_the_rate_does_not() -> None:
    assert (is_sampled(0.25, 0.2499), is_sampled(0.25, 0.25)) == (True, False)


@pytest.mark.parametrize(("rate", "draw"), [(1.5, 0.1), (-0.1, 0.1), (0.5, 1.0), (0.5, -0.1)])
def test_rate_or_draw_out_of_range_is_a_value_error(rate: float, draw: float) -> None:
    with pytest.raises(ValueError):
        is_sampled(rate, draw)


def test_not_sampled_record_carries_only_the_evaluator() -> None:
    assert not_sampled(config()) == EvaluationRecord(
        evaluator=f"{THIS}:length_score", sampled=False
    )


# -- stored payloads ------------------------------------------------------------


def test_none_policy_stores_nothing() -> None:
    assert stored_payload(messages_with_key(), "none", 16384) == (None, False)


def test_full_policy_keeps_the_credential() -> None:
    assert stored_payload(messages_with_key(), "full", 16384) == (messages_with_key(), False)


def test_redacted_policy_scrubs_the_credential() -> None:
    assert stored_payload(messages_with_key(), "redacted", 16384) == (
        [{"role": "user", "content": [{"type": "text", "text": "Deploy with [redacted] please."}]}],
        False,
    )


def test_redacted_policy_scrubs_string_values_under_credential_names() -> None:
    call = ToolUseBlock(
        id="toolu_1",
        name="deploy",
        input={"api_key": "abc123", "GITHUB_TOKEN": "ghp_x", "max_tokens": "50", "region": "eu"},
    )

    stored, truncated = stored_payload(call, "redacted", 16384)

    assert (stored, truncated) == (
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "deploy",
            "input": {
                "api_key": "[redacted]",
                "GITHUB_TOKEN": "[redacted]",
                "max_tokens": "50",
                "region": "eu",
            },
        },
        False,
    )


def test_payload_of_exactly_max_bytes_is_kept_whole() -> None:
    value = {"text": "a" * 19}  # {"text":"…"} is 11 bytes + 19

    assert stored_payload(value, "full", 30) == (value, False)


def test_payload_over_max_bytes_has_its_strings_cut_to_fit() -> None:
    assert stored_payload({"text": "a" * 100}, "full", 30) == ({"text": "a" * 19}, True)


def test_strings_are_cut_to_one_length_and_shorter_ones_kept() -> None:
    # {"a":"","b":""} is 15 bytes; cutting at 3 characters gives 15 + 3 + 2 = 20.
    assert stored_payload({"a": "x" * 50, "b": "yy"}, "full", 20) == (
        {"a": "xxx", "b": "yy"},
        True,
    )


def test_the_bound_counts_utf8_bytes() -> None:
    # Each "é" is 2 bytes: 11 + 2 * 9 = 29 fits, 10 of them would be 31.
    assert stored_payload({"text": "é" * 100}, "full", 30) == ({"text": "é" * 9}, True)


def test_a_structure_too_big_for_the_bound_is_stored_as_its_json_text_cut() -> None:
    numbers = list(range(100))

    stored, truncated = stored_payload(numbers, "full", 50)

    assert (stored, truncated) == (json.dumps(numbers, separators=(",", ":"))[:48], True)
    assert compact_size(stored) == 50


def test_a_redacted_payload_is_bounded_after_redaction() -> None:
    stored, truncated = stored_payload(f"{KEY} " + "z" * 5000, "redacted", 64)

    assert (stored, truncated) == (("[redacted] " + "z" * 5000)[:62], True)


def test_a_huge_redacted_string_is_cut_before_redaction_and_flagged() -> None:
    pem = "-----BEGIN PRIVATE KEY-----\n" + "A" * 20000 + "\n-----END PRIVATE KEY-----"

    assert stored_payload(pem, "redacted", 64) == ("[redacted]", True)


def test_a_credential_in_a_huge_string_is_redacted_before_the_cut() -> None:
    text = "key: " + KEY + " " + "y" * 20000

    assert stored_payload(text, "redacted", 100) == ("key: [redacted] " + "y" * 82, True)


# -- running the evaluator --------------------------------------------------------


async def test_float_score_is_recorded_with_nothing_stored_by_default() -> None:
    record = await evaluate(config(), lambda run: 0.75, messages_with_key(), "answer")

    assert record == EvaluationRecord(
        evaluator=f"{THIS}:length_score",
        sampled=True,
        score=0.75,
        input=None,
        output=None,
        truncated=False,
    )


async def test_dict_answer_gives_score_label_and_details() -> None:
    def judge(run: dict[str, Any]) -> dict[str, Any]:
        return {"score": 1, "label": "pass", "details": {"checked": ["tone", "facts"]}}

    record = await evaluate(config(), judge, "prompt", "answer")

    assert (record.score, record.label, record.details, record.error) == (
        1.0,
        "pass",
        {"checked": ["tone", "facts"]},
        None,
    )


async def test_async_evaluator_is_awaited() -> None:
    async def judge(run: dict[str, Any]) -> dict[str, Any]:
        return {"label": "needs-review"}

    record = await evaluate(config(), judge, "prompt", "answer")

    assert (record.score, record.label, record.error) == (None, "needs-review", None)


async def test_evaluator_receives_input_and_output() -> None:
    seen: list[dict[str, Any]] = []

    def judge(run: dict[str, Any]) -> float:
        seen.append(run)
        return 0.0

    await evaluate(config(), judge, messages_with_key(), "the answer")

    assert seen == [{"input": messages_with_key(), "output": "the answer"}]


async def test_evaluator_mutating_its_copies_changes_nothing_of_the_caller() -> None:
    caller_input = messages_with_key()

    def vandal(run: dict[str, Any]) -> float:
        run["input"][0]["content"][0]["text"] = "rewritten"
        run["input"].append({"role": "assistant", "content": []})
        run["output"] = "rewritten"
        return 0.5

    record = await evaluate(config(store_payloads="full"), vandal, caller_input, "answer")

    assert caller_input == messages_with_key()
    assert (record.input, record.output, record.score) == (messages_with_key(), "answer", 0.5)


@pytest.mark.parametrize("policy", ["none", "redacted", "full"])
async def test_stored_input_and_output_follow_store_payloads(policy: str) -> None:
    record = await evaluate(
        config(store_payloads=policy), lambda run: 1.0, messages_with_key(), f"used {KEY}"
    )

    expected = {
        "none": (None, None),
        "redacted": (stored_payload(messages_with_key(), "redacted", 16384)[0], "used [redacted]"),
        "full": (messages_with_key(), f"used {KEY}"),
    }[policy]
    assert (record.input, record.output) == expected


async def test_truncation_of_the_output_is_flagged() -> None:
    record = await evaluate(
        config(store_payloads="full", max_payload_bytes=10), lambda run: 1.0, "hi", "x" * 100
    )

    assert (record.input, record.output, record.truncated) == ("hi", "x" * 8, True)


async def test_evaluator_exception_is_recorded_not_raised() -> None:
    def broken(run: dict[str, Any]) -> float:
        raise RuntimeError("judge model unavailable")

    record = await evaluate(config(), broken, "prompt", "answer")

    assert (record.score, record.error) == (
        None,
        f"evaluator {THIS}:length_score raised RuntimeError: judge model unavailable",
    )


async def test_async_evaluator_exception_is_recorded_and_redacted() -> None:
    async def leaky(run: dict[str, Any]) -> float:
        raise ValueError(f"bad key {KEY}")

    record = await evaluate(config(), leaky, "prompt", "answer")

    assert record.error == f"evaluator {THIS}:length_score raised ValueError: bad key [redacted]"


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (True, "returned a bool; expected a number (the score) or a dict with score, label"),
        ("0.9", "returned a str; expected a number (the score) or a dict with score, label"),
        ({"score": float("nan")}, "returned an invalid answer (score: Input should be a finite"),
        ({"scor": 0.9}, "returned an invalid answer (scor: Extra inputs are not permitted)"),
    ],
)
async def test_an_answer_that_is_not_a_score_is_recorded_as_an_error(
    answer: Any, error: str
) -> None:
    record = await evaluate(config(), lambda run: answer, "prompt", "answer")

    assert record.score is None
    assert record.error is not None
    assert record.error.startswith(f"evaluator {THIS}:length_score {error}")


# -- loading the evaluator ------------------------------------------------------


def test_load_evaluator_imports_the_function() -> None:
    assert load_evaluator(f"{THIS}:length_score") is length_score


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_colon", "hook 'no_colon' should look like 'package.module:function'"),
        ("oma.no_such_module:fn", "no module named 'oma.no_such_module' on this worker"),
        (f"{THIS}:no_such_fn", f"module '{THIS}' has no attribute 'no_such_fn'"),
        (f"{THIS}:NOT_CALLABLE", "'NOT_CALLABLE' is a int, not a callable"),
    ],
)
def test_load_evaluator_says_why_it_cannot(path: str, message: str) -> None:
    with pytest.raises(InvalidHookError) as caught:
        load_evaluator(path)
    assert caught.value.message.startswith("evaluation.evaluator: hook ")
    assert message in caught.value.message
