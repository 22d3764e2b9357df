"""Scrubbing credentials out of text before it leaves the worker.

Used on a ``process`` agent's stderr before it becomes part of a failure
message (external-agents.md, "Process stderr redaction"): a failure message is
stored in the workflow history and shown by the Temporal UI and CLI, so a key a
child process printed must not reach it.
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"

_PEM_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"
    r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*\Z)",
    re.DOTALL,
)
# The base64 body of a key whose BEGIN line was cut off, as in the tail of a
# long stderr: the END line and the key lines right above it.
_PEM_ORPHAN_END = re.compile(
    r"(?:^[A-Za-z0-9+/=]+[ \t]*\r?\n)*^.*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
    re.MULTILINE,
)
_BEARER = re.compile(
    r"""(?P<prefix>authorization["']?\s*[:=]\s*["']?bearer\s+)[^\s"',;]+""",
    re.IGNORECASE,
)
# Anthropic (sk-ant-api03-...), OpenAI (sk-..., sk-proj-...) and look-alikes;
# the look-behind keeps words such as "task-runner" intact.
_SK_KEY = re.compile(r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9][A-Za-z0-9_-]{7,}")
_ASSIGNMENT = re.compile(
    r"""(?P<key>\b[\w-]*?(?:password|passwd|api[_-]?key|apikey|token|secret)["']?\s*[:=]\s*)"""
    r"""(?:(?P<quote>["'])[^"'\r\n]*(?P=quote)|[^\s"',;&]+)""",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """``text`` with every credential it recognises replaced by ``[redacted]``.

    Redacts, case-insensitively where it matters:

    - PEM private key blocks, ``-----BEGIN ... PRIVATE KEY-----`` through
      ``-----END ... PRIVATE KEY-----`` (an unterminated block to the end of the
      text; an END line whose BEGIN was cut off, with the key lines above it);
    - the token of an ``Authorization: Bearer <token>`` header (the
      ``Authorization: Bearer`` prefix is kept);
    - ``sk-`` style API keys (``sk-ant-api03-...``, ``sk-proj-...``);
    - the value of a ``password``, ``passwd``, ``api_key``, ``api-key``,
      ``apikey``, ``token`` or ``secret`` assignment, with ``=`` or ``:``,
      quoted or not, including prefixed names such as ``GITHUB_TOKEN`` or
      ``client_secret`` (the key name and quotes are kept).

    Pure: no I/O, and ``redact(redact(t)) == redact(t)``. Recognition is by
    pattern, so a credential in another shape is not caught; callers still
    should not print secrets.
    """
    text = _PEM_PRIVATE_KEY.sub(REDACTED, text)
    text = _PEM_ORPHAN_END.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: m["prefix"] + REDACTED, text)
    text = _SK_KEY.sub(REDACTED, text)
    return _ASSIGNMENT.sub(_redact_assignment, text)


def _redact_assignment(match: re.Match[str]) -> str:
    quote = match["quote"] or ""
    return f"{match['key']}{quote}{REDACTED}{quote}"
