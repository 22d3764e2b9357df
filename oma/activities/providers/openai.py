"""The ``openai`` provider: one model turn through the OpenAI Chat Completions API.

It reaches OpenAI itself and every server that speaks the same API (Ollama,
vLLM, LM Studio, OpenRouter, DeepSeek, ...): the agent's ``base_url`` says
where, its ``api_key_env`` which of the worker's environment variables holds
the key. Our conversation is in the Anthropic shape (``oma.core.schema.messages``);
this module maps it onto Chat Completions messages once, on the way out
(``chat_messages``), and the answer back onto ``text`` / ``tool_use`` blocks
with the Anthropic ``stop_reason`` names, so the tool loop stays
provider-neutral. The answer is streamed (``stream_options.include_usage``)
so that a long generation heartbeats its activity and reports progress;
failures become ``ProviderError`` with the retryability Temporal's retry
policy needs (https://platform.openai.com/docs/guides/error-codes).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai
from openai.types.chat import ChatCompletionChunk

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
from oma.core.schema.errors import InvalidMessageError, MissingCredentialsError, ProviderError
from oma.core.schema.messages import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    LLMMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from oma.core.schema.usage import TokenUsage
from oma.runtime.credentials import CredentialPolicy

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where turns go when neither the agent's ``base_url`` nor ``OPENAI_BASE_URL`` says otherwise."""

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
"""The environment variable holding the key when the agent names no ``api_key_env``."""

OPENAI_HOST = "api.openai.com"
"""OpenAI's own API host: the one server that always needs a key, and that
takes ``max_completion_tokens`` (compatible servers know ``max_tokens``)."""

TIMEOUT = openai.Timeout(120.0, connect=10.0)
"""Per-operation limits in seconds: 10 s to connect, 120 s for any one read or write.
While streaming, the read limit bounds the silence between two chunks, not the turn."""

HEARTBEAT_INTERVAL_S = 0.5
"""Most seconds between two activity heartbeats while a turn runs, streaming
or silent (streamed text sends one sooner: ``streamed_text_heartbeats``)."""

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
"""Chat Completions ``finish_reason`` → our (Anthropic) ``stop_reason``; any
other value (``content_filter``, ...) is kept as sent."""

WHO = "the openai provider"
"""How a refused credential names this adapter (``CredentialNotAllowedError``)."""

logger = logging.getLogger(__name__)


