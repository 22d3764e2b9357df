"""The one error hierarchy: every code a class, each class under the base that
says what kind of problem it is, one registry from code to class."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil

import pytest
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError

import oma
from oma.core.schema import errors
from oma.core.schema.errors import (
    ERRORS,
    AbortedError,
    AcpAgentExitedError,
    AcpProtocolError,
    ApprovalError,
    ApprovalStaleDecisionError,
    HistoryReadError,
    InputError,
    OMAError,
    ProviderError,
    RunError,
    RunStoppedError,
    SetupError,
    application_error,
    error_for,
    error_from_failure,
)
from tests.support.paths import ROOT

BASES = (InputError, SetupError, RunError, ProviderError, ApprovalError)


def test_every_error_class_has_a_code_of_its_own_in_the_registry() -> None:
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, OMAError)]
    assert len({c.code for c in classes}) == len(classes)
    assert all(ERRORS[c.code] is c for c in classes)


def _every_oma_error_class() -> set[type[OMAError]]:
    """Every ``OMAError`` subclass defined anywhere in the installed ``oma``
    package (each module imported)."""
    for module in pkgutil.walk_packages(oma.__path__, "oma."):
        if not module.name.endswith(".__main__"):  # it runs the command
            importlib.import_module(module.name)

    def below(cls: type[OMAError]) -> set[type[OMAError]]:
        return {cls}.union(*(below(sub) for sub in cls.__subclasses__()))

    return {c for c in below(OMAError) if c.__module__.startswith("oma.")}


def test_every_error_class_of_the_package_is_in_the_registry() -> None:
    missing = {c.__qualname__ for c in _every_oma_error_class() if ERRORS.get(c.code) is not c}
    assert missing == set()


def test_an_unreadable_history_is_an_input_error_in_the_registry() -> None:
    assert ERRORS["HISTORY_UNREADABLE"] is HistoryReadError
    assert isinstance(error_for("HISTORY_UNREADABLE", "not JSON"), InputError)


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


async def _across_temporal(err: OMAError, *, attempt: int | None = None) -> ApplicationError:
    """``err`` as an activity raises it, after the failure went through the
    data converter both ways (what a workflow or a client then reads)."""
    converter = DataConverter.default
    failure = Failure()
    await converter.encode_failure(application_error(err, attempt=attempt), failure)
    decoded = await converter.decode_failure(failure)
    assert isinstance(decoded, ApplicationError)
    return decoded


async def test_a_provider_error_read_back_keeps_its_status_request_id_and_retry_delay() -> None:
    sent = ProviderError(
        "rate limited",
        error_type="rate_limit_error",
        status=429,
        request_id="req_42",
        retryable=True,
        retry_after_s=3,
    )

    err = error_from_failure(await _across_temporal(sent))

    assert isinstance(err, ProviderError)
    assert (err.message, err.error_type, err.status, err.request_id) == (
        "rate limited",
        "rate_limit_error",
        429,
        "req_42",
    )
    assert (err.retryable, err.retry_after_s) == (True, 3.0)


async def test_an_acp_protocol_error_crosses_temporal_with_its_rpc_code() -> None:
    sent = AcpProtocolError("agent 'coder' answered session/prompt with ...", rpc_code=-32000)

    failure = await _across_temporal(sent, attempt=2)
    err = error_from_failure(failure)

    assert failure.details[0] == {"code": "ACP_PROTOCOL_ERROR", "attempt": 2, "rpc_code": -32000}
    assert isinstance(err, AcpProtocolError)
    assert (err.rpc_code, err.retryable) == (-32000, False)


async def test_a_retryable_error_read_back_is_retryable() -> None:
    err = error_from_failure(await _across_temporal(AcpAgentExitedError("gone")))

    assert isinstance(err, AcpAgentExitedError)
    assert err.retryable is True


def test_an_error_without_fields_has_only_its_code_in_the_details() -> None:
    failure = application_error(AbortedError("stop"))

    assert failure.details[0] == {"code": "ABORTED"}
    assert AbortedError("stop").fields() == {}


def test_fields_a_class_does_not_declare_are_not_set() -> None:
    err = error_for("ACP_PROTOCOL_ERROR", "bad", {"rpc_code": -32601, "status": 500})

    assert isinstance(err, AcpProtocolError)
    assert err.rpc_code == -32601
    assert not hasattr(err, "status")


def test_a_failure_without_details_reads_back_with_empty_fields() -> None:
    err = error_from_failure(ApplicationError("overloaded", type="PROVIDER_ERROR"))

    assert isinstance(err, ProviderError)
    assert (err.status, err.request_id, err.retry_after_s) == (None, None, None)


# -- the table of codes in docs/errors.md ------------------------------------------

ERROR_DOC = ROOT / "docs" / "errors.md"
TABLE_START = (
    "<!-- error codes: generated from oma.core.schema.errors.ERRORS, do not edit by hand -->"
)
TABLE_END = "<!-- end of error codes -->"
KINDS = (
    (InputError, "The caller's input"),
    (SetupError, "The environment"),
    (RunStoppedError, "A run that stopped early"),
    (RunError, "A run or a task that failed"),
    (ProviderError, "A model provider"),
    (ApprovalError, "An approval decision refused"),
    (OMAError, "Any other"),
)


def _kind(cls: type[OMAError]) -> type[OMAError]:
    return next(base for base, _ in KINDS if issubclass(cls, base))


def _when(cls: type[OMAError]) -> str:
    first = (inspect.getdoc(cls) or "").split("\n\n")[0]
    return " ".join(first.split()).replace("``", "`").replace("|", "\\|")


def _retried(cls: type[OMAError]) -> str:
    if "retryable" in inspect.signature(cls.__init__).parameters:
        return "per error (`retryable`)"
    return "yes" if cls.retryable else "no"


def error_tables() -> str:
    """The Markdown of every code in ``ERRORS``: a table per kind, the base first."""
    out: list[str] = []
    for base, title in KINDS:
        rows = sorted(
            (c for c in ERRORS.values() if _kind(c) is base),
            key=lambda c: (c is not base, c.code),
        )
        out += [f"\n## {title}: `{base.__name__}`\n", "| code | class | retried | when |"]
        out.append("|---|---|---|---|")
        out += [f"| `{c.code}` | `{c.__name__}` | {_retried(c)} | {_when(c)} |" for c in rows]
    return "\n".join(out) + "\n"


def test_the_docs_list_every_error_code_and_only_those() -> None:
    text = ERROR_DOC.read_text()
    head, rest = text.split(TABLE_START + "\n")
    tables, tail = rest.split(TABLE_END)
    if os.environ.get("OMA_WRITE_DOCS") == "1":
        ERROR_DOC.write_text(f"{head}{TABLE_START}\n{error_tables()}{TABLE_END}{tail}")
        return
    listed = {line.split("`")[1] for line in tables.splitlines() if line.startswith("| `")}
    assert listed == set(ERRORS), "docs/errors.md lists other codes than ERRORS"
    assert tables == error_tables(), (
        "docs/errors.md is not what ERRORS says; rewrite it with "
        "OMA_WRITE_DOCS=1 .venv/bin/pytest -q tests/core/test_errors.py -k docs"
    )


def _product_source() -> str:
    """The text of every product module but the catalogue itself."""
    top = ROOT
    files = [top / "worker.py", top / "oma"]
    paths = [p for f in files for p in ([f] if f.is_file() else f.rglob("*.py"))]
    catalogue = top / "oma" / "core" / "schema" / "errors.py"
    return "\n".join(p.read_text() for p in paths if p.resolve() != catalogue.resolve())


def test_every_error_that_is_no_base_is_raised_or_reported_by_the_product() -> None:
    source = _product_source()
    unused = [
        c.__name__
        for c in ERRORS.values()
        if not c.__subclasses__()
        and f"{c.__name__}(" not in source  # raised or built
        and f"{c.__name__}.code" not in source  # a result's error_code, a failure's type
        and f"{c.__name__})" not in source  # a table of stops: (status, error class)
    ]
    assert unused == []
