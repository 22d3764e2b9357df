"""Where the tests find the repository and what it holds: every path the
tests compute from a module's own location is computed here, once, so a
module can move between the test folders without its paths changing."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
"""``tests/support/``: the shared helpers, the local stand-ins for the model
APIs and S3, and the programs the tests start."""

TESTS = SUPPORT.parent
"""``tests/``."""

ROOT = TESTS.parent
"""The repository's root (a checkout: ``oma/``, ``docs/``, ``examples/``...)."""

HISTORIES = TESTS / "histories"
"""The recorded histories that must keep replaying (``tests/support/record_histories.py``)."""

ACP_AGENT = SUPPORT / "acp_agent.py"
"""The scriptable ACP agent, run as ``python tests/support/acp_agent.py``."""
