"""The in-process agent: ``Agent`` runs one agent from Python without
Temporal (``api``), its ports calling the adapters directly (``ports``).
It does not use the client (``oma.client``): the two share only the
approval callbacks (``oma.runtime.approval_callbacks``)."""

from oma.agent.api import Agent

__all__ = ["Agent"]
