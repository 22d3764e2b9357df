"""The activity boundary: an ``OMAError`` an activity raises becomes, once,
the failure Temporal records (``oma.worker.activity_errors``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError

from oma.core.contracts.names import ActivityName
from oma.core.schema.errors import CodecKeyMissingError, ProcessFailedError, ProviderError
from tests.support.activities import run_activity


@activity.defn(name=ActivityName.LLM_TURN)
async def rate_limited() -> None:
    try:
        raise ConnectionError("429 from the provider")
    except ConnectionError as err:
        raise ProviderError(
            "rate limited",
            error_type="rate_limit_error",
            status=429,
            request_id="req_1",
            retryable=True,
            retry_after_s=2.0,
        ) from err


@activity.defn(name=ActivityName.PROCESS_RUN)
async def exits_1() -> None:
    raise ProcessFailedError("exit status 1")


@activity.defn(name=ActivityName.READ_TASK_OUTPUTS)
async def lacks_a_key() -> None:
    raise CodecKeyMissingError("no key 'k2'")


async def test_an_activity_error_becomes_the_failure_of_its_code() -> None:
    with pytest.raises(ApplicationError) as failed:
        await run_activity(rate_limited)

    failure = failed.value
    assert (failure.type, failure.message, failure.non_retryable) == (
        "PROVIDER_ERROR",
        "rate limited",
        False,
    )
    assert failure.details == (
        {
            "code": "PROVIDER_ERROR",
            "error_type": "rate_limit_error",
            "status": 429,
            "request_id": "req_1",
        },
    )
    assert failure.next_retry_delay == timedelta(seconds=2)
    assert isinstance(failure.__cause__, ConnectionError)  # the error's own cause


async def test_a_backend_activity_failure_names_its_attempt() -> None:
    with pytest.raises(ApplicationError) as failed:
        await run_activity(exits_1)

    assert (failed.value.type, failed.value.non_retryable, failed.value.details) == (
        "PROCESS_FAILED",
        True,
        ({"code": "PROCESS_FAILED", "attempt": 1},),
    )
    assert failed.value.__cause__ is None


async def test_the_data_converters_errors_are_left_to_the_failure_converter() -> None:
    with pytest.raises(CodecKeyMissingError):
        await run_activity(lacks_a_key)
