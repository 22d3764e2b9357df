"""Driving ACP agents from a worker: OMA is the Agent Client Protocol client.

``AcpSession`` owns one agent subprocess and one ACP session; ``SessionPool``
keeps a worker's sessions across activities; ``PermissionGate`` answers the
agent's permission requests. The activities themselves are in
``oma.activities.acp_prompt``.
"""

from oma.activities.acp._turn import ProgressCallback, TurnResult
from oma.activities.acp.permissions import PermissionGate, PermissionQuestion, PermissionSetting
from oma.activities.acp.pool import SessionPool
from oma.activities.acp.session import CANCEL_GRACE_S, KILL_GRACE_S, AcpSession, PromptTurn

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
