"""A pydantic model's JSON schema in the shape of ``tools[].input_schema``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

_NULL = {"type": "null"}


def tool_input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema as the Anthropic Messages API's
    ``tools[].input_schema`` takes it.

    Always ``{"type": "object", "properties": ..., "required": [...]}`` (plus
    ``"additionalProperties": false`` for a model that forbids extra fields).
    Titles are dropped, and an optional field typed ``X | None`` is shown as
    ``X``: leaving it out is how the model says "none". A model with nested
    models (which would need ``$defs``) is refused with ``ValueError``.
    """
    schema = model.model_json_schema()
    if "$defs" in schema:
        raise ValueError(f"{model.__name__}: a tool input may not nest models ($defs)")
    out: dict[str, Any] = {
        "type": "object",
        "properties": {name: _property(p) for name, p in schema.get("properties", {}).items()},
        "required": list(schema.get("required", [])),
    }
    if schema.get("additionalProperties") is False:
        out["additionalProperties"] = False
    return out


def _property(schema: dict[str, Any]) -> dict[str, Any]:
    prop = {k: v for k, v in schema.items() if k != "title"}
    options = prop.get("anyOf")
    if isinstance(options, list) and _NULL in options:
        rest = [o for o in options if o != _NULL]
        if len(rest) == 1:
            del prop["anyOf"]
            if prop.get("default", 0) is None:
                del prop["default"]
            prop = {**_property(rest[0]), **prop}
    return prop
