"""Activity attempts Temporal gave up on, as a test's ``ActivityEnvironment``
cancels them."""

from __future__ import annotations

from temporalio.activity import ActivityCancellationDetails

SUPERSEDED = {
    "not_found": ActivityCancellationDetails(not_found=True),
    "timed_out": ActivityCancellationDetails(not_found=True, timed_out=True),
    "reset": ActivityCancellationDetails(reset=True),
}
"""Why Temporal gave an attempt up: the server refused its heartbeat (not
found: timed out and retried, or the workflow is gone), the SDK's own
heartbeat timer ran out, or an operator reset the activity."""
