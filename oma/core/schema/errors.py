"""The one error hierarchy of OMA on Temporal.

Every error carries a stable, machine-readable ``code``. When an error crosses
a Temporal boundary (an activity or a workflow failing) it becomes a
``temporalio.exceptions.ApplicationError`` whose ``type`` is that code, so the
stock ``temporal`` CLI shows the same code a Python caller would catch.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import ClassVar

from temporalio.exceptions import ApplicationError


class OMAError(Exception):
    """Base class of every error OMA raises on purpose.

    ``code`` is stable across releases; ``retryable`` says whether Temporal
    may retry the activity that raised it. ``FIELDS`` names the structured
    fields a class carries beside its message (``ProviderError.status``,
    ``AcpProtocolError.rpc_code``, ...): they cross a Temporal boundary in the
    failure's details and come back as attributes (``error_for``).
    """

    code: str = "OMA_ERROR"
    retryable: bool = False
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def fields(self) -> dict[str, object]:
        """The structured fields, ``{name: JSON value}`` in ``FIELDS`` order
        (``{}`` for an error that has none)."""
        return {name: getattr(self, name) for name in self.FIELDS}


# -- the caller's input ----------------------------------------------------


class InputError(OMAError):
    """Base of the errors that say the caller's input is wrong (a run input, a
    message, a hook path, a decision): fix the input and try again. Raised
    before anything runs, by the client, the CLI and the workflows alike."""

    code = "INVALID_INPUT"


class InvalidRunInputError(InputError):
    """The run input (a team file, a workflow input) does not have the documented shape.

    The message names every bad field by its path, e.g. ``team.agents[1].backend.command``.
    """

    code = "INVALID_RUN_INPUT"


class DagValidationError(InputError):
    """The task graph is invalid: unknown assignee, unknown dependency,
    duplicate task id, or a dependency cycle. Raised before any task runs."""

    code = "INVALID_TASK_GRAPH"


class NoEligibleAgentError(InputError):
    """A task without an assignee has ``requires`` that no agent of the team
    satisfies. Raised before any task runs."""

    code = "NO_ELIGIBLE_AGENT"


class AssigneeRequirementsMismatchError(InputError):
    """A task names an assignee that does not satisfy the task's ``requires``.
    Raised before any task runs."""

    code = "ASSIGNEE_REQUIREMENTS_MISMATCH"


class InvalidMessageError(InputError):
    """A message or content block does not have the Anthropic Messages API shape,
    or structured input was given to an agent whose transport is text only."""

    code = "INVALID_MESSAGE"


class InvalidHookError(InputError):
    """A hook path (``package.module:function``, e.g. an agent's ``before_run``) is
    malformed, or names a module, attribute or object that cannot be imported or
    called on this worker."""

    code = "INVALID_HOOK"


class InvalidForkError(InputError):
    """A fork (``oma fork``, a ``TeamRun`` input with ``fork``) cannot be made
    of its source run: the run is unknown or not a ``TeamRun``, a task named
    to run again (``rerun``, ``--from``, ``--set``) is not one of its tasks,
    a task to run again names an agent the fork's team does not have, or
    nothing is left to run. Raised before any task runs (docs/fork.md)."""

    code = "INVALID_FORK"


class TeamFileNotFoundError(InputError):
    """``oma acp`` has no team for a session: no ``--team FILE``, and neither
    ``oma.json`` nor ``.oma/team.json`` in the session's working directory."""

    code = "TEAM_FILE_NOT_FOUND"


class AcpSessionUnknownError(InputError):
    """An ACP client named a session ``oma acp`` does not know: no ``TeamRun``
    has that workflow id (``session/load``, ``session/resume``,
    ``session/fork``), or no ``session/new`` or ``session/load`` opened it on
    this connection (``session/prompt``, ``session/cancel``,
    ``session/close``)."""

    code = "ACP_SESSION_UNKNOWN"


class AcpSessionNoRunError(InputError):
    """An ACP client asked ``oma acp`` to fork (``session/fork``) a session
    that has no run yet: a fork branches the session's latest run, and its
    first prompt has not started one. Prompt the session first, or open a
    new one."""

    code = "ACP_SESSION_NO_RUN"


class AcpSessionCwdError(InputError):
    """An ACP client gave a session a ``cwd`` (``session/new``,
    ``session/load``, ``session/resume``, ``session/fork``) that is not an absolute path of an
    existing directory: the team works there, and would write into a
    directory it created, or, for a relative path, the worker's."""

    code = "ACP_SESSION_CWD_INVALID"


class AcpMessageTooLargeError(InputError):
    """``oma acp``: a message from the editor (one JSON-RPC line) is over
    ``oma.acp.stdio.MAX_MESSAGE_BYTES`` (50 MiB), e.g. a prompt with
    large images: the agent lets go of it as it reads it and answers the
    request with this error (JSON-RPC ``-32600``); the session goes on.
    Attach large files as resource links (their paths)."""

    code = "ACP_MESSAGE_TOO_LARGE"


class AcpSessionBusyError(InputError):
    """An ACP client sent a prompt (not a command) or ``/retry`` to a session
    whose run is still going: a session runs one team run at a time; wait for
    it, or end it with ``/abort`` or ``session/cancel``."""

    code = "ACP_SESSION_BUSY"


class HistoryReadError(InputError):
    """A history ``oma show`` is given cannot be read: not a file, not JSON,
    not a workflow history, or no ``TeamRun`` among the histories given."""

    code = "HISTORY_UNREADABLE"


class ReplayTargetError(InputError):
    """``oma replay --at`` or ``--break-at`` names a point the history does not
    have: an event id past its end, a task that never started or completed, an
    approval request never decided, a coordinator step that never ran."""

    code = "REPLAY_TARGET_UNKNOWN"


# -- the environment ----------------------------------------------------------


class SetupError(OMAError):
    """Base of the errors that say the environment OMA runs in is not usable
    (no Temporal server, a broken client configuration, a missing credential
    on a worker): nothing is wrong with the run itself."""

    code = "SETUP_ERROR"


class ReplayDebuggerError(SetupError):
    """``oma replay --ide``: the Temporal Workflow Replay Debugger (VS Code)
    does not answer at ``TEMPORAL_DEBUGGER_PLUGIN_URL``, or serves no workflow
    history (none loaded in its panel)."""

    code = "REPLAY_DEBUGGER_UNREACHABLE"


class AcpAttachmentWriteError(SetupError):
    """``oma acp`` could not write a prompt's attachment (an image, an embedded
    resource) under the session's ``cwd``, where the run reads it: the disk
    is full, a path component is a file, permissions. Nothing of the prompt
    is left written and no run started: free the space or fix the path, and
    send the prompt again."""

    code = "ACP_ATTACHMENT_WRITE_FAILED"


class TemporalUnavailableError(SetupError):
    """No Temporal server answers at the configured address and none could be started."""

    code = "TEMPORAL_UNAVAILABLE"


class TemporalConfigError(SetupError):
    """The Temporal client configuration (the profile file named by
    ``TEMPORAL_CONFIG_FILE``, ``TEMPORAL_PROFILE``) cannot be loaded."""

    code = "TEMPORAL_CONFIG_INVALID"


class WorkerDeploymentInvalidError(SetupError):
    """A worker's Worker Deployment Version is half set or one the server
    refuses: ``TEMPORAL_DEPLOYMENT_NAME`` without ``TEMPORAL_WORKER_BUILD_ID``
    (or the reverse), a value over 255 bytes or starting with ``__``, a
    deployment name holding ``.`` or ``:``. Raised before the worker
    connects (docs/operations.md)."""

    code = "WORKER_DEPLOYMENT_INVALID"


class SearchAttributesMissingError(SetupError):
    """A command that finds runs through Temporal's visibility (``oma list``
    with ``--status`` or ``--team``, ``oma approvals`` without a run id, their
    Python calls) asked a namespace that has not registered the search
    attributes OMA's runs set (``OmaStatus``, ``OmaTeam``, ...): register them
    as docs/visibility.md says (``temporal operator search-attribute create``;
    the embedded dev server registers them at every start)."""

    code = "SEARCH_ATTRIBUTES_MISSING"


class MissingCredentialsError(SetupError):
    """A provider needs a credential (e.g. ``ANTHROPIC_API_KEY``) that the
    worker's environment does not have. Credentials never travel in run input."""

    code = "MISSING_CREDENTIALS"


class CredentialNotAllowedError(SetupError):
    """A run would have the worker send one of its credentials (a provider's
    key, an agent's ``api_key_env``, an MCP server's header) to an origin its
    operator did not allow for that variable (the provider's own host, the
    worker's own base URL, ``OMA_CREDENTIALS``: docs/security.md). Raised
    before any request, naming the variable and the origin, never the value;
    not retried."""

    code = "CREDENTIAL_NOT_ALLOWED"


class CredentialsConfigError(SetupError):
    """``OMA_CREDENTIALS`` is not a ``;``-separated list of
    ``VAR=origin[,origin...]`` (an origin is ``https://host[:port]``,
    ``http://host[:port]`` or a bare ``host[:port]`` meaning HTTPS; no path,
    user or wildcard). Raised when a worker builds its activities, before it
    serves anything."""

    code = "CREDENTIALS_CONFIG_INVALID"


class CodecKeysInvalidError(SetupError):
    """``OMA_CODEC_KEYS`` (or the file ``OMA_CODEC_KEYS_FILE`` names) is not a
    comma-separated list of ``key_id:base64_key`` with 32-byte keys and unique
    ids, or the file cannot be read. Raised when a process builds its data
    converter, before it talks to Temporal."""

    code = "CODEC_KEYS_INVALID"


class CodecKeyMissingError(SetupError):
    """A payload is encrypted with a key this process does not hold: it has no
    ``OMA_CODEC_KEYS`` at all, or not the key id the payload names (a key
    rotated out too early, another deployment's key), or another key under
    that id. Set ``OMA_CODEC_KEYS`` to a list that includes that key id. A
    worker fails the workflow task with it, never the run: the run waits,
    untouched, until a worker that holds the key takes the task (visible
    meanwhile in ``temporal workflow describe`` and the Web UI); a query that
    worker answers fails with it. A client raises it when it reads a result or
    a failure."""

    code = "CODEC_KEY_MISSING"


class TracingUnavailableError(SetupError):
    """Tracing is on (``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, or
    ``OmaPlugin(tracing=True)``) but the OpenTelemetry SDK or its OTLP exporter
    is not installed (the ``[otel]`` extra), or a worker would run under a
    global tracer provider that is not replay-safe (``oma.runtime.tracing.tracer_provider``).
    Raised when a process builds its client or worker, before it runs anything."""

    code = "TRACING_UNAVAILABLE"


class PayloadStoreInvalidError(SetupError):
    """``OMA_PAYLOAD_STORE`` is not ``file:///absolute/path`` or
    ``s3://bucket[/prefix]``, or names an S3 store on a process without the
    ``[s3]`` extra (boto3). Raised when a process builds its data converter,
    before it talks to Temporal (docs/orchestration.md, "Where large payloads
    go")."""

    code = "PAYLOAD_STORE_INVALID"


class PayloadStoreUnavailableError(SetupError):
    """The payload store cannot take a payload over the threshold: the store's
    directory does not exist or is not writable, the bucket does not exist,
    the credentials are refused, the S3 server does not answer. A worker fails
    the workflow task (or the activity attempt) with it, never the run: fix
    the store and the task is retried."""

    code = "PAYLOAD_STORE_UNAVAILABLE"


class PayloadStoreMissingError(SetupError):
    """A payload was kept in a payload store (its history holds a reference)
    and this process has no store of that kind: no ``OMA_PAYLOAD_STORE`` (and
    not the embedded server's default), or a store of the other kind. Give
    every client and worker of the namespace the same ``OMA_PAYLOAD_STORE``.
    A worker fails the workflow task with it, never the run: the run waits
    for a worker that has the store. A client raises it when it reads a
    result, a query's answer or a history."""

    code = "PAYLOAD_STORE_MISSING"


class StoredPayloadMissingError(SetupError):
    """This process's payload store does not hold a payload a history refers
    to, or cannot give it: the file or object was deleted, the process is
    given another directory, bucket or prefix than the process that stored
    it, or the store refused the read. The message names the store and the
    file or the bucket and key. A worker fails the workflow task with it,
    never the run."""

    code = "STORED_PAYLOAD_MISSING"


class StoredPayloadInvalidError(InputError):
    """A reference to a stored payload that this process refuses: its key is
    not one OMA's store writes (a path that would leave the store's
    directory, an S3 key outside the store's prefix), or the bytes the store
    holds under it do not have the SHA-256 the reference names (altered). A
    history's references are written by whoever can reach the namespace, so
    nothing is read outside the configured store."""

    code = "STORED_PAYLOAD_INVALID"


class CiphertextInvalidError(InputError):
    """A workflow, signal or update input is marked encrypted
    (``binary/encrypted``) but no key can read it: it names no key id, it is
    too short to hold a nonce and a tag, or it decrypts to something that is
    not a Temporal payload. A client made it up; OMA's codec never writes one.
    A run started with it fails; a ``decide`` signal carrying it is refused
    (an ``approval_refused`` event)."""

    code = "CIPHERTEXT_INVALID"


# -- a run that failed -----------------------------------------------------------


class RunError(OMAError):
    """Base of the errors that fail a run or one of its tasks (a task's
    ``error_code`` is one of these codes, or a ``ProviderError``'s)."""

    code = "RUN_FAILED"


class TaskFailedError(RunError):
    """A ``TeamRun`` ended ``failed`` because tasks failed (each task's own
    ``error_code`` says why): the type of the failure the run ends with
    (``oma.core.contracts.visibility.team_run_failure``)."""

    code = "TASK_FAILED"


class AgentRunFailedError(RunError):
    """An ``AgentRun`` child failed with a failure that carries no OMA error
    code (e.g. it was terminated, or its workflow task kept failing)."""

    code = "AGENT_RUN_FAILED"


class ActivityFailedError(RunError):
    """An activity failed without an OMA error code: it timed out (a lost
    worker, a hung call; retryable) or raised an unexpected exception."""

    code = "ACTIVITY_FAILED"


class ProcessFailedError(RunError):
    """A ``process`` agent's command exited non-zero or was killed by a signal.

    The message carries the exit status and the redacted tail of stderr.
    """

    code = "PROCESS_FAILED"


class ProcessSpawnError(RunError):
    """A ``process`` agent's command could not be started (not found, not executable,
    bad ``cwd``)."""

    code = "PROCESS_SPAWN_FAILED"


class EmptyPromptError(RunError):
    """A ``process`` agent with ``input`` ``stdin`` or ``argument`` got an empty prompt."""

    code = "EMPTY_PROMPT"


class OutputTooLargeError(RunError):
    """An external agent's output is larger than ``MAX_OUTPUT_BYTES``. Outputs
    travel in workflow history (Temporal limits a payload to 2 MB), so a large
    result belongs in a file the agent writes, with its path in the output."""

    code = "OUTPUT_TOO_LARGE"


class DependencyPayloadTooLargeError(RunError):
    """What a task would receive from shared memory (one dependency's payload,
    or the ``all`` summary) is over ``MAX_DEPENDENCY_PAYLOAD_BYTES``. The task
    fails without running; its dependents are skipped."""

    code = "DEPENDENCY_PAYLOAD_TOO_LARGE"


class DependencyOutputUnavailableError(RunError):
    """A task reads a dependency's output that its run keeps by reference (a
    fork's kept task, a run that continued as new), and the ``AgentRun``
    result that holds it could not be read back: the run that made it is gone
    (past the namespace's retention, or deleted). The task fails without
    running; its dependents are skipped. Run the dependency again (``oma fork
    RUN --from TASK``)."""

    code = "DEPENDENCY_OUTPUT_UNAVAILABLE"


class ScriptExhaustedError(RunError):
    """A ``scripted`` agent was asked for more turns than its ``script`` holds."""

    code = "SCRIPT_EXHAUSTED"


class RecordingMissError(RunError):
    """A model turn of a run that replays recorded turns (``options.models``
    ``recorded``, ``oma.testing.recorded``) asked something no recorded turn
    asked: the message names the agent, the task, the turn and the first part
    of the request that differs (model, system prompt, tools, a message).
    ``fallback`` calls the live provider instead (docs/fork.md)."""

    code = "RECORDING_MISS"


class MaxTurnsExceededError(RunError):
    """An LLM agent's tool loop reached ``max_turns`` without a final answer."""

    code = "MAX_TURNS_EXCEEDED"


class UnknownToolError(RunError):
    """The model asked for a tool, and the agent declares none. (A call of a
    tool the agent does not declare, when it declares some, goes back to the
    model as an error ``tool_result`` instead.)"""

    code = "UNKNOWN_TOOL"


class ToolCallTruncatedError(RunError):
    """The model's answer was cut off by ``max_tokens`` in the middle of its
    tool calls turn after turn: a cut-off call never runs (its input may be
    partial), and after ``MAX_TRUNCATED_TOOL_TURNS`` such turns the run fails."""

    code = "TOOL_CALL_TRUNCATED"


class ToolLoopError(RunError):
    """The agent called the same tool with the same input
    ``max_repeated_tool_calls`` times in one run: it is going round in circles."""

    code = "TOOL_LOOP_DETECTED"


class PlanValidationError(RunError):
    """The coordinator's plan is not a usable task graph (not a JSON array of
    tasks, an assignee outside the roster, an unknown or ambiguous dependency, a
    cycle) and its one correction turn did not fix it. The message lists every
    problem of the last answer."""

    code = "INVALID_PLAN"


class AcpError(RunError):
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
    FIELDS = ("rpc_code",)

    def __init__(self, message: str, *, rpc_code: int | None = None) -> None:
        super().__init__(message)
        self.rpc_code = rpc_code


class AcpAgentExitedError(AcpError):
    """An ``acp`` agent's process died (or closed its stdout) during a prompt turn.

    Retryable: the session is dropped, so the next attempt opens a fresh one.
    """

    code = "ACP_AGENT_EXITED"
    retryable = True


class AgentRefusalError(AcpError):
    """An ACP agent ended its turn with stopReason ``refusal``: the task fails
    and its dependents are skipped (external-agents.md, the ACP mapping table)."""

    code = "AGENT_REFUSAL"


class UnknownStopReasonError(AcpError):
    """An ACP agent ended its turn with a stopReason the protocol does not define."""

    code = "UNKNOWN_STOP_REASON"


class McpServerError(RunError):
    """An MCP server could not be started or reached, failed a request, or
    exited. A tool call's failure is a result the model reads; a failed
    listing fails the agent run."""

    code = "MCP_SERVER_FAILED"


class ReplayMismatchError(RunError):
    """A recorded history no longer replays against the current workflow code
    (a nondeterminism error)."""

    code = "REPLAY_MISMATCH"


# -- a run that stopped early ----------------------------------------------------


class RunStoppedError(RunError):
    """Base of the reasons a run (or a task) stopped before it finished: an
    abort, a rejection, a timeout, a budget, a cancellation. A team run that
    stops this way completes with the code as its ``error_code``."""

    code = "RUN_STOPPED"


class AbortedError(RunStoppedError):
    """The run got the ``abort`` signal: no task started after it, tasks in
    flight settled, the rest were skipped (the run ends ``cancelled``)."""

    code = "ABORTED"


class ApprovalRejectedError(RunStoppedError):
    """A reviewer rejected a plan, a round or a dispatch (or ``on_timeout``
    rejected it): the run stops and ends ``rejected``."""

    code = "APPROVAL_REJECTED"


class RunCancelledError(RunStoppedError):
    """The run was cancelled through Temporal (``temporal workflow cancel``):
    the task was cut short with it."""

    code = "CANCELLED"


class TaskTimeoutError(RunStoppedError):
    """A task ran longer than its ``timeout_s``; it was cancelled. Retryable
    (``max_retries``)."""

    code = "TASK_TIMEOUT"
    retryable = True


class RunTimeoutError(RunStoppedError):
    """The run passed ``options.timeout_s``: tasks in flight were cancelled and
    the rest skipped."""

    code = "RUN_TIMEOUT"


class BudgetExceededError(RunStoppedError):
    """The run's token usage reached ``options.max_token_budget``: no task
    started after that; tasks in flight settled and the rest were skipped."""

    code = "BUDGET_EXCEEDED"


class CostBudgetExceededError(RunStoppedError):
    """The run's cost reached ``options.max_cost_usd`` (priced per model turn
    by ``oma.core.schema.pricing``, and from ACP ``usage_update.cost``): no task
    started after that; tasks in flight settled and the rest were skipped."""

    code = "COST_BUDGET_EXCEEDED"


class RunStateTooLargeError(RunStoppedError):
    """What the run would return, or carry when it continues as new, does not
    fit in ``oma.core.schema.limits.RUN_STATE_BUDGET_BYTES`` (Temporal caps one
    payload at 2 MB) even with every output kept by reference and its texts
    cut: the run stops (tasks in flight settle, the rest are skipped) and
    ends ``failed``, rather than fail its workflow task again and again."""

    code = "RUN_STATE_TOO_LARGE"


# -- a model provider --------------------------------------------------------------


class ProviderError(OMAError):
    """A model provider answered with an error, or could not be reached.

    ``error_type`` is the provider's own error type as it sent it on the wire
    (Anthropic's ``error.type``, e.g. ``rate_limit_error``; ``None`` for
    connection errors and timeouts), ``status`` the HTTP status (``None`` for
    connection errors and timeouts), ``request_id`` the provider's request id
    when it sent one, ``retry_after_s`` the delay the provider asked for
    (``retry-after-ms`` / ``retry-after``). 429, 5xx, connection errors and
    timeouts are retryable; other 4xx are not.
    """

    code = "PROVIDER_ERROR"
    FIELDS = ("error_type", "status", "request_id")

    def __init__(
        self,
        message: str,
        *,
        error_type: str | None = None,
        status: int | None = None,
        request_id: str | None = None,
        retryable: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.status = status
        self.request_id = request_id
        self.retryable = retryable
        self.retry_after_s = retry_after_s


# -- approvals ------------------------------------------------------------------------


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


def application_error(err: OMAError, *, attempt: int | None = None) -> ApplicationError:
    """The ``ApplicationError`` an activity or workflow raises for ``err``.

    ``type`` is the error's stable ``code``; ``non_retryable`` mirrors
    ``err.retryable``; a provider's requested delay becomes Temporal's
    ``next_retry_delay`` so the retry honours ``retry-after``. The details
    are one dict: ``code``, ``attempt`` when given (a backend activity's
    attempt, ``AgentRunResult.backend_attempts``), and the error's structured
    fields (``err.fields()``: a provider's ``error_type``, ``status`` and
    ``request_id``, an ACP agent's ``rpc_code``).
    """
    details: dict[str, object] = {"code": err.code}
    if attempt is not None:
        details["attempt"] = attempt
    details |= err.fields()
    delay = None
    if isinstance(err, ProviderError) and err.retry_after_s is not None and err.retry_after_s > 0:
        delay = timedelta(seconds=err.retry_after_s)
    return ApplicationError(
        err.message,
        details,
        type=err.code,
        non_retryable=not err.retryable,
        next_retry_delay=delay,
    )


def _codes(cls: type[OMAError]) -> dict[str, type[OMAError]]:
    found = {cls.code: cls}
    for sub in cls.__subclasses__():
        found |= _codes(sub)
    return found


ERRORS: dict[str, type[OMAError]] = _codes(OMAError)
"""Every error code -> its class: the one registry the client and the CLI read
a failure's ``ApplicationError.type`` with. A class defined outside this
module is not in it: every OMA error lives here."""


def error_for(
    code: str | None, message: str, fields: Mapping[str, object] | None = None
) -> OMAError:
    """The ``OMAError`` of ``code`` (e.g. a failure's ``ApplicationError.type``)
    with ``message`` and, from ``fields`` (e.g. the failure's details dict),
    the structured fields its class declares (``FIELDS``; other keys are
    ignored). A code OMA does not define gives an ``OMAError`` that carries
    it as its ``code``."""
    cls = ERRORS.get(code or "", OMAError)
    err = cls(message)
    if cls is OMAError and code:
        err.code = code
    for name in cls.FIELDS:
        if fields is not None and name in fields:
            setattr(err, name, fields[name])
    return err


def error_from_failure(failure: ApplicationError) -> OMAError:
    """The ``OMAError`` a Temporal failure stands for (the inverse of
    ``application_error``): the class of its ``type``, its message, the
    structured fields of its first detail, ``retryable`` from
    ``non_retryable`` and a provider's ``retry_after_s`` from
    ``next_retry_delay`` (seconds)."""
    first = failure.details[0] if failure.details else None
    err = error_for(failure.type, failure.message, first if isinstance(first, dict) else None)
    err.retryable = not failure.non_retryable
    if isinstance(err, ProviderError) and failure.next_retry_delay is not None:
        err.retry_after_s = failure.next_retry_delay.total_seconds()
    return err
