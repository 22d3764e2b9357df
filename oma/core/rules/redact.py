"""Scrubbing credentials out of text before it leaves the worker.

Two kinds, both pure:

- ``redact`` recognises credentials by their shape. Used on a ``process``
  agent's stderr before it becomes part of a failure message
  (external-agents.md, "Process stderr redaction"), ACP stderr and errors, and
  progress notes: a failure message is stored in the workflow history and
  shown by the Temporal UI and CLI, so a key a child process printed must not
  reach it.
- ``redact_values`` replaces known secret values, the values of the worker's
  credential environment variables (``credential_env_names``,
  ``secret_values``): the worker applies it to everything an activity returns,
  heartbeats or raises (``oma.worker._redaction``), so a process agent that
  prints ``$ANTHROPIC_API_KEY`` leaves no trace of it in history.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

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


CREDENTIAL_ENV_NAMES: set[str] = {
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "TEMPORAL_API_KEY",
    "OMA_CODEC_KEYS",
    # the S3 payload store's (OMA_PAYLOAD_STORE=s3://...; AWS_SESSION_TOKEN is a *_TOKEN)
    "AWS_SECRET_ACCESS_KEY",
}
"""Environment variables that hold a credential whatever their name looks
like: the names the provider adapters and the connection read. The one
registry: a provider adapter that reads another name adds an entry to this
set literal (not at import time elsewhere, so the list is whole wherever it is
read; ``is_credential_name`` caches its answers). Names ``redact`` takes for a credential name
(``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*``, ``*API_KEY*``) and any
``api_key_env`` an agent names count too, see ``credential_env_names``."""

MIN_SECRET_CHARS = 8
"""Values shorter than this are not redacted: replacing every ``1`` or
``true`` in every output would destroy it and protect nothing."""


@functools.lru_cache(maxsize=4096)
def is_credential_name(name: str) -> bool:
    """Whether the environment variable ``name`` holds a credential: it is in
    ``CREDENTIAL_ENV_NAMES`` or ``redact`` scrubs an assignment to it
    (``GITHUB_TOKEN``, ``DB_PASSWORD``, ``client_secret``, ``X_API_KEY``)."""
    if name in CREDENTIAL_ENV_NAMES:
        return True
    probe = f"{name}=x"
    return redact(probe) != probe


def credential_env_names(environ: Mapping[str, str], extra: Iterable[str] = ()) -> list[str]:
    """The names in ``environ`` that hold a credential (``is_credential_name``)
    plus those of ``extra`` (e.g. an agent's ``api_key_env``) it has, sorted."""
    named = set(extra)
    return sorted(n for n in environ if n in named or is_credential_name(n))


def secret_values(environ: Mapping[str, str], extra: Iterable[str] = ()) -> frozenset[str]:
    """The values of ``credential_env_names(environ, extra)`` of at least
    ``MIN_SECRET_CHARS`` characters (surrounding whitespace stripped); a
    comma-separated list such as ``OMA_CODEC_KEYS`` also gives each entry and
    the part after a ``key_id:`` prefix."""
    values: set[str] = set()
    for name in credential_env_names(environ, extra):
        value = environ[name].strip()
        values.add(value)
        for entry in value.split(","):
            values.update((entry.strip(), entry.partition(":")[2].strip()))
    return frozenset(v for v in values if len(v) >= MIN_SECRET_CHARS)


def redact_values(text: str, values: Iterable[str]) -> str:
    """``text`` with every occurrence of each of ``values`` replaced by
    ``[redacted]``, longest first (so a value containing another goes whole).
    Pure. A value the text holds transformed (reversed, base64-encoded, split
    across lines) is not found: redaction is of exact values."""
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    return text
