"""``OmaPlugin``: the product on Temporal, as one SDK plugin.

Every process that talks to Temporal uses it: a client (``oma`` CLI, the
Python client, the tests) gets the data converter every OMA payload uses
(pydantic JSON, ``DATA_CONVERTER``); a ``Replayer`` gets the converter and
the workflows; a worker built with ``OmaPlugin(activities)`` gets the
workflows and the activities it serves, and the heartbeat throttle that lets
a cancel reach an activity within about a second.
(``temporalio.plugin.SimplePlugin``, the SDK's plugin interface:
https://docs.temporal.io/develop/python/temporal-client#plugins.)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import Replayer, WorkerConfig

from oma.core.validation import UndecodableInput
from oma.workflows.agent_run import AgentRun
from oma.workflows.team_run import TeamRun

if TYPE_CHECKING:
    from oma.worker import Activities

WORKFLOWS: Sequence[type] = (TeamRun, AgentRun)
"""Every OMA workflow."""

HEARTBEAT_THROTTLE = timedelta(milliseconds=500)
"""Heartbeats reach the server at most this often, and at least this often when
an activity heartbeats faster, so a cancel reaches a running activity within
about a second (the SDK's default throttle is 30 s without a heartbeat timeout)."""


class OmaPayloadConverter(PydanticPayloadConverter):
    """The pydantic payload converter, except that a payload decoded without a
    type hint that cannot be decoded becomes an ``UndecodableInput``.

    OMA's workflows and handlers take their arguments untyped (``*args``)
    and validate them themselves, so any bytes a client sends end in a clear
    ``INVALID_RUN_INPUT`` (or an ``approval_refused`` event) rather than a
    workflow task that fails and is retried forever ("Failed decoding
    arguments"). Typed decodes (results, queries) raise as before.
    """

    def from_payloads(
        self, payloads: Sequence[Payload], type_hints: list[type] | None = None
    ) -> list[Any]:
        if type_hints is not None:
            return super().from_payloads(payloads, type_hints)
        return [self._decoded(payload) for payload in payloads]

    def _decoded(self, payload: Payload) -> Any:
        try:
            return super().from_payloads([payload])[0]
        except ValidationError as err:  # pydantic's JSON parser: "Invalid JSON: ..."
            return UndecodableInput("; ".join(e["msg"] for e in err.errors()))
        except Exception as err:  # any bytes at all: say what is wrong, do not fail
            return UndecodableInput(str(err) or type(err).__name__)


DATA_CONVERTER = DataConverter(payload_converter_class=OmaPayloadConverter)
"""The product's data converter: pydantic JSON, lenient for untyped arguments."""


class OmaPlugin(SimplePlugin):
    """The data converter and the workflows; on a worker, also its activities.

    Without ``activities`` (a client, a replayer) it leaves the workers of
    its client alone: a worker says what it serves with its own
    ``OmaPlugin(activities)``. With them, a worker on
    ``activities.session_task_queue`` (this process's own queue, where the
    later turns of its ACP sessions are routed) serves the session activities
    only; a worker on any other queue serves every workflow and activity.
    """

    def __init__(self, activities: Activities | None = None) -> None:
        super().__init__("oma", data_converter=DATA_CONVERTER, workflows=list(WORKFLOWS))
        self.oma_activities = activities

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        if self.oma_activities is None:
            return config
        config["max_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        config["default_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        if config.get("task_queue") == self.oma_activities.session_task_queue:
            served = self.oma_activities.session_activities()
        else:
            config = super().configure_worker(config)
            served = self.oma_activities.all()
        config["activities"] = [*config.get("activities", ()), *served]
        return config


def replayer() -> Replayer:
    """A ``Replayer`` of every OMA workflow, with the product's data converter."""
    return Replayer(workflows=[], plugins=[OmaPlugin()])
