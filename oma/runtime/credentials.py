"""Where the worker's credentials may be sent: the operator's allow-list.

A run input names a credential only by its variable (an agent's
``api_key_env``, an MCP server's ``headers``) but also says where the request
goes (``base_url``, ``url``), and whoever can start a workflow writes the run
input. So before any request that carries one of its credentials, the worker
checks that its operator allowed that variable for that origin
(docs/security.md, "Where credentials may go"):

- ``ANTHROPIC_API_KEY`` may go to ``https://api.anthropic.com``, and
  ``OPENAI_API_KEY`` to ``https://api.openai.com``, and each to its
  provider's base URL the worker was configured with (``ANTHROPIC_BASE_URL``,
  ``OPENAI_BASE_URL``, or the ``base_url`` an adapter was built with);
- ``OMA_CREDENTIALS`` allows more: ``VAR=origin[,origin...]`` entries
  separated by ``;`` or newlines, e.g.
  ``OPENAI_API_KEY=openrouter.ai,http://localhost:11434;MCP_TOKEN=mcp.example.com``;
- nothing else: any other variable, or any other origin, is
  ``CREDENTIAL_NOT_ALLOWED``.

An origin is a scheme, a host and a port (RFC 9110, section 4.3.1), compared
exactly as ``httpx2`` — the client every one of these requests is sent with —
parses them: ``https://api.openai.com@evil.example`` is ``evil.example``,
``localhost`` is not ``127.0.0.1``, ``api.openai.com.`` is not
``api.openai.com``, a Cyrillic look-alike is its own IDNA name, and ``http``
is not ``https``. Nothing is resolved: the check is on the names the
operator wrote.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import httpx2

from oma.core.schema.errors import CredentialNotAllowedError, CredentialsConfigError

CREDENTIALS_ENV = "OMA_CREDENTIALS"
"""The worker's variable that declares where its credentials may go."""

