"""Driving ACP agents from a worker: OMA is the Agent Client Protocol client.

``AcpSession`` owns one agent subprocess and one ACP session; ``SessionPool``
keeps a worker's sessions across activities; ``PermissionGate`` answers the
agent's permission requests. The activities themselves are in
``oma.activities.acp_prompt``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from oma.activities.acp._process import CANCEL_GRACE_S, KILL_GRACE_S
from oma.activities.acp.pool import SessionPool

if TYPE_CHECKING:
    from oma.activities.acp._turn import ProgressCallback, TurnResult
    from oma.activities.acp.permissions import (
        PermissionGate,
        PermissionQuestion,
        PermissionSetting,
    )
    from oma.activities.acp.session import AcpSession, PromptTurn

__all__ = [
    "CANCEL_GRACE_S",
    "KILL_GRACE_S",
    "AcpSession",
    "PermissionGate",
    "PermissionQuestion",
    "PermissionSetting",
    "ProgressCallback",
    "PromptTurn",
    "SessionPool",
    "TurnResult",
]

_LAZY = {
    "ProgressCallback": "_turn",
    "TurnResult": "_turn",
    "PermissionGate": "permissions",
    "PermissionQuestion": "permissions",
    "PermissionSetting": "permissions",
    "AcpSession": "session",
    "PromptTurn": "session",
}
"""The names whose modules import the acp SDK (``acp.schema`` alone costs half
a second of CPU): imported when asked for (PEP 562), not by the pool."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
