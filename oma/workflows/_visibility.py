"""A run's search attributes as its workflow sets them (``oma.core.contracts.visibility``).

Upserting a search attribute the namespace has not registered fails the
workflow task, again on every retry: the run would wedge. So a run sets its
attributes only when its start carried ``OmaStatus`` (the client, the ``oma``
CLI and a parent run set it to ``running`` when the server has the
attributes), which proves the namespace has them, or when it asked the
server as it started (``Visibility.learn``: a run started with the stock
``temporal workflow start``). Each run holds its ``Visibility``. The upserts are workflow
commands: behind the ``_patches.SEARCH_ATTRIBUTES`` flag, so histories recorded before
them replay (``awaiting_approval`` behind ``_patches.AWAITING_APPROVAL_STATUS``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import timedelta

from temporalio import workflow
from temporalio.common import (
    RetryPolicy,
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
)
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from oma.core.contracts import visibility
    from oma.core.contracts.names import ActivityName
    from oma.core.contracts.visibility import (
        AWAITING_APPROVAL,
        RUNNING,
        RegisteredSearchAttributesInput,
        RegisteredSearchAttributesOutput,
    )
    from oma.core.rules.approval_gate import ApprovalGate
    from oma.workflows import _patches
    from oma.workflows._waiting import reraise_cancel


STATUS = SearchAttributeKey.for_keyword(visibility.OMA_STATUS)
TEAM = SearchAttributeKey.for_keyword(visibility.OMA_TEAM)
AGENT = SearchAttributeKey.for_keyword(visibility.OMA_AGENT)
TASK = SearchAttributeKey.for_keyword(visibility.OMA_TASK)
ERROR_CODE = SearchAttributeKey.for_keyword(visibility.OMA_ERROR_CODE)
FORKED_FROM = SearchAttributeKey.for_keyword(visibility.OMA_FORKED_FROM)


class Visibility:
    """The search attributes of one run (a ``TeamRun``'s or an ``AgentRun``'s),
    made as the run is: what ``learn`` found (whether the namespace has the
    attributes, and which), and whether ``ended`` set how the run ended (then
    ``show_waiting`` stops). Every upsert is asked where the run asks it, so
    the patches behind them (``_patches``) are asked in the same workflow
    task as before this was an object."""

    def __init__(self) -> None:
        self._learned = False
        self._registered: Sequence[str] = ()
        self.has_ended = False

    async def learn(self) -> None:
        """Find out, once as the run starts, whether its namespace has the
        attributes when its start did not say (``temporal workflow start`` with
        no ``--search-attribute``): the ``registered_search_attributes`` activity
        asks the server, and its answer is in the history, so the run replays the
        same way. (A regular activity, not a local one: a local activity's answer
        can reach a replay a workflow task earlier than it reached the run, and
        the ``patched`` calls right after it would then disagree with the
        history.) Runs from before ``SEARCH_ATTRIBUTES_LEARNED`` never ask, nor
        does a task's run its team run started with attributes off
        (``visibility.OMA_SEARCH_ATTRIBUTES_MEMO``)."""
        if _started_with_status() or not _patches.patched(_patches.SEARCH_ATTRIBUTES_LEARNED):
            return
        if workflow.memo_value(visibility.OMA_SEARCH_ATTRIBUTES_MEMO, None) == "off":
            return  # its team run started it without them on purpose
        try:
            out = await workflow.execute_activity(
                ActivityName.REGISTERED_SEARCH_ATTRIBUTES,
                RegisteredSearchAttributesInput(),
                result_type=RegisteredSearchAttributesOutput,
                summary="are the OMA search attributes registered?",
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
        except ActivityError as err:
            reraise_cancel(err)
            # no answer: set none (an upsert the namespace cannot take would wedge the run)
            workflow.logger.warning("search attributes not set: %s", err.cause or err)
            return
        self._learned = out.complete
        self._registered = out.registered

    def searchable(self) -> bool:
        """Whether this run sets search attributes: its start carried
        ``OmaStatus`` or ``learn`` found them registered, and it runs (or
        replays) code from ``_patches.SEARCH_ATTRIBUTES`` on."""
        known = _started_with_status() or self._learned
        return known and _patches.patched(_patches.SEARCH_ATTRIBUTES)

    def identify(
        self, *, team: str | None = None, agent: str | None = None, task: str | None = None
    ) -> None:
        """Mark the run ``running`` with what it is (once, as it starts), when
        ``searchable`` and its start did not already say so (from
        ``_patches.ONE_MARKER`` on: a client or its parent run started it so)."""
        if not self.searchable():
            return
        pairs = _pairs(team=team, agent=agent, task=task)
        started = workflow.info().typed_search_attributes
        if all(started.get(p.key) == p.value for p in pairs) and _patches.patched(
            _patches.ONE_MARKER
        ):
            return
        workflow.upsert_search_attributes([pair.key.value_set(pair.value) for pair in pairs])

    def ended(self, status: str, error_code: str | None = None) -> None:
        """Set the run's final ``OmaStatus`` (and ``OmaErrorCode``), when ``searchable``."""
        self.has_ended = True  # and show_waiting stops
        if not self.searchable():
            return
        updates = [STATUS.value_set(status)]
        if error_code:
            updates.append(ERROR_CODE.value_set(error_code))
        workflow.upsert_search_attributes(updates)

    async def show_waiting(self, gate: ApprovalGate, show_details: Callable[[], None]) -> None:
        """While the run runs (a task of its own, started as it starts): each
        time its open approval requests change (``gate.changes``),
        ``show_details()`` names them, and ``OmaStatus`` says
        ``awaiting_approval`` while any is open, ``running`` once none is, when
        the run is ``searchable``. Stops once ``ended`` set how the run ended.

        The upserts are commands: runs from before
        ``_patches.AWAITING_APPROVAL_STATUS`` replay without them (the patch is
        on with the marker a run records as it starts, ``_patches.at_start``;
        runs recorded before that asked it when their first request opened). A
        request opened and closed within one workflow task changes nothing."""
        seen, shown = -1, False
        while not self.has_ended:
            if gate.changes != seen:
                seen = gate.changes
                show_details()
                waiting = bool(gate.open)
                if waiting != shown and self._may_show_waiting():
                    status = AWAITING_APPROVAL if waiting else RUNNING
                    workflow.upsert_search_attributes([STATUS.value_set(status)])
                    shown = waiting
            await workflow.wait_condition(functools.partial(self._changed, gate, seen))

    def _changed(self, gate: ApprovalGate, seen: int) -> bool:
        return gate.changes != seen or self.has_ended

    def _may_show_waiting(self) -> bool:
        # (a run from before the patch keeps saying running)
        return self.searchable() and _patches.patched(_patches.AWAITING_APPROVAL_STATUS)

    def cancelled(self, error_code: str | None = None) -> None:
        """The run was cancelled wherever it waited (an approval, a timer, a
        child, an activity): ``OmaStatus`` ``cancelled``, unless it already says
        how the run ended. Runs from before ``STATUS_ON_EVERY_END`` set it only
        for a cancelled activity."""
        if self.has_ended or not self.searchable():
            return
        if _patches.patched(_patches.STATUS_ON_EVERY_END):
            self.ended("cancelled", error_code)

    def continuing(self) -> TypedSearchAttributes | None:
        """Before the run continues as new: this execution's ``OmaStatus`` says
        ``continued_as_new`` and the attributes the next one starts with say
        ``running`` (``None``: nothing to set, the next run takes this one's)."""
        if not self.searchable() or not _patches.patched(_patches.STATUS_ON_EVERY_END):
            return None
        self.ended("continued_as_new")
        return workflow.info().typed_search_attributes.updated(
            SearchAttributePair(STATUS, "running")
        )

    def forked_from(self, source: str) -> None:
        """A fork: set ``OmaForkedFrom`` to ``source``, when the run is
        ``searchable`` and the namespace has that attribute (the client started
        the run with it, or ``learn`` found it registered)."""
        if (
            not self.searchable()
            or workflow.info().typed_search_attributes.get(FORKED_FROM) is not None
        ):
            return
        if visibility.OMA_FORKED_FROM in self._registered:
            workflow.upsert_search_attributes([FORKED_FROM.value_set(source)])

    def for_child(
        self, *, team: str | None, agent: str | None, task: str | None = None
    ) -> TypedSearchAttributes:
        """The attributes a child starts with (an ``AgentRun``, a shard's
        ``TeamRun``): ``running``, the team, agent and task; none when this
        run is not ``searchable`` (so neither is the child)."""
        if not self.searchable():
            return TypedSearchAttributes.empty
        return start_attributes(team=team, agent=agent, task=task)

    def for_task(
        self, *, team: str, agent: str, task: str, searchable: bool
    ) -> tuple[TypedSearchAttributes, dict[str, str] | None]:
        """The attributes and the memo a task's ``AgentRun`` starts with:
        ``for_child``'s, or (``searchable`` false: the run's
        ``options.task_search_attributes``) none, and the memo that tells the
        child to set none either."""
        if searchable:
            return self.for_child(team=team, agent=agent, task=task), None
        return TypedSearchAttributes.empty, {visibility.OMA_SEARCH_ATTRIBUTES_MEMO: "off"}


def _started_with_status() -> bool:
    return workflow.info().typed_search_attributes.get(STATUS) is not None


def start_attributes(
    *, team: str | None = None, agent: str | None = None, task: str | None = None
) -> TypedSearchAttributes:
    """What a run starts with (``OmaStatus=running`` and what it is): a client
    passes these to ``start_workflow`` when the namespace has the attributes."""
    return TypedSearchAttributes(_pairs(team=team, agent=agent, task=task))


def _pairs(
    *, team: str | None, agent: str | None, task: str | None
) -> list[SearchAttributePair[str]]:
    values = visibility.start_values(team=team, agent=agent, task=task)
    return [SearchAttributePair(SearchAttributeKey.for_keyword(k), v) for k, v in values.items()]
