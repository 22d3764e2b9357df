"""Input and output of the ``process_run`` activity: one run of a local command."""

from __future__ import annotations

from pydantic import BaseModel, Field

from oma.core.schema.backends import ProcessBackendConfig


class ProcessRunInput(BaseModel):
    """Run ``backend.command`` once with ``prompt``.

    ``system_prompt`` (when non-empty) is joined before ``prompt`` with a blank
    line between, and the joined text goes to the command as ``backend.input``
    says.
    """

    agent: str = Field(description="Name of the agent, for error messages.")
    backend: ProcessBackendConfig
    system_prompt: str = ""
    prompt: str


class ProcessRunOutput(BaseModel):
    """A successful run: exit status 0. ``stdout`` is the agent's output."""

    stdout: str
    exit_code: int = 0
    attempt: int = Field(
        default=1,
        description="The activity attempt that ran the command: more than 1 when Temporal "
        "started it again, so that the command may have run that many times.",
    )