class OpenAIProvider:
    """Runs a turn on a Chat Completions API with a key from the worker's environment.

    Where a turn goes: the agent's ``base_url``, else ``base_url`` given
    here, else ``OPENAI_BASE_URL`` as the environment holds it when the
    provider is built, else ``DEFAULT_BASE_URL``. Which key: the value of the
    agent's ``api_key_env`` variable, read from the worker's environment at
    each turn; with none named, ``api_key`` given here, else
    ``OPENAI_API_KEY``. The key never comes from workflow input, and goes
    only where the worker's operator allowed (``oma.runtime.credentials``):
    the key given here or ``OPENAI_API_KEY`` to ``api.openai.com``, to the
    ``base_url`` given here (else ``OPENAI_BASE_URL``) and to the origins
    ``OMA_CREDENTIALS`` gives ``OPENAI_API_KEY``; an ``api_key_env`` variable
    only to the origins ``OMA_CREDENTIALS`` gives it. Redirects are not
    followed, so a request goes nowhere but the turn's base URL.

    A server that needs no key (Ollama, a local vLLM or LM Studio): with no
    ``api_key_env`` named and no ``OPENAI_API_KEY``, a turn to any host but
    ``api.openai.com`` is sent with no ``Authorization`` header. A variable the
    agent names explicitly must be set, wherever the turn goes.

    One ``openai.AsyncOpenAI`` client per (base URL, key), built on first use,
    with SDK retries off (``max_retries=0``) because Temporal's retry policy
    owns retries.
    """

    def __init__(self, api_key: str | None = None, base_url: str | None = None) -> None:
        self._api_key = api_key
        self._base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self._clients: dict[tuple[str, str | None], openai.AsyncOpenAI] = {}

    async def turn(self, inp: LlmTurnInput, on_event: OnEvent | None = None) -> LlmTurnOutput:
        """Send ``inp`` to ``POST {base_url}/chat/completions`` (streaming) and return the answer.

        Request: ``model`` = ``agent.model``; ``messages`` =
        ``chat_messages(agent.system_prompt, inp.messages)``; ``tools`` = the
        agent's tools as ``function`` tools (``parameters`` = their
        ``input_schema``); ``max_completion_tokens`` (at OpenAI) or
        ``max_tokens`` (elsewhere) only when the agent sets ``max_tokens``;
        ``stream`` with ``stream_options.include_usage``.

        Answer: a ``text`` block (the joined ``delta.content``, when non-empty)
        then one ``tool_use`` block per tool call, in index order, its
        ``input`` the parsed JSON ``arguments``; ``stop_reason`` from
        ``finish_reason`` by ``STOP_REASONS`` (``tool_use`` also when a server
        sends tool calls with ``stop``, as some Ollama versions do); usage
        with the Anthropic meaning (``oma.core.schema.usage``): ``input_tokens`` =
        ``prompt_tokens`` - ``prompt_tokens_details.cached_tokens``,
        ``cache_read_input_tokens`` = ``cached_tokens``, ``output_tokens`` =
        ``completion_tokens`` (zeros from a server that sends no usage);
        ``model`` as the server names it. Inside an activity it heartbeats
        at least every ``HEARTBEAT_INTERVAL_S`` seconds while the turn runs,
        and soon after each text delta, with the latest text
        (``streamed_text_heartbeats``).

        ``on_event``, when given, gets a ``TextDelta`` for every non-empty
        ``delta.content`` in order, and one ``ToolCallEvent`` per tool call
        once the stream gave its ``finish_reason`` (a call's arguments arrive
        in pieces; only then are they whole). An exception from ``on_event``
        is logged and the turn goes on.

        Raises, before any request: ``InvalidMessageError`` for what Chat
        Completions cannot carry (an image in a ``tool_result``);
        ``CredentialNotAllowedError`` when the key's variable may not go to the
        turn's base URL (checked before the variable is read, so it says
        nothing of whether the worker has it); ``MissingCredentialsError``
        naming the variable when the key is missing. ``ProviderError`` for
        every failure of the call, retryable for HTTP 429, 5xx, connection
        errors, timeouts, errors sent mid-stream and a chunk that is not
        JSON or not a ``chat.completion.chunk`` (``error_type``
        ``malformed_stream``), not for other 4xx nor a redirect (never
        followed), with ``retry_after_s`` from ``retry-after-ms`` /
        ``retry-after``. The message carries the status and the server's own
        ``error.message``, never the key.
        """
        agent = inp.agent
        base_url = agent.base_url or self._base_url
        request = _request(inp, _is_openai(base_url))
        client, api_key = self._client(base_url, agent.api_key_env)
        if api_key is None:
            # the server gets no Authorization header at all, not a made-up key
            request["extra_headers"] = {"Authorization": openai.Omit()}
        try:
            with streamed_text_heartbeats(on_event, HEARTBEAT_INTERVAL_S) as events:
                return await _stream_output(client, request, events, base_url)
        except openai.APIStatusError as err:
            raise _redacted(_status_error(err), api_key) from err
        except openai.APIConnectionError as err:
            raise _redacted(_connection_error(err, err.__cause__, base_url), api_key) from err
        except httpx2.TransportError as err:
            # a transport error interrupting a stream already under way is not wrapped
            raise _redacted(_connection_error(err, err, base_url), api_key) from err
        except openai.APIError as err:
            raise _redacted(_stream_error(err, base_url), api_key) from err
        except ProviderError as err:  # the stream's own: its cause stays chained
            _redacted(err, api_key)
            raise

    def _client(
        self, base_url: str, api_key_env: str | None
    ) -> tuple[openai.AsyncOpenAI, str | None]:
        # read at each turn, as the keys are; this adapter's own base URL is
        # the worker's configuration, so its default key may go there
        credentials = CredentialPolicy.from_env().allowing(DEFAULT_API_KEY_ENV, self._base_url)
        if api_key_env is not None:
            credentials.check(api_key_env, base_url, who=WHO)
            api_key = os.environ.get(api_key_env) or None
            if api_key is None:
                raise MissingCredentialsError(
                    f"the openai provider needs an API key for {base_url}: set {api_key_env} "
                    "(the agent's api_key_env) in the worker's environment (credentials are "
                    "never read from workflow input)"
                )
        else:
            api_key = self._api_key or os.environ.get(DEFAULT_API_KEY_ENV) or None
            if api_key is None and _is_openai(base_url):
                raise MissingCredentialsError(
                    f"the openai provider needs an API key for {base_url}: set "
                    f"{DEFAULT_API_KEY_ENV} in the worker's environment (or name another "
                    "variable in the agent's api_key_env; credentials are never read from "
                    "workflow input), or give the agent the base_url of a server that "
                    "needs no key"
                )
            if api_key is not None:
                credentials.check(DEFAULT_API_KEY_ENV, base_url, who=WHO)
        client = self._clients.get((base_url, api_key))
        if client is None:
            client = openai.AsyncOpenAI(
                # no key: a placeholder the SDK insists on (its header is omitted, see turn)
                api_key=api_key or "no-key",
                base_url=base_url,
                max_retries=0,
                timeout=TIMEOUT,
                # a redirect would take the key's headers to another origin
                http_client=openai.DefaultAsyncHttpxClient(follow_redirects=False),
            )
            self._clients[(base_url, api_key)] = client
        return client, api_key


