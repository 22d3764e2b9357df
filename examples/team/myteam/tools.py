"""Custom tools: plain Python functions the worker imports and an LLM agent calls."""

from __future__ import annotations

TICKETS = {
    "OMA-7": "closed: the worker image runs the README's examples",
    "OMA-8": "open: waiting for review",
}
"""A stand-in for a tracker's API."""


def ticket_status(ticket: str) -> str:
    """The status of a ticket, by its id (e.g. ``OMA-7``)."""
    return TICKETS.get(ticket, f"unknown ticket {ticket!r}")
