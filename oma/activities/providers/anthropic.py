"""The ``anthropic`` provider: one model turn through the Anthropic Messages API.

The request and the answer keep the API's own names (``system``, ``messages``,
``max_tokens``, ``stop_reason``, ``usage``); our ``LLMMessage`` models already
dump to the wire shape. The answer is streamed so that a long generation can
heartbeat its activity and report progress (text deltas, complete tool calls)
as it arrives; failures become ``ProviderError`` with the retryability
Temporal's retry policy needs (https://docs.anthropic.com/en/api/errors).
"""

from __future__ import annotations

import copy
import json
import logging
import os
from typing import Any

import anthropic
import httpx2
from anthropic.lib.streaming import ParsedMessageStreamEvent

from oma.activities.providers._http import (
    body_text,
    malformed_stream,
    redirect_error,
    retry_after_s,
)
from oma.activities.providers._progress import OnEvent, streamed_text_heartbeats
from oma.activities.tool_call import offered_tools
from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput
from oma.core.schema.agent_events import TextDelta, ToolCallEvent
from oma.core.schema.errors import MissingCredentialsError, ProviderError
from oma.core.schema.messages import ContentBlock, TextBlock, ToolUseBlock
from oma.core.schema.usage import TokenUsage

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` of a turn when the agent names none."""

DEFAULT_BASE_URL = "https://api.anthropic.com"
"""Where turns go when neither ``base_url`` nor ``ANTHROPIC_BASE_URL`` says otherwise."""

TIMEOUT = anthropic.Timeout(120.0, connect=10.0)
"""Per-operation limits in seconds: 10 s to connect, 120 s for any one read or write.
While streaming, the read limit bounds the silence between two events, not the turn."""

HEARTBEAT_INTERVAL_S = 0.5
"""Most seconds between two activity heartbeats while a turn runs, streaming
or silent (streamed text sends one sooner: ``streamed_text_heartbeats``)."""

logger = logging.getLogger(__name__)

# The HTTP status the API documents for each error ``type``; an error event sent
# mid-stream arrives on an HTTP 200 response and only carries its type.
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AnthropicProvider:
    """Runs a turn on Claude with the worker's ``ANTHROPIC_API_KEY``.

    ``api_key`` and ``base_url`` default to ``ANTHROPIC_API_KEY`` and
    ``ANTHROPIC_BASE_URL`` as the environment holds them when the provider is
    built; the key never comes from workflow input, and neither does where it
    goes: the base URL is the worker's own configuration, where its operator
    allows the key (``oma.runtime.credentials``), and redirects are not
    followed (the SDK would take ``x-api-key`` along to another origin). The
    ``anthropic.AsyncAnthropic`` client is built on the first turn, with SDK
    retries off (``max_retries=0``) because Temporal's retry policy owns retries.
    """

    def __init__(self, api_key: str | None = None, base_url: str | None = None) -> None:
        self._api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        self._base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        self._client: anthropic.AsyncAnthropic | None = None

    async def turn(self, inp: LlmTurnInput, on_event: OnEvent | None = None) -> LlmTurnOutput:
        """Send ``inp`` to ``POST /v1/messages`` (streaming) and return the final message.

        Request: ``model`` = ``agent.resolved_model``, ``max_tokens`` =
        ``agent.max_tokens`` (default 4096 tokens), ``system`` =
        ``agent.system_prompt`` (omitted when empty), ``messages`` as the API
        shapes them. Answer: the ``text`` and ``tool_use`` blocks (other block
        types are dropped), ``stop_reason``, ``usage`` (the API's
        ``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens``
        and ``cache_read_input_tokens``: cache reads and writes are not in
        ``input_tokens``) and ``model``. Prompt caching: see ``_request``.
        Inside an activity it heartbeats at least every
        ``HEARTBEAT_INTERVAL_S`` seconds while the turn runs, so a cancel
        reaches it even while the model is silent, and soon after each text
        delta, with the latest text (``streamed_text_heartbeats``).

        ``on_event``, when given, is called while the answer streams: with a
        ``TextDelta`` for every non-empty ``text_delta`` (in order, so they join
        to the answer's text) and with one ``ToolCallEvent`` per ``tool_use``
        block at its ``content_block_stop``, its input parsed from all the
        block's ``input_json_delta`` pieces (the SDK's stream helper joins them).
        Each event is a fresh object with its own copy of the tool input, so
        mutating it changes nothing of the turn. Progress must not affect the
        run: an exception from ``on_event`` is logged (the first one of a turn,
        with its traceback) and the turn goes on, still delivering later events.

        Raises ``MissingCredentialsError`` when there
        is no API key; ``ProviderError`` for every failure of the call, retryable
        for HTTP 429, 5xx (529 overloaded included), connection errors,
        timeouts and a stream event that is not JSON or not where the API's
        event order puts it (``error_type`` ``malformed_stream``), not for
        other 4xx nor a redirect (never followed). An ``error`` event
        mid-stream (HTTP 200) gets the status the API documents for its
        ``error.type``. The message carries the status and the API's own
        ``error.message``, never the key.
        """
        client = self._get_client()
        request = _request(inp)
        try:
            with streamed_text_heartbeats(on_event, HEARTBEAT_INTERVAL_S) as events:
                return await _stream_output(client, request, events, self._base_url)
        except anthropic.APIStatusError as err:
            raise self._redacted(_status_error(err)) from err
        except anthropic.APIConnectionError as err:
            raise self._redacted(self._connection_error(err, err.__cause__)) from err
        except httpx2.TransportError as err:
            # The SDK wraps transport errors of the request, but not those that
            # interrupt a stream already under way (e.g. a read timeout between events).
            raise self._redacted(self._connection_error(err, err)) from err
        except ProviderError as err:  # the stream's own: its cause stays chained
            self._redacted(err)
            raise

    def _get_client(self) -> anthropic.AsyncAnthropic:
        if not self._api_key:
            raise MissingCredentialsError(
                "the anthropic provider needs an API key: set ANTHROPIC_API_KEY in the "
                "worker's environment (credentials are never read from workflow input), "
                'or give the agent provider "scripted"'
            )
        if self._client is None:
            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                max_retries=0,
                timeout=TIMEOUT,
                http_client=anthropic.DefaultAsyncHttpxClient(follow_redirects=False),
            )
        return self._client

    def _connection_error(self, err: Exception, cause: BaseException | None) -> ProviderError:
        timed_out = isinstance(err, anthropic.APITimeoutError | httpx2.TimeoutException)
        what = "timed out talking to" if timed_out else "could not reach"
        detail = f": {cause}" if cause is not None and str(cause) else ""
        return ProviderError(
            f"{what} the Anthropic Messages API at {self._base_url}{detail}", retryable=True
        )

    def _redacted(self, err: ProviderError) -> ProviderError:
        if self._api_key and self._api_key in err.message:
            err.message = err.message.replace(self._api_key, "[redacted]")
            err.args = (err.message,)
        return err


CACHE_BREAKPOINT = {"type": "ephemeral"}
"""The ``cache_control`` of a prompt-cache breakpoint (the 5-minute cache)."""


def _request(inp: LlmTurnInput) -> dict[str, Any]:
    """The ``messages.stream`` keyword arguments for ``inp``, in API field names.

    Prompt caching (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching)
    is on where it pays: for an agent with tools, whose tool loop sends the
    same prefix again every turn; ``agent.prompt_caching`` true or false
    turns it on or off for any agent.
    Two breakpoints: one after the tool definitions and the system prompt
    (on the system prompt, else on the last tool), one on the last block of
    the conversation, so turn *k+1* reads turn *k*'s whole prompt from the
    cache. (A prefix shorter than the model's minimum, 1,024 tokens for most,
    is simply not cached.)
    """
    agent = inp.agent
    messages = [m.model_dump(mode="json", exclude_none=True) for m in inp.messages]
    request: dict[str, Any] = {
        "model": agent.resolved_model,
        "max_tokens": agent.max_tokens or DEFAULT_MAX_TOKENS,
        "messages": messages,
    }
    tools = offered_tools(agent)
    caching = bool(tools) if agent.prompt_caching is None else agent.prompt_caching
    if agent.system_prompt and caching:
        text = {"type": "text", "text": agent.system_prompt, "cache_control": CACHE_BREAKPOINT}
        request["system"] = [text]
    elif agent.system_prompt:
        request["system"] = agent.system_prompt
    elif caching and tools:
        tools[-1] = {**tools[-1], "cache_control": CACHE_BREAKPOINT}
    if tools:
        request["tools"] = tools
    if caching and messages and messages[-1]["content"]:
        last = messages[-1]["content"]
        last[-1] = {**last[-1], "cache_control": CACHE_BREAKPOINT}
    return request


async def _stream_output(
    client: anthropic.AsyncAnthropic,
    request: dict[str, Any],
    on_event: OnEvent | None,
    base_url: str,
) -> LlmTurnOutput:
    progress = _Progress(on_event) if on_event is not None else None
    async with client.messages.stream(**request) as stream:
        # The SDK's stream helper decodes each event's JSON and folds it into
        # its message snapshot unvalidated: an event out of order or of another
        # shape fails there (IndexError, RuntimeError, AssertionError, ...).
        try:
            async for event in stream:
                if progress is not None:
                    progress.send(event)
            return _output(await stream.get_final_message())
        except json.JSONDecodeError as err:
            sent = f"a stream event that is not JSON: {err.doc[:200]!r}"
            raise malformed_stream(f"Anthropic Messages API at {base_url}", sent) from err
        except (
            AssertionError,
            AttributeError,
            LookupError,
            RuntimeError,
            TypeError,
            ValueError,
        ) as err:
            sent = f"a stream event it cannot read ({type(err).__name__}: {str(err)[:200]})"
            raise malformed_stream(f"Anthropic Messages API at {base_url}", sent) from err


class _Progress:
    """Turns the SDK's stream events into ``TextDelta`` / ``ToolCallEvent`` for
    one turn's ``on_event``, shielding the turn from the callback's errors."""

    def __init__(self, on_event: OnEvent) -> None:
        self._on_event = on_event
        self._failures = 0

    def send(self, event: ParsedMessageStreamEvent[Any]) -> None:
        # ``text`` is the helper's event for one ``text_delta``; at
        # ``content_block_stop`` the helper's ``content_block`` holds the input
        # parsed from every ``input_json_delta`` of the block.
        progress: TextDelta | ToolCallEvent
        if event.type == "text" and event.text:
            progress = TextDelta(text=event.text)
        elif event.type == "content_block_stop" and event.content_block.type == "tool_use":
            block = event.content_block
            # A deep copy: the block is the SDK's snapshot, which becomes the turn's output.
            tool_input = copy.deepcopy(block.input) if isinstance(block.input, dict) else {}
            progress = ToolCallEvent(id=block.id, name=block.name, input=tool_input)
        else:
            return
        try:
            self._on_event(progress)
        except Exception:
            self._failures += 1
            if self._failures == 1:
                logger.exception("a progress callback failed on a %s event", progress.type)
            else:
                logger.debug("a progress callback failed again (%d times)", self._failures)


def _output(message: anthropic.types.Message) -> LlmTurnOutput:
    if message.stop_reason is None:
        raise ProviderError(
            "the Anthropic Messages API stream ended before its message_delta event "
            "gave a stop_reason",
            retryable=True,
        )
    content: list[ContentBlock] = []
    for block in message.content:
        if block.type == "text":
            content.append(TextBlock(text=block.text))
        elif block.type == "tool_use":
            tool_input = block.input if isinstance(block.input, dict) else {}
            content.append(ToolUseBlock(id=block.id, name=block.name, input=tool_input))
    return LlmTurnOutput(
        content=content,
        stop_reason=message.stop_reason,
        usage=TokenUsage(
            input_tokens=message.usage.input_tokens,
            output_tokens=message.usage.output_tokens,
            cache_creation_input_tokens=message.usage.cache_creation_input_tokens or 0,
            cache_read_input_tokens=message.usage.cache_read_input_tokens or 0,
        ),
        model=message.model,
    )


def _status_error(err: anthropic.APIStatusError) -> ProviderError:
    """``err`` as a ``ProviderError``: an HTTP error answer, or an ``error`` event mid-stream."""
    if 300 <= err.status_code < 400:
        return redirect_error("the Anthropic Messages API", err.response)
    error_type = err.type or "unknown_error"
    detail = err.api_message or body_text(err.body) or "no error message"
    if err.status_code >= 400:
        status: int | None = err.status_code
        message = f"Anthropic Messages API answered HTTP {status} {error_type}: {detail}"
    else:
        status = _ERROR_TYPE_STATUS.get(error_type)
        message = f"Anthropic Messages API sent an error event mid-stream ({error_type}): {detail}"
    return ProviderError(
        message,
        error_type=error_type,
        status=status,
        request_id=err.request_id,
        retryable=status is None or status == 429 or status >= 500,
        retry_after_s=retry_after_s(err.response.headers),
    )
