"""A tool's argument schema, in the shape every OpenAI-compatible provider accepts.

pydantic's `model_json_schema()` is valid JSON Schema, and several providers still
refuse it. What is changed, and why:

- `$ref` / `$defs` are inlined. pydantic puts every nested model in `$defs` and points
  at it with `$ref`; Gemini's OpenAI-compatible endpoint, several vLLM / llama.cpp
  grammar converters and older gateways reject or ignore `$ref`. A `$ref` with
  sibling keywords (pydantic puts a field's `description` next to it) is merged, the
  siblings winning; a one-element `allOf` wrapper is flattened the same way.
  A recursive model cannot be inlined (it would never end): `SchemaError`.
- `title` is dropped wherever it is a schema keyword. pydantic derives one for every
  field ("Max Results" from `max_results`); it is noise in every request's tokens and
  strict-mode validators flag it. A *property* named `title` is kept: keys under
  `properties` are names, not keywords, and the walk knows the difference. Values of
  `default`, `enum`, `const` and `examples` are data and are copied untouched.
- `discriminator` is dropped: it is an OpenAPI keyword, not JSON Schema, and its
  `mapping` points into the `$defs` that were just inlined. The `oneOf` and the
  `const` tags it summarised stay, so the schema still says the same thing.
- The top level is `{"type": "object", "properties": {...}}` even for a tool with no
  parameters (OpenAI rejects a function whose parameters omit `properties`), and
  `required` and `additionalProperties` are kept.

The input is never mutated (pydantic caches its schemas).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from steadyloop.errors import SteadyloopError

# Keywords whose value is a map of name -> subschema.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
# Keywords whose value is one subschema (or, for old-style `items`, a list of them).
_SUBSCHEMAS = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
    }
)
# Keywords whose value is a list of subschemas.
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
# Keywords removed wherever they appear as keywords.
_DROPPED = frozenset({"title", "discriminator", "$defs", "definitions", "$schema"})

_REF_PREFIXES = ("#/$defs/", "#/definitions/")


class SchemaError(SteadyloopError, ValueError):
    """A schema that cannot be made provider-safe (recursive, external `$ref`, not an object)."""


def arguments_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The sanitized JSON schema of an arguments model."""
    return sanitize_schema(model.model_json_schema())


def sanitize_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A provider-safe copy of `schema`: refs inlined, titles dropped, object at the top."""
    defs: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        found = schema.get(key)
        if isinstance(found, Mapping):
            defs.update(found)
    body = _inline(schema, defs, ())
    if "type" not in body and "properties" in body:
        body["type"] = "object"
    if body.get("type") != "object":
        raise SchemaError(
            f"tool arguments must be a JSON object, but the schema's type is {body.get('type')!r}"
        )
    body.setdefault("properties", {})
    ordered = {"type": "object", "properties": body.pop("properties")}
    if "required" in body:
        ordered["required"] = body.pop("required")
    body.pop("type")
    ordered.update(body)
    return ordered


def _inline(
    node: Mapping[str, Any], defs: Mapping[str, Any], stack: tuple[str, ...]
) -> dict[str, Any]:
    if "$ref" in node:
        target = _resolve(node["$ref"], defs, stack)
        merged = _inline(defs[target], defs, (*stack, target))
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        merged.update(_inline(siblings, defs, stack))
        return merged
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], Mapping):
        merged = _inline(all_of[0], defs, stack)
        siblings = {key: value for key, value in node.items() if key != "allOf"}
        merged.update(_inline(siblings, defs, stack))
        return merged

    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _subschema(sub, defs, stack) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_subschema(sub, defs, stack) for sub in value]
        elif key in _SUBSCHEMAS:
            if isinstance(value, list):
                out[key] = [_subschema(sub, defs, stack) for sub in value]
            else:
                out[key] = _subschema(value, defs, stack)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _subschema(value: Any, defs: Mapping[str, Any], stack: tuple[str, ...]) -> Any:
    # `true`/`false` are valid schemas (e.g. `additionalProperties: false`).
    if isinstance(value, Mapping):
        return _inline(value, defs, stack)
    return copy.deepcopy(value)


def _resolve(ref: Any, defs: Mapping[str, Any], stack: tuple[str, ...]) -> str:
    if not isinstance(ref, str) or not ref.startswith(_REF_PREFIXES):
        raise SchemaError(f"only local $ref into $defs can be inlined, got {ref!r}")
    name = ref.split("/", 2)[2]
    if name not in defs:
        raise SchemaError(f"$ref {ref!r} points at a definition the schema does not have")
    if name in stack:
        cycle = " -> ".join((*stack[stack.index(name) :], name))
        raise SchemaError(
            f"recursive model {cycle}: a recursive schema cannot be inlined, and providers "
            "that reject $ref cannot express it; flatten it or take it as a JSON string"
        )
    return name
