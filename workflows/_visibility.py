"""A run's search attributes as its workflow sets them (``oma.core.visibility``).

Upserting a search attribute the namespace has not registered fails the
workflow task, again on every retry: the run would wedge. So a run sets its
attributes only when its start carried ``OmaStatus`` (the client, the ``oma``
CLI and a parent run set it to ``running`` when the server has the
attributes; ``temporal workflow start --search-attribute 'OmaStatus="running"'``
does by hand), which proves the namespace has them. The upserts are workflow
commands: behind the ``VISIBILITY_PATCH`` flag, so histories recorded before
them replay.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

with workflow.unsafe.imports_passed_through():
    from oma.core import visibility

VISIBILITY_PATCH = "oma-search-attributes"
"""Runs from this flag on set their search attributes."""

STATUS = SearchAttributeKey.for_keyword(visibility.OMA_STATUS)
TEAM = SearchAttributeKey.for_keyword(visibility.OMA_TEAM)
AGENT = SearchAttributeKey.for_keyword(visibility.OMA_AGENT)
TASK = SearchAttributeKey.for_keyword(visibility.OMA_TASK)
ERROR_CODE = SearchAttributeKey.for_keyword(visibility.OMA_ERROR_CODE)


def searchable() -> bool:
    """Whether this run sets search attributes: its start carried
    ``OmaStatus`` and it runs (or replays) code from ``VISIBILITY_PATCH`` on."""
    started = workflow.info().typed_search_attributes.get(STATUS) is not None
    return started and workflow.patched(VISIBILITY_PATCH)


def identify(*, team: str | None = None, agent: str | None = None, task: str | None = None) -> None:
    """Mark the run ``running`` with what it is (once, as it starts), when ``searchable``."""
    if searchable():
        pairs = _pairs(team=team, agent=agent, task=task)
        workflow.upsert_search_attributes([pair.key.value_set(pair.value) for pair in pairs])


def ended(status: str, error_code: str | None = None) -> None:
    """Set the run's final ``OmaStatus`` (and ``OmaErrorCode``), when ``searchable``."""
    if not searchable():
        return
    updates = [STATUS.value_set(status)]
    if error_code:
        updates.append(ERROR_CODE.value_set(error_code))
    workflow.upsert_search_attributes(updates)


def for_child(*, team: str | None, agent: str, task: str | None = None) -> TypedSearchAttributes:
    """The attributes a child ``AgentRun`` starts with: ``running``, the team,
    agent and task; none when this run is not ``searchable`` (so neither is the child)."""
    if not searchable():
        return TypedSearchAttributes.empty
    return start_attributes(team=team, agent=agent, task=task)


def start_attributes(
    *, team: str | None = None, agent: str | None = None, task: str | None = None
) -> TypedSearchAttributes:
    """What a run starts with (``OmaStatus=running`` and what it is): a client
    passes these to ``start_workflow`` when the namespace has the attributes."""
    return TypedSearchAttributes(_pairs(team=team, agent=agent, task=task))


def _pairs(
    *, team: str | None, agent: str | None, task: str | None
) -> list[SearchAttributePair[str]]:
    pairs = [SearchAttributePair(STATUS, "running")]
    for key, value in ((TEAM, team), (AGENT, agent), (TASK, task)):
        if value:
            pairs.append(SearchAttributePair(key, value))
    return pairs
