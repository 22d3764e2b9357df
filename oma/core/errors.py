"""The one error hierarchy of OMA on Temporal.

Every error carries a stable, machine-readable ``code``. When an error crosses
a Temporal boundary (an activity or a workflow failing) it becomes a
``temporalio.exceptions.ApplicationError`` whose ``type`` is that code, so the
stock ``temporal`` CLI shows the same code a Python caller would catch.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.exceptions import ApplicationError


class OMAError(Exception):
    """Base class of every error OMA raises on purpose.

    ``code`` is stable across releases; ``retryable`` says whether Temporal
    may retry the activity that raised it.
    """

    code: str = "OMA_ERROR"
    retryable: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InvalidRunInputError(OMAError):
    """The run input (a team file, a workflow input) does not have the documented shape.

    The message names every bad field by its path, e.g. ``team.agents[1].backend.command``.
    """

    code = "INVALID_RUN_INPUT"


class DagValidationError(OMAError):
    """The task graph is invalid: unknown assignee, unknown dependency,
    duplicate task id, or a dependency cycle. Raised before any task runs."""

    code = "INVALID_TASK_GRAPH"


class InvalidMessageError(OMAError):
    """A message or content block does not have the Anthropic Messages API shape,
    or structured input was given to an agent whose transport is text only."""

    code = "INVALID_MESSAGE"


class InvalidHookError(OMAError):
    """A hook path (``package.module:function``, e.g. an agent's ``before_run``) is
    malformed, or names a module, attribute or object that cannot be imported or
    called on this worker."""

    code = "INVALID_HOOK"


class ProviderError(OMAError):
    """A model provider answered with an error.

    ``status`` is the HTTP status (``None`` for connection errors and timeouts),
    ``request_id`` the provider's request id when it sent one, ``retry_after_s``
    the delay the provider asked for (``retry-after-ms`` / ``retry-after``).
    429, 5xx, connection errors and timeouts are retryable; other 4xx are not.
    """

    code = "PROVIDER_ERROR"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        retryable: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.request_id = request_id
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class MissingCredentialsError(OMAError):
    """A provider needs a credential (e.g. ``ANTHROPIC_API_KEY``) that the
    worker's environment does not have. Credentials never travel in run input."""

    code = "MISSING_CREDENTIALS"


class ScriptExhaustedError(OMAError):
    """A ``scripted`` agent was asked for more turns than its ``script`` holds."""

    code = "SCRIPT_EXHAUSTED"


class EmptyPromptError(OMAError):
    """A ``process`` agent with ``input`` ``stdin`` or ``argument`` got an empty prompt."""

    code = "EMPTY_PROMPT"


class OutputTooLargeError(OMAError):
    """An external agent's output is larger than ``MAX_OUTPUT_BYTES``. Outputs
    travel in workflow history (Temporal limits a payload to 2 MB), so a large
    result belongs in a file the agent writes, with its path in the output."""

    code = "OUTPUT_TOO_LARGE"


def check_output_size(agent: str, size: int) -> None:
    """Raise ``OutputTooLargeError`` if an output of ``size`` bytes is over
    ``MAX_OUTPUT_BYTES``."""
    if size > MAX_OUTPUT_BYTES:
        raise OutputTooLargeError(
            f"agent {agent!r} produced {size} bytes of output; a task's output may be at "
            f"most {MAX_OUTPUT_BYTES} bytes (it travels in workflow history): write large "
            "results to files and print their paths"
        )


MAX_OUTPUT_BYTES = 256 * 1024
"""The largest output one task may return (bytes of UTF-8)."""


class ProcessFailedError(OMAError):
    """A ``process`` agent's command exited non-zero or was killed by a signal.

    The message carries the exit status and the redacted tail of stderr.
    """

    code = "PROCESS_FAILED"


class ProcessSpawnError(OMAError):
    """A ``process`` agent's command could not be started (not found, not executable,
    bad ``cwd``)."""

    code = "PROCESS_SPAWN_FAILED"


class AcpError(OMAError):
    """Base of the errors raised while driving an ``acp`` agent (OMA is the ACP
    client); the subclasses say what went wrong."""

    code = "ACP_ERROR"


class AcpSpawnError(AcpError):
    """An ``acp`` agent could not be started: its command or ``cwd`` is missing or
    not usable, or the process exited before it answered ``initialize``/``session/new``.

    The message names the command and carries the redacted end of its stderr.
    """

    code = "ACP_SPAWN_FAILED"


class AcpProtocolError(AcpError):
    """An ``acp`` agent answered a request with a JSON-RPC error or with a message
    that does not have the ACP shape, or speaks a protocol version OMA does not.

    ``rpc_code`` is the JSON-RPC error code when the agent sent one (e.g.
    ``-32000`` authentication required).
    """

    code = "ACP_PROTOCOL_ERROR"

    def __init__(self, message: str, *, rpc_code: int | None = None) -> None:
        super().__init__(message)
        self.rpc_code = rpc_code


class AcpAgentExitedError(AcpError):
    """An ``acp`` agent's process died (or closed its stdout) during a prompt turn.

    Retryable: the session is dropped, so the next attempt opens a fresh one.
    """

    code = "ACP_AGENT_EXITED"
    retryable = True


class MaxTurnsExceededError(OMAError):
    """An LLM agent's tool loop reached ``max_turns`` without a final answer."""

    code = "MAX_TURNS_EXCEEDED"


class ReplayMismatchError(OMAError):
    """A recorded history no longer replays against the current workflow code
    (a nondeterminism error)."""

    code = "REPLAY_MISMATCH"


class AgentRefusalError(OMAError):
    """An ACP agent ended its turn with stopReason ``refusal``: the task fails
    and its dependents are skipped (external-agents.md, the ACP mapping table)."""

    code = "AGENT_REFUSAL"


class UnknownStopReasonError(OMAError):
    """An ACP agent ended its turn with a stopReason the protocol does not define."""

    code = "UNKNOWN_STOP_REASON"


class UnknownToolError(OMAError):
    """The model asked for a tool the agent does not declare."""

    code = "UNKNOWN_TOOL"


class TemporalUnavailableError(OMAError):
    """No Temporal server answers at the configured address and none could be started."""

    code = "TEMPORAL_UNAVAILABLE"


class TemporalConfigError(OMAError):
    """The Temporal client configuration (the profile file named by
    ``TEMPORAL_CONFIG_FILE``, ``TEMPORAL_PROFILE``) cannot be loaded."""

    code = "TEMPORAL_CONFIG_INVALID"


class PlanValidationError(OMAError):
    """The coordinator's plan is not a usable task graph (not a JSON array of
    tasks, an assignee outside the roster, an unknown or ambiguous dependency, a
    cycle) and its one correction turn did not fix it. The message lists every
    problem of the last answer."""

    code = "INVALID_PLAN"


class NoEligibleAgentError(OMAError):
    """A task without an assignee has ``requires`` that no agent of the team
    satisfies. Raised before any task runs."""

    code = "NO_ELIGIBLE_AGENT"


class AssigneeRequirementsMismatchError(OMAError):
    """A task names an assignee that does not satisfy the task's ``requires``.
    Raised before any task runs."""

    code = "ASSIGNEE_REQUIREMENTS_MISMATCH"


class DependencyPayloadTooLargeError(OMAError):
    """What a task would receive from shared memory (one dependency's payload,
    or the ``all`` summary) is over ``MAX_DEPENDENCY_PAYLOAD_BYTES``. The task
    fails without running; its dependents are skipped."""

    code = "DEPENDENCY_PAYLOAD_TOO_LARGE"


MAX_DEPENDENCY_PAYLOAD_BYTES = 64 * 1024
"""The largest payload one task receives per dependency (or as the ``all`` summary)."""


class TaskTimeoutError(OMAError):
    """A task ran longer than its ``timeout_s``; it was cancelled. Retryable
    (``max_retries``)."""

    code = "TASK_TIMEOUT"
    retryable = True


class RunTimeoutError(OMAError):
    """The run passed ``options.timeout_s``: tasks in flight were cancelled and
    the rest skipped."""

    code = "RUN_TIMEOUT"


class BudgetExceededError(OMAError):
    """The run's token usage reached ``options.max_token_budget``: no task
    started after that; tasks in flight settled and the rest were skipped."""

    code = "BUDGET_EXCEEDED"


class ApprovalError(OMAError):
    """A decision on an approval request was refused; the subclasses say why."""

    code = "APPROVAL_ERROR"


class ApprovalUnknownRequestError(ApprovalError):
    """A decision names a ``request_id`` that the run has not requested."""

    code = "APPROVAL_UNKNOWN_REQUEST"


class ApprovalStaleDecisionError(ApprovalError):
    """A decision's ``request_hash`` is not the hash of the request as it is
    now: the reviewer saw other content. Read ``pending_approvals`` again."""

    code = "APPROVAL_STALE_DECISION"


class ApprovalConflictError(ApprovalError):
    """The request already has a decision; the first decision wins."""

    code = "APPROVAL_CONFLICT"


def application_error(err: OMAError) -> ApplicationError:
    """The ``ApplicationError`` an activity or workflow raises for ``err``.

    ``type`` is the error's stable ``code``; ``non_retryable`` mirrors
    ``err.retryable``; a provider's requested delay becomes Temporal's
    ``next_retry_delay`` so the retry honours ``retry-after``.
    """
    details: dict[str, object] = {"code": err.code}
    delay = None
    if isinstance(err, ProviderError):
        details |= {"status": err.status, "request_id": err.request_id}
        if err.retry_after_s is not None and err.retry_after_s > 0:
            delay = timedelta(seconds=err.retry_after_s)
    return ApplicationError(
        err.message,
        details,
        type=err.code,
        non_retryable=not err.retryable,
        next_retry_delay=delay,
    )
