"""The JSON-RPC errors ``oma acp`` answers with, by the ACP SDK's names.

The SDK's ``RequestError`` has one factory per JSON-RPC code
(``invalid_request`` -32600, ``invalid_params`` -32602, ``internal_error``
-32603, ``resource_not_found`` -32002, ...): the code of an error sent
here is always one of theirs, never a bare number. Their messages say only
"Invalid params"; an editor shows an error's message to its user, so the
message sent is the ``OMAError``'s own, and ``data`` carries its ``code``
and ``message`` (docs/editors.md).
"""

from __future__ import annotations

from typing import Any

from acp import RequestError

from oma.core.schema.errors import OMAError


def request_error(kind: RequestError, message: str, data: dict[str, Any] | None) -> RequestError:
    """An error of ``kind``'s code (a ``RequestError`` from one of the SDK's
    factories, e.g. ``RequestError.invalid_params()``) with ``message`` and
    ``data``."""
    return RequestError(kind.code, message, data)


def oma_request_error(kind: RequestError, err: OMAError) -> RequestError:
    """``err`` as an error of ``kind``'s code: ``str(err)`` its message,
    ``{"code": err.code, "message": err.message}`` its data."""
    return request_error(kind, str(err), {"code": err.code, "message": err.message})