def _is_openai(base_url: str) -> bool:
    return urlsplit(base_url).hostname == OPENAI_HOST


def _request(inp: LlmTurnInput, at_openai: bool) -> dict[str, Any]:
    """The ``chat.completions.create`` keyword arguments for ``inp``, in API field names."""
    agent = inp.agent
    request: dict[str, Any] = {
        "model": agent.resolved_model,
        "messages": chat_messages(agent.system_prompt, inp.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if agent.max_tokens is not None:
        request["max_completion_tokens" if at_openai else "max_tokens"] = agent.max_tokens
    if agent.tools or agent.mcp_tools:
        request["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": tool["description"],
                    "parameters": tool["input_schema"],
                },
            }
            for tool in offered_tools(agent)
        ]
    return request


def chat_messages(system_prompt: str, messages: list[LLMMessage]) -> list[dict[str, Any]]:
    """Our (Anthropic-shaped) conversation as Chat Completions ``messages``.

    - ``system_prompt``, when non-empty, is a first ``system`` message.
    - A user message's ``tool_result`` blocks become one ``tool`` message
      each (``tool_call_id`` = ``tool_use_id``, ``content`` its text; an
      ``is_error`` result's text is prefixed ``Error: ``, the API having no
      such flag), in order; its other blocks then one ``user`` message: a
      string for a single text block, else content parts (``text``;
      ``image_url`` with a ``data:`` URL for a base64 image, the URL for a
      URL image).
    - An assistant message: ``content`` its joined text (``None`` when it has
      none), ``tool_calls`` one ``function`` call per ``tool_use`` block
      (``arguments`` its input as a JSON string).

    Raises ``InvalidMessageError`` for an image inside a ``tool_result``: a
    ``tool`` message carries text only, and an image is never silently
    dropped (structured-input.md).
    """
    out: list[dict[str, Any]] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    for index, message in enumerate(messages):
        if message.role == "assistant":
            out.append(_assistant_message(message.content))
            continue
        rest: list[ContentBlock] = []
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                out.append(_tool_message(block, index))
            else:
                rest.append(block)
        if rest:
            out.append({"role": "user", "content": _user_content(rest)})
    return out


