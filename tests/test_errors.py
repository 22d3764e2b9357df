"""The one error hierarchy: every code a class, each class under the base that
says what kind of problem it is, one registry from code to class."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from oma.core import errors
from oma.core.errors import (
    ERRORS,
    AbortedError,
    ApprovalError,
    ApprovalStaleDecisionError,
    InputError,
    OMAError,
    ProviderError,
    RunError,
    RunStoppedError,
    SetupError,
    application_error,
    error_for,
)

BASES = (InputError, SetupError, RunError, ProviderError, ApprovalError)


def test_every_error_class_has_a_code_of_its_own_in_the_registry() -> None:
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, OMAError)]
    assert len({c.code for c in classes}) == len(classes)
    assert all(ERRORS[c.code] is c for c in classes)


def test_every_error_but_the_root_falls_under_one_kind_of_problem() -> None:
    loose = [c.__name__ for c in ERRORS.values() if c is not OMAError and not issubclass(c, BASES)]
    assert loose == []


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("INVALID_RUN_INPUT", InputError),
        ("INVALID_TASK_GRAPH", InputError),
        ("TEMPORAL_UNAVAILABLE", SetupError),
        ("PROCESS_FAILED", RunError),
        ("ABORTED", RunStoppedError),
        ("APPROVAL_REJECTED", RunStoppedError),
        ("CANCELLED", RunStoppedError),
        ("TASK_TIMEOUT", RunStoppedError),
        ("APPROVAL_CONFLICT", ApprovalError),
    ],
)
def test_a_code_read_back_is_an_error_of_its_kind(code: str, kind: type[OMAError]) -> None:
    err = error_for(code, "why")
    assert isinstance(err, kind)
    assert (err.code, err.message) == (code, "why")


def test_an_unknown_code_keeps_the_code_on_a_plain_error() -> None:
    err = error_for("SOMETHING_NEW", "why")
    assert type(err) is OMAError
    assert str(err) == "SOMETHING_NEW: why"


def test_a_stop_is_a_run_error_and_an_input_error_is_not() -> None:
    assert isinstance(AbortedError("x"), RunError)
    assert not isinstance(ApprovalStaleDecisionError("x"), (InputError, RunError))


def test_a_provider_error_crosses_temporal_with_its_wire_type_status_and_request_id() -> None:
    failure = application_error(
        ProviderError(
            "overloaded",
            error_type="overloaded_error",
            status=529,
            request_id="req_1",
            retryable=True,
            retry_after_s=2,
        )
    )
    assert isinstance(failure, ApplicationError)
    assert (failure.type, failure.non_retryable) == ("PROVIDER_ERROR", False)
    assert failure.details[0] == {
        "code": "PROVIDER_ERROR",
        "error_type": "overloaded_error",
        "status": 529,
        "request_id": "req_1",
    }
    assert failure.next_retry_delay is not None
    assert failure.next_retry_delay.total_seconds() == 2
