"""The ``registered_search_attributes`` activity: which of OMA's search
attributes the run's namespace has registered.

A run started without ``OmaStatus`` (``temporal workflow start`` with no
``--search-attribute``) asks once, as an activity whose answer is recorded
in its history, so that it replays the same way
(``oma.workflows._visibility.Visibility.learn``). Upserting an attribute the namespace
lacks would fail the run's workflow task on every retry.
"""

from __future__ import annotations

import logging
import time

from temporalio import activity
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.service import RPCError

from oma.core.contracts.names import ActivityName
from oma.core.contracts.visibility import (
    SEARCH_ATTRIBUTES,
    RegisteredSearchAttributesInput,
    RegisteredSearchAttributesOutput,
)

logger = logging.getLogger(__name__)

CACHE_S = 60.0
"""Seconds a namespace's answer is kept on a worker (a namespace may
register the attributes later)."""


class VisibilityActivities:
    """The ``registered_search_attributes`` activity of one worker, with its
    answers per namespace kept for ``CACHE_S`` seconds."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[float, list[str]]] = {}

    @activity.defn(name=ActivityName.REGISTERED_SEARCH_ATTRIBUTES)
    async def registered_search_attributes(
        self, inp: RegisteredSearchAttributesInput
    ) -> RegisteredSearchAttributesOutput:
        """The names of ``SEARCH_ATTRIBUTES`` the namespace has, as Keywords;
        none when the server will not say (a worker without the operator
        permission: then the run sets no attributes, as before)."""
        namespace = activity.info().namespace
        kept = self._known.get(namespace)
        if kept is not None and time.monotonic() - kept[0] < CACHE_S:
            return RegisteredSearchAttributesOutput(registered=kept[1])
        try:
            listed = await activity.client().operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=namespace)
            )
        except RPCError as err:
            logger.warning("could not list the search attributes of %s: %s", namespace, err)
            return RegisteredSearchAttributesOutput(registered=[])
        keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
        registered = sorted(
            name for name in SEARCH_ATTRIBUTES if listed.custom_attributes.get(name) == keyword
        )
        self._known[namespace] = (time.monotonic(), registered)
        return RegisteredSearchAttributesOutput(registered=registered)