PROVIDER_KEYS: Mapping[str, tuple[str, str]] = {
    "ANTHROPIC_API_KEY": ("https://api.anthropic.com", "ANTHROPIC_BASE_URL"),
    "OPENAI_API_KEY": ("https://api.openai.com", "OPENAI_BASE_URL"),
}
"""Each provider's key -> (its provider's own origin, the variable of the
worker's base URL for that provider): where the key may go with no declaration."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENTRY_SEPARATOR = re.compile(r"[;\n]")
_SCHEMES = ("http", "https")


@dataclass(frozen=True)
class CredentialPolicy:
    """Which of the worker's variables may be sent to which origins.

    Build it with ``from_env``; ``check`` before every request that carries
    a credential.
    """

    allowed: Mapping[str, frozenset[httpx2.Origin]]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CredentialPolicy:
        """The policy of ``environ`` (default ``os.environ``): ``PROVIDER_KEYS``
        and their base URLs, plus ``OMA_CREDENTIALS``.

        Raises ``CredentialsConfigError`` for a malformed ``OMA_CREDENTIALS``,
        naming the entry. (A base URL variable that is not an http(s) URL
        allows nothing: its provider's turns fail to connect anyway.)
        """
        env = os.environ if environ is None else environ
        allowed: dict[str, set[httpx2.Origin]] = {}
        for variable, (own, base_url_env) in PROVIDER_KEYS.items():
            origins = (origin_of(url) for url in (own, env.get(base_url_env, "")))
            allowed[variable] = {origin for origin in origins if origin is not None}
        for variable, declared in _declarations(env.get(CREDENTIALS_ENV, "")):
            allowed.setdefault(variable, set()).update(declared)
        return cls({name: frozenset(origins) for name, origins in allowed.items()})

    def allowing(self, variable: str, url: str) -> CredentialPolicy:
        """This policy, with ``url``'s origin also allowed for ``variable``: an
        adapter the worker's own code built with a ``base_url`` sends its key
        there (a URL without an http(s) origin adds nothing)."""
        origin = origin_of(url)
        if origin is None:
            return self
        current = self.allowed.get(variable, frozenset())
        return CredentialPolicy({**self.allowed, variable: current | {origin}})

    def check(self, variable: str, url: str, *, who: str) -> None:
        """Return if ``variable``'s value may be sent to ``url``'s origin.

        Raises ``CredentialNotAllowedError`` otherwise (and for a ``url``
        ``httpx2`` cannot parse), its message naming ``who`` (e.g. ``"the
        openai provider"``), the variable and the origin, and what to declare
        to allow it; never the variable's value, nor which origins are
        allowed (the message goes to the run's history).
        """
        origin = origin_of(url)
        allowed = self.allowed.get(variable, frozenset())
        if origin is not None and origin in allowed:
            return
        where = show(origin) if origin is not None else repr(url[:100])
        if variable in PROVIDER_KEYS:
            own, base_url_env = PROVIDER_KEYS[variable]
            why = (
                f"the worker allows {variable} only to {own}, to its own base URL "
                f"({base_url_env}) and where {CREDENTIALS_ENV} says"
            )
        elif allowed:
            why = f"the worker allows {variable} only where {CREDENTIALS_ENV} says"
        else:
            why = f"the worker does not allow {variable} to be sent anywhere"
        fix = (
            f"; to allow it, set {CREDENTIALS_ENV}='{variable}={where}' in the worker's "
            "environment (docs/security.md)"
            if origin is not None
            else " (not a URL whose origin the worker can check)"
        )
        raise CredentialNotAllowedError(f"{who} may not send {variable} to {where}: {why}{fix}")

    def origins(self) -> dict[str, list[str]]:
        """Each variable's allowed origins, as ``show`` writes them, sorted."""
        return {
            name: sorted(show(origin) for origin in origins)
            for name, origins in sorted(self.allowed.items())
        }


def origin_of(url: str) -> httpx2.Origin | None:
    """``url``'s origin as ``httpx2`` parses it (the host in lower case, an
    IDNA name in its decoded form, an IPv6 address compressed; the port made
    explicit), or ``None`` for a URL it cannot parse or without an http(s)
    scheme and a host."""
    try:
        parsed = httpx2.URL(url)
        if parsed.scheme not in _SCHEMES or not parsed.host:
            return None
        return parsed.origin
    except (httpx2.InvalidURL, ValueError):
        return None


def show(origin: httpx2.Origin) -> str:
    """``origin`` as a user writes it: ``https://host``, the port only when
    it is not the scheme's default, an IPv6 host in brackets."""
    host = f"[{origin.host}]" if ":" in origin.host else origin.host
    default = 443 if origin.scheme == "https" else 80
    port = "" if origin.port == default else f":{origin.port}"
    return f"{origin.scheme}://{host}{port}"


def _declarations(text: str) -> Iterable[tuple[str, set[httpx2.Origin]]]:
    for entry in filter(None, (e.strip() for e in _ENTRY_SEPARATOR.split(text))):
        variable, equals, origins = (part.strip() for part in entry.partition("="))
        if not equals:
            raise _config_error(f"{variable!r} is not VAR=origin[,origin...]")
        if not _ENV_NAME.fullmatch(variable):
            raise _config_error(f"{variable!r} is not an environment variable name")
        given = [o.strip() for o in origins.split(",") if o.strip()]
        if not given:
            raise _config_error(f"{variable}: give at least one origin, e.g. {variable}=host")
        yield variable, {_declared_origin(o, variable) for o in given}


def _declared_origin(text: str, variable: str) -> httpx2.Origin:
    """The origin an operator wrote for ``variable``; a bare ``host[:port]`` is HTTPS."""
    try:
        parsed: httpx2.URL | None = httpx2.URL(text if "://" in text else f"https://{text}")
    except (httpx2.InvalidURL, ValueError):
        parsed = None
    if (
        parsed is None
        or parsed.scheme not in _SCHEMES
        or not parsed.host
        or parsed.userinfo
        or "*" in text
        or parsed.path not in ("", "/")
        or parsed.query
        or parsed.fragment
    ):
        raise _config_error(
            f"{variable}: {text!r} is not an origin (https://host[:port], http://host[:port], "
            "or a bare host[:port] for HTTPS; no path, user or wildcard)"
        )
    return parsed.origin


def _config_error(detail: str) -> CredentialsConfigError:
    return CredentialsConfigError(
        f"{CREDENTIALS_ENV}: {detail}; write VAR=origin[,origin...] entries separated by ';', "
        f"e.g. {CREDENTIALS_ENV}='OPENAI_API_KEY=openrouter.ai,http://localhost:11434'"
    )