def _assistant_message(content: list[ContentBlock]) -> dict[str, Any]:
    text = "".join(b.text for b in content if isinstance(b, TextBlock))
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(b.input)},
        }
        for b in content
        if isinstance(b, ToolUseBlock)
    ]
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_message(block: ToolResultBlock, index: int) -> dict[str, Any]:
    if isinstance(block.content, str):
        text = block.content
    else:
        if any(isinstance(part, ImageBlock) for part in block.content):
            raise InvalidMessageError(
                f"messages[{index}]: the tool_result for {block.tool_use_id!r} holds an image, "
                "which the OpenAI Chat Completions API cannot carry in a tool message; "
                "return the image's description or path as text, or use provider 'anthropic'"
            )
        text = "".join(part.text for part in block.content if isinstance(part, TextBlock))
    if block.is_error:
        text = f"Error: {text}"
    return {"role": "tool", "tool_call_id": block.tool_use_id, "content": text}


def _user_content(blocks: list[ContentBlock]) -> str | list[dict[str, Any]]:
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text  # a plain string: what every compatible server understands
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            source = block.source
            url = (
                f"data:{source.media_type};base64,{source.data}"
                if isinstance(source, Base64ImageSource)
                else source.url
            )
            parts.append({"type": "image_url", "image_url": {"url": url}})
        # tool_use in a user message is refused by the message guard before any turn
    return parts


@dataclass
class _ToolCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class _Answer:
    """The answer as the chunks build it up."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _ToolCall] = field(default_factory=dict)
    finish_reason: str | None = None
    model: str = ""
    usage: TokenUsage = field(default_factory=TokenUsage)

    def add(self, chunk: ChatCompletionChunk) -> None:
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            details = chunk.usage.prompt_tokens_details
            cached = (details.cached_tokens or 0) if details is not None else 0
            self.usage = TokenUsage(
                input_tokens=max(0, chunk.usage.prompt_tokens - cached),
                cache_read_input_tokens=cached,
                output_tokens=chunk.usage.completion_tokens,
            )
        for choice in chunk.choices[:1]:  # n is never set: one choice
            if choice.delta.content:
                self.text.append(choice.delta.content)
            for delta in choice.delta.tool_calls or []:
                call = self.calls.setdefault(delta.index, _ToolCall())
                call.id = delta.id or call.id
                if delta.function is not None:
                    call.name = delta.function.name or call.name
                    call.arguments += delta.function.arguments or ""
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason

    def tool_uses(self) -> list[ToolUseBlock]:
        """The tool calls, in index order; raises ``ProviderError`` for
        arguments that are not a JSON object (unless cut off by ``length``:
        the loop never runs those)."""
        uses = []
        for index in sorted(self.calls):
            call = self.calls[index]
            try:
                parsed = json.loads(call.arguments) if call.arguments.strip() else {}
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                if self.finish_reason != "length":
                    raise ProviderError(
                        f"the model called tool {call.name!r} with arguments that are not a "
                        f"JSON object: {call.arguments[:200]!r}",
                        error_type="invalid_tool_arguments",
                    )
                parsed = {}
            uses.append(ToolUseBlock(id=call.id or f"call_{index}", name=call.name, input=parsed))
        return uses

    def output(self, base_url: str) -> LlmTurnOutput:
        if self.finish_reason is None:
            raise ProviderError(
                f"the Chat Completions stream from {base_url} ended before a choice gave "
                "its finish_reason",
                retryable=True,
            )
        content: list[ContentBlock] = []
        if "".join(self.text):
            content.append(TextBlock(text="".join(self.text)))
        uses = self.tool_uses()
        content += uses
        stop_reason = STOP_REASONS.get(self.finish_reason, self.finish_reason)
        if uses and stop_reason == "end_turn":
            stop_reason = "tool_use"
        return LlmTurnOutput(
            content=content, stop_reason=stop_reason, usage=self.usage, model=self.model
        )


async def _stream_output(
    client: openai.AsyncOpenAI,
    request: dict[str, Any],
    on_event: OnEvent | None,
    base_url: str,
) -> LlmTurnOutput:
    answer = _Answer()
    progress = _Progress(on_event) if on_event is not None else None
    stream = await client.chat.completions.create(**request)
    # The SDK decodes each chunk's JSON but builds its model without
    # validating it: a chunk of another shape fails where it is read.
    try:
        async with stream:
            async for chunk in stream:
                finished = answer.finish_reason is not None
                answer.add(chunk)
                if progress is None:
                    continue
                for choice in chunk.choices[:1]:
                    if choice.delta.content:
                        progress.send(TextDelta(text=choice.delta.content))
                if not finished and answer.finish_reason is not None:
                    for use in answer.tool_uses():
                        progress.send(ToolCallEvent(id=use.id, name=use.name, input=use.input))
        return answer.output(base_url)
    except json.JSONDecodeError as err:
        sent = f"a stream chunk that is not JSON: {err.doc[:200]!r}"
        raise malformed_stream(f"Chat Completions API at {base_url}", sent) from err
    except (AttributeError, LookupError, TypeError, ValueError) as err:
        sent = f"a stream chunk it cannot read ({type(err).__name__}: {str(err)[:200]})"
        raise malformed_stream(f"Chat Completions API at {base_url}", sent) from err


class _Progress:
    """Hands one turn's events to its ``on_event``, shielding the turn from its errors."""

    def __init__(self, on_event: OnEvent) -> None:
        self._on_event = on_event
        self._failures = 0

    def send(self, event: TextDelta | ToolCallEvent) -> None:
        try:
            self._on_event(event)
        except Exception:
            self._failures += 1
            if self._failures == 1:
                logger.exception("a progress callback failed on a %s event", event.type)
            else:
                logger.debug("a progress callback failed again (%d times)", self._failures)


