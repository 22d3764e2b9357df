"""Answering ``session/request_permission`` (ACP "Tool Calls: Requesting
Permission") as an agent's ``backend.permission`` says.

external-agents.md, "ACP permissions": ``auto-approve`` picks the
least-privilege allow option (``allow_once`` before ``allow_always``),
``reject`` the reject options (``reject_once`` before ``reject_always``), and a
``PermissionPolicy`` decides per request, by its rules or by a Python callable.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
)

from oma.core.schema.backends import PermissionPolicy
from oma.core.schema.before_run import load_hook
from oma.core.schema.errors import InvalidHookError, InvalidRunInputError
from oma.core.schema.results import PermissionRecord

PermissionSetting = Literal["auto-approve", "reject"] | PermissionPolicy
"""The type of ``AcpBackendConfig.permission``."""

PermissionCallable = Callable[[dict[str, Any]], Any]
"""A policy's ``callable``: takes ``{"title", "kind", "option_kinds"}`` and returns
(or, when it is a coroutine function, resolves to) a value whose truth approves."""

_ALLOW_KINDS = ("allow_once", "allow_always")
_REJECT_KINDS = ("reject_once", "reject_always")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PermissionQuestion:
    """What a policy sees of one permission request: the tool call's ``title``
    and ``kind`` (ACP ``ToolKind``) and the kinds of the options offered."""

    title: str
    kind: str | None
    option_kinds: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """The SDK-agnostic shape a policy callable receives."""
        return {"title": self.title, "kind": self.kind, "option_kinds": list(self.option_kinds)}


class PermissionGate:
    """Decides permission requests for one session by ``backend.permission``.

    Built when the session opens, so that a policy that cannot work on this
    worker fails before anything is spawned: raises ``InvalidRunInputError``
    when a rule's ``title_pattern`` is not a valid regular expression or the
    ``callable`` cannot be imported.
    """

    def __init__(self, setting: PermissionSetting) -> None:
        self._setting = setting
        self._callable: PermissionCallable | None = None
        self._patterns: list[re.Pattern[str] | None] = []
        if isinstance(setting, PermissionPolicy):
            if setting.callable is not None:
                self._callable = load_callable(setting.callable)
            self._patterns = [_compile(rule.title_pattern) for rule in setting.rules]

    async def approves(self, question: PermissionQuestion) -> bool:
        """Whether to approve: ``True`` for ``auto-approve``, ``False`` for
        ``reject``; for a policy, the callable's answer when it has one, else
        the first rule that matches (its ``kind`` equals the request's and its
        ``title_pattern`` is found in the title, each when set), else the
        policy's ``default``.

        A callable that raises rejects (fail closed); the error is logged.
        """
        setting = self._setting
        if not isinstance(setting, PermissionPolicy):
            return setting == "auto-approve"
        if self._callable is not None:
            return await self._ask_callable(setting.callable or "", question)
        for rule, pattern in zip(setting.rules, self._patterns, strict=True):
            if rule.kind is not None and rule.kind != question.kind:
                continue
            if pattern is not None and pattern.search(question.title) is None:
                continue
            return rule.decision == "approve"
        return setting.default == "approve"

    async def _ask_callable(self, path: str, question: PermissionQuestion) -> bool:
        assert self._callable is not None
        try:
            answer = self._callable(question.as_dict())
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception:
            logger.exception("permission callable %s failed; rejecting %r", path, question.title)
            return False
        return bool(answer)


def answer(
    options: list[PermissionOption], approve: bool | None
) -> tuple[RequestPermissionResponse, PermissionOption | None]:
    """The response to a permission request and the option it selects.

    ``approve=True`` selects ``allow_once``, else ``allow_always``;
    ``approve=False`` selects ``reject_once``, else ``reject_always``. When
    approving finds no allow option the request is rejected instead; when no
    option fits (or ``approve`` is ``None``, for a cancelled turn) the outcome
    is ``cancelled``.
    """
    option = None
    if approve:
        option = _first_of_kinds(options, _ALLOW_KINDS)
    if option is None and approve is not None:
        option = _first_of_kinds(options, _REJECT_KINDS)
    if option is None:
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled")), None
    return (
        RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
        ),
        option,
    )


def permission_record(
    tool_call_id: str | None, question: PermissionQuestion, option: PermissionOption | None
) -> PermissionRecord:
    """The ``PermissionRecord`` of a request answered with ``option`` (``None``: cancelled)."""
    return PermissionRecord(
        tool_call_id=tool_call_id,
        title=question.title,
        kind=question.kind,
        option_kinds=list(question.option_kinds),
        outcome="cancelled" if option is None else "selected",
        option_id=None if option is None else option.option_id,
        approved=option is not None and option.kind in _ALLOW_KINDS,
    )


def load_callable(path: str) -> PermissionCallable:
    """The function named by ``package.module:function``, imported once per
    worker (``oma.core.schema.before_run.load_hook`` does the loading).

    Raises ``InvalidRunInputError`` when it cannot be imported or is not callable.
    """
    try:
        return cast(PermissionCallable, load_hook(path))
    except InvalidHookError as err:
        raise InvalidRunInputError(
            f"backend.permission.callable {path!r} cannot be loaded on this worker: {err.message}"
        ) from err


def _first_of_kinds(
    options: list[PermissionOption], kinds: tuple[str, ...]
) -> PermissionOption | None:
    for kind in kinds:
        for option in options:
            if option.kind == kind:
                return option
    return None


def _compile(pattern: str | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as err:
        raise InvalidRunInputError(
            f"backend.permission.rules title_pattern {pattern!r} is not a valid "
            f"regular expression: {err}"
        ) from err
