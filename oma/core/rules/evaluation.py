"""Online evaluation: scoring a sample of agent runs with a user's evaluator
(``oma.core.schema.evaluation``: its configuration and its record).

An evaluator is a Python function named by import path; it receives
``{"input": ..., "output": ...}`` (its own deep copies) and returns a score.
What the ``EvaluationRecord`` keeps of the run's input and output is governed by
``store_payloads`` (structured-input.md, "Progress and online evaluation"):
``none`` omits the content, ``redacted`` and ``full`` store it bounded to
``max_payload_bytes`` of JSON, ``redacted`` with credentials scrubbed.

Pure: no I/O and no clock, so a workflow may call it (sampling takes its
random draw from the caller, e.g. ``workflow.random().random()``). Only
``load_evaluator`` imports code and ``evaluate`` runs the user's evaluator.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import to_jsonable_python

from oma.core.rules.redact import REDACTED, redact
from oma.core.schema.before_run import load_hook
from oma.core.schema.errors import InvalidHookError
from oma.core.schema.evaluation import EvaluationConfig, EvaluationRecord, StorePayloads

Evaluator = Callable[[dict[str, Any]], Any]
"""Takes ``{"input": ..., "output": ...}``; returns (or, when it is a coroutine
function, resolves to) a float score or a dict with ``score``/``label``/``details``."""

_MAX_ERROR_CHARS = 1000
_REDACTION_MARGIN_CHARS = 8192


class _EvaluatorAnswer(BaseModel):
    # Strict: a bool or a numeric string is a mistake, not a score.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    score: float | None = None
    label: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


def is_sampled(rate: float, draw: float) -> bool:
    """Whether a run with random ``draw`` in ``[0, 1)`` is evaluated at ``sample_rate`` ``rate``.

    ``draw < rate``, so rate 0 never samples and rate 1 always does. The caller
    supplies the draw so that a workflow stays deterministic
    (``workflow.random().random()``). Raises ``ValueError`` when ``rate`` is
    outside ``[0, 1]`` or ``draw`` outside ``[0, 1)``.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"sample rate must be within [0, 1], got {rate!r}")
    if not 0.0 <= draw < 1.0:
        raise ValueError(f"random draw must be within [0, 1), got {draw!r}")
    return draw < rate


def stored_payload(value: Any, policy: StorePayloads, max_bytes: int) -> tuple[Any | None, bool]:
    """What a record keeps of ``value`` under ``policy``, and whether it was truncated.

    - ``none``: ``(None, False)``.
    - ``full``: ``value`` as JSON-compatible data (pydantic models dumped in
      JSON mode, bytes as base64, anything else unknown as its ``str``).
    - ``redacted``: the same, with ``oma.core.rules.redact.redact`` applied to every string
      in it, dict keys included, and every string value under a key that
      ``redact`` takes for a credential name (``api_key``, ``GITHUB_TOKEN``,
      ``password``...) replaced by ``[redacted]``.

    Size bound: when the compact UTF-8 JSON of the result exceeds ``max_bytes``
    bytes, string values are cut: every string longer than some ``n``
    characters keeps only its first ``n``, with ``n`` as large as the bound
    allows, and the flag is ``True``. If even empty strings do not fit (the
    structure alone is too big), the result is the compact JSON text itself,
    cut the same way, a ``str``; if not even ``""`` fits, ``(None, True)``.
    Under ``redacted``, strings longer than ``max_bytes`` + 8192 characters
    are first cut to that length (and the flag is ``True``), so the cost of
    redaction does not grow with, say, a base64 image's size.

    Raises ``ValueError`` when ``value`` has no JSON form (a circular structure).
    """
    if policy == "none":
        return None, False
    data = to_jsonable_python(value, bytes_mode="base64", fallback=str)
    precut = False
    if policy == "redacted":
        # Only the first ``max_bytes`` characters of a string can be kept, so
        # redacting megabytes of image data would be wasted time (and, in a
        # workflow, could trip the deadlock detector); the margin lets a
        # credential that straddles the bound still be recognised and shrink.
        limit = max_bytes + _REDACTION_MARGIN_CHARS
        precut = _longest_string(data) > limit
        data = _redacted(_cut_strings(data, limit) if precut else data)
    if not precut and _json_size(data) <= max_bytes:
        return data, False
    cut = _cut_strings_to_fit(data, max_bytes)
    if cut is None:
        cut = _cut_strings_to_fit(_compact_json(data), max_bytes)
    return cut, True


