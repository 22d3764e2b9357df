"""Reading docker-compose.yml as `docker compose` does, for the tests of the
deployment: its services, their environments (both syntaxes), their
dependencies, ports and volumes, and compose's variable interpolation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from tests.support.paths import ROOT

COMPOSE_FILE = ROOT / "docker-compose.yml"

_VARIABLE = re.compile(r"\$(?:(\$)|\{(\w+)(?:(:?-)([^}]*))?\}|(\w+))")


def load() -> dict[str, Any]:
    """The compose file, parsed."""
    result: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return result


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """``value`` with compose's substitutions made from ``env``: ``$$`` is a
    literal ``$``; ``${NAME}`` and ``$NAME`` the variable (empty when unset);
    ``${NAME:-default}`` the default when unset or empty, ``${NAME-default}``
    only when unset."""

    def substitute(match: re.Match[str]) -> str:
        dollar, braced, operator, default, bare = match.groups()
        if dollar:
            return "$"
        name = braced or bare
        if operator == ":-":
            return env.get(name) or default
        if operator == "-":
            return env.get(name, default)
        return env.get(name, "")

    return _VARIABLE.sub(substitute, value)


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as written (not interpolated), whichever of
    the two compose syntaxes it uses."""
    env = service.get("environment", {})
    if isinstance(env, list):
        pairs = (item.split("=", 1) for item in env)
        return {pair[0]: pair[1] if len(pair) == 2 else "" for pair in pairs}
    return {key: "" if value is None else str(value) for key, value in env.items()}


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """Service name -> start condition, whichever of the two compose syntaxes is used."""
    deps = service.get("depends_on", {})
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in deps.items()}


def published_ports(service: dict[str, Any]) -> set[tuple[int, int]]:
    """(host port, container port) pairs of a service's port entries
    ("7233:7233", "127.0.0.1:7233:7233", the long form)."""
    pairs: set[tuple[int, int]] = set()
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            pairs.add((int(entry["published"]), int(entry["target"])))
        else:
            parts = str(entry).split("/")[0].split(":")
            pairs.add((int(parts[-2]), int(parts[-1])))
    return pairs


@dataclass(frozen=True)
class Volume:
    """One entry of a service's ``volumes``: a named volume (``source`` a
    name) or a bind mount (``source`` a path, relative to the compose file)."""

    source: str
    target: str
    read_only: bool

    @property
    def named(self) -> bool:
        return not self.source.startswith((".", "/", "~"))


def volumes(service: dict[str, Any], env: Mapping[str, str]) -> list[Volume]:
    """A service's volumes, short syntax (``SOURCE:TARGET[:ro]``) or long,
    interpolated from ``env`` as compose does before it reads them."""
    found = []
    for entry in service.get("volumes", []):
        if isinstance(entry, dict):
            source = interpolate(str(entry["source"]), env)
            target = interpolate(str(entry["target"]), env)
            found.append(Volume(source, target, bool(entry.get("read_only", False))))
        else:
            source, target, *mode = interpolate(str(entry), env).split(":")
            found.append(Volume(source, target, "ro" in mode))
    return found
