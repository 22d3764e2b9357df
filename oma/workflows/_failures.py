"""Where workflow code turns an ``OMAError`` into the failure it raises.

An ``OMAError`` that escapes workflow code fails the workflow task, which
Temporal retries; raised as its ``ApplicationError`` (``application_error``:
the code as ``type``, no cause) it fails the run, the child or the update
instead. The places that mean the second say so with ``as_failure``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from oma.core.schema.errors import OMAError, application_error


@contextmanager
def as_failure() -> Iterator[None]:
    """Raise an ``OMAError`` raised inside as the ``ApplicationError`` of its
    code, with no cause (``raise application_error(err) from None``)."""
    try:
        yield
    except OMAError as err:
        raise application_error(err) from None