async def evaluate(
    config: EvaluationConfig, evaluator_fn: Evaluator, input_copy: Any, output_copy: str
) -> EvaluationRecord:
    """Run ``evaluator_fn`` on one sampled run and record the outcome.

    The evaluator is called (and awaited when it returns an awaitable) with
    ``{"input": ..., "output": ...}`` built from deep copies of ``input_copy``
    and ``output_copy`` made for it alone, so nothing it mutates reaches the
    caller or the stored payloads. It must return a number (the score) or a
    dict with any of ``score`` (number), ``label`` (str) and ``details``
    (dict, stored as JSON-compatible data).

    An evaluator that raises an ``Exception``, or returns anything else, gives
    a record with ``score`` ``None`` and ``error`` the redacted reason (at most
    1000 characters); it is never raised. The stored ``input`` and ``output``
    follow ``config.store_payloads`` (see ``stored_payload``), whose
    ``ValueError`` for a value that has no JSON form at all (a circular
    structure) is the only error ``evaluate`` raises.
    """
    stored_input, input_cut = stored_payload(
        input_copy, config.store_payloads, config.max_payload_bytes
    )
    stored_output, output_cut = stored_payload(
        output_copy, config.store_payloads, config.max_payload_bytes
    )
    record = EvaluationRecord(
        evaluator=config.evaluator,
        sampled=True,
        input=stored_input,
        output=stored_output if isinstance(stored_output, str) else None,
        truncated=input_cut or output_cut,
    )
    try:
        argument = {"input": copy.deepcopy(input_copy), "output": copy.deepcopy(output_copy)}
    except Exception as err:
        record.error = _error_text(f"the run's input could not be copied: {_describe(err)}")
        return record
    try:
        result = evaluator_fn(argument)
        if inspect.isawaitable(result):
            result = await result
        answer = _answer(result)
    except Exception as err:
        record.error = _error_text(f"evaluator {config.evaluator} raised {_describe(err)}")
        return record
    if isinstance(answer, str):
        record.error = _error_text(f"evaluator {config.evaluator} {answer}")
        return record
    record.score = answer.score
    record.label = answer.label
    record.details = answer.details
    return record


def not_sampled(config: EvaluationConfig) -> EvaluationRecord:
    """The record of a run that ``is_sampled`` left out: ``sampled`` ``False``, nothing else."""
    return EvaluationRecord(evaluator=config.evaluator, sampled=False)


def load_evaluator(path: str) -> Evaluator:
    """The evaluator function named by ``package.module:function``, imported once
    per worker (``oma.core.schema.before_run.load_hook`` does the loading).

    Raises ``InvalidHookError``, its message starting ``evaluation.evaluator:``,
    when ``path`` is malformed, the module is missing or fails to import, it
    has no such attribute, or the attribute is not callable.
    """
    try:
        return cast(Evaluator, load_hook(path))
    except InvalidHookError as err:
        raise InvalidHookError(f"evaluation.evaluator: {err.message}") from err


def _answer(result: Any) -> _EvaluatorAnswer | str:
    """The evaluator's return value validated, or why it is not a valid answer."""
    if isinstance(result, int | float) and not isinstance(result, bool):
        raw: Any = {"score": result}
    elif isinstance(result, dict):
        raw = result
    else:
        return (
            f"returned a {type(result).__name__}; expected a number (the score) or a dict "
            "with score, label and details"
        )
    try:
        answer = _EvaluatorAnswer.model_validate(raw)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in err.errors()
        )
        return f"returned an invalid answer ({problems})"
    answer.details = to_jsonable_python(answer.details, bytes_mode="base64", fallback=str)
    return answer


def _describe(err: Exception) -> str:
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def _error_text(text: str) -> str:
    return redact(text)[:_MAX_ERROR_CHARS]


def _redacted(data: Any) -> Any:
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, list):
        return [_redacted(item) for item in data]
    if isinstance(data, dict):
        return {
            redact(key): REDACTED
            if isinstance(value, str) and _is_credential_name(key)
            else _redacted(value)
            for key, value in data.items()
        }
    return data


def _is_credential_name(key: str) -> bool:
    # Whatever ``redact`` scrubs as ``<key>=<value>`` names a credential; asking
    # it keeps one definition of a credential name.
    probe = f"{key}=x"
    return redact(probe) != probe


def _cut_strings_to_fit(data: Any, max_bytes: int) -> Any | None:
    """``data`` with every string cut to its first ``n`` characters, ``n`` the
    largest that fits ``max_bytes``; ``None`` when not even ``n = 0`` fits."""
    if _json_size(_cut_strings(data, 0)) > max_bytes:
        return None
    low, high = 0, _longest_string(data)  # fits at ``low``; ``high`` is the uncut length
    while low < high:
        mid = (low + high + 1) // 2
        if _json_size(_cut_strings(data, mid)) <= max_bytes:
            low = mid
        else:
            high = mid - 1
    return _cut_strings(data, low)


def _cut_strings(data: Any, limit: int) -> Any:
    if isinstance(data, str):
        return data[:limit]
    if isinstance(data, list):
        return [_cut_strings(item, limit) for item in data]
    if isinstance(data, dict):
        return {key: _cut_strings(value, limit) for key, value in data.items()}
    return data


def _longest_string(data: Any) -> int:
    if isinstance(data, str):
        return len(data)
    if isinstance(data, list):
        return max((_longest_string(item) for item in data), default=0)
    if isinstance(data, dict):
        return max((_longest_string(value) for value in data.values()), default=0)
    return 0


def _compact_json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _json_size(data: Any) -> int:
    return len(_compact_json(data).encode())