def _error_detail(body: object) -> tuple[str | None, str]:
    """``(error type, message)`` of an error body: OpenAI's ``{type, code,
    message}`` (the SDK unwraps ``{"error": ...}``), or whatever text a
    compatible server sent."""
    if isinstance(body, dict):
        kind = body.get("type") or body.get("code")
        message = body.get("message")
        return (
            str(kind) if kind else None,
            str(message) if message else body_text(json.dumps(body)),
        )
    return None, body_text(body)


def _status_error(err: openai.APIStatusError) -> ProviderError:
    status = err.status_code
    if 300 <= status < 400:
        return redirect_error(
            f"Chat Completions API at {err.request.url.copy_with(query=None)}", err.response
        )
    error_type, detail = _error_detail(err.body)
    request_id = err.request_id or err.response.headers.get("request-id")
    return ProviderError(
        f"Chat Completions API at {err.request.url.copy_with(query=None)} answered HTTP "
        f"{status} {error_type or 'error'}: {detail or 'no error message'}",
        error_type=error_type,
        status=status,
        request_id=request_id,
        retryable=status == 429 or status >= 500,
        retry_after_s=retry_after_s(err.response.headers),
    )


def _stream_error(err: openai.APIError, base_url: str) -> ProviderError:
    error_type, detail = _error_detail(err.body)
    return ProviderError(
        f"Chat Completions API at {base_url} sent an error mid-stream "
        f"({error_type or 'error'}): {detail or err.message}",
        error_type=error_type,
        retryable=True,  # the request was accepted: what failed is the generation
    )


def _connection_error(err: Exception, cause: BaseException | None, base_url: str) -> ProviderError:
    timed_out = isinstance(err, openai.APITimeoutError | httpx2.TimeoutException)
    what = "timed out talking to" if timed_out else "could not reach"
    detail = f": {cause}" if cause is not None and str(cause) else ""
    return ProviderError(f"{what} the Chat Completions API at {base_url}{detail}", retryable=True)


def _redacted(err: ProviderError, api_key: str | None) -> ProviderError:
    if api_key and api_key in err.message:
        err.message = err.message.replace(api_key, "[redacted]")
        err.args = (err.message,)
    return err
