"""Tool schemas a given provider accepts: `sanitize_tool_schema(schema, profile)`.

`sanitize_schema` (in `schema.py`) makes any schema portable: `$ref`/`$defs` inlined
(a cycle is a `SchemaError` naming it), `title` and `discriminator` dropped, an object
at the root. Some providers want more, and refuse the whole request over one keyword.
Third-party schemas (an MCP server's, a hand-written one) go through the same door.

`openai_strict` (function calling with `strict: true`). OpenAI refuses, per object:
"'required' is required to be supplied and to be an array including every key in
properties. Missing 'x'." and "'additionalProperties' is required to be supplied and to
be false". So every object gets `additionalProperties: false` and every property is
required; a property that was optional becomes nullable instead (`["integer", "null"]`,
or a `null` branch in its `anyOf`), and its `default` moves into the description
("'default' is not permitted"). Keywords outside strict mode's subset (`allOf`
members are merged, `oneOf` becomes `anyOf`; `not`, `if`/`then`/`else`,
`patternProperties`, `propertyNames`, `uniqueItems`, `contains`, ... are dropped, and
formats other than date-time, date, time, duration, email, hostname, ipv4, ipv6, uuid)
are noted in the description so the model still reads the constraint. A schema strict
mode cannot express (a free-form object, an untyped value or array) is a `SchemaError`;
`describe` then offers that tool without `strict` rather than not at all.

The model answers a strict schema with `null` for what it would have left out, and
the tool's own model would refuse `null` for `limit: int = 10`. `drop_absent_nulls`
reverses the mapping before validation: `null` for an optional property whose schema
does not admit `null` means "not given", so the default applies.

`gemini` (Gemini takes a subset of OpenAPI 3.0). Keywords outside it are refused one by
one: 'Invalid JSON payload received. Unknown name "additionalProperties" at
'tools[0].function_declarations[8].parameters...': Cannot find field' (likewise
`$schema`, `const`, `propertyNames`, `exclusiveMinimum`), and a list-valued `type` gets
"Proto field is not repeating, cannot start list". So: only Gemini's fields are kept;
`const` becomes a one-value `enum`; `["string", "null"]` becomes `"string"` with
`nullable: true`, and a `null` branch of `anyOf` becomes `nullable`; `oneOf` becomes
`anyOf`; enums of non-strings and string formats other than `enum` and `date-time`
(refused by the Gemini Developer API) move into the description. Gemini never raises.

`portable`, `openai`, `anthropic`, `mistral`: the portable schema as it is.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from steadyloop.tools._schema import SchemaError, sanitize_schema

SchemaProfile = Literal["portable", "openai", "openai_strict", "anthropic", "gemini", "mistral"]
SCHEMA_PROFILES: tuple[SchemaProfile, ...] = (
    "portable",
    "openai",
    "openai_strict",
    "anthropic",
    "gemini",
    "mistral",
)

_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# Outside strict mode's subset: dropped, and noted in the description.
_STRICT_UNSUPPORTED = (
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
)
# Keywords that carry no constraint: dropped silently wherever a profile refuses them.
_METADATA = frozenset(
    {"$schema", "$id", "$comment", "examples", "readOnly", "writeOnly", "deprecated", "title"}
)
# Gemini's Schema object (a subset of OpenAPI 3.0).
_GEMINI_FIELDS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "items",
        "minItems",
        "maxItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "minimum",
        "maximum",
    }
)
_GEMINI_STRING_FORMATS = frozenset({"enum", "date-time"})
_GEMINI_NUMBER_FORMATS = frozenset({"float", "double", "int32", "int64"})
_TYPED = ("type", "anyOf", "oneOf", "allOf", "enum", "const")


def sanitize_tool_schema(
    schema: Mapping[str, Any], profile: SchemaProfile = "portable"
) -> dict[str, Any]:
    """`schema` made acceptable to `profile`'s provider; the input is never mutated.

    Raises `SchemaError` when it cannot be: a recursive or external `$ref`, a root that
    is not an object, or (`openai_strict` only) a shape strict mode cannot express.
    """
    portable = sanitize_schema(schema)
    if profile == "openai_strict":
        return _strict(portable, "(root)")
    if profile == "gemini":
        return _gemini(portable)
    if profile in SCHEMA_PROFILES:
        return portable
    raise ValueError(f"unknown schema profile {profile!r}; known: {', '.join(SCHEMA_PROFILES)}")


def drop_absent_nulls(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """`arguments` without the `null`s a strict schema made the model send for omissions.

    A `null` is dropped where the (portable) `schema` says the property is optional and
    does not admit `null`; nested objects and arrays of objects are walked. Everything
    else is returned as it was.
    """
    out: dict[str, Any] = _drop_nulls(dict(arguments), schema)
    return out


# -- shared --------------------------------------------------------------------------


def _note(node: dict[str, Any], text: str) -> None:
    description = node.get("description")
    node["description"] = f"{description} ({text})" if description else text[:1].upper() + text[1:]


def _merge_all_of(node: dict[str, Any]) -> dict[str, Any]:
    """Fold `allOf` members into the node: properties and required united, others merged."""
    members = node.pop("allOf", None)
    if not isinstance(members, list):
        return node
    merged: dict[str, Any] = {}
    for member in [*members, node]:
        if not isinstance(member, Mapping):
            continue
        for key, value in member.items():
            if key == "properties" and isinstance(value, Mapping):
                merged.setdefault("properties", {}).update(value)
            elif key == "required" and isinstance(value, list):
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged[key] = value
    return merged


def _walk_children(node: dict[str, Any], child: Callable[[Any, str], Any], path: str) -> None:
    """Replace each subschema of `node` with `child(subschema, its path)`."""
    properties = node.get("properties")
    if isinstance(properties, Mapping):
        node["properties"] = {k: child(v, f"{path}.{k}") for k, v in properties.items()}
    for key in ("anyOf", "oneOf", "prefixItems"):
        if isinstance(node.get(key), list):
            node[key] = [child(v, f"{path}.{key}[{i}]") for i, v in enumerate(node[key])]
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), Mapping):
            node[key] = child(node[key], f"{path}.{key}")


def admits_null(schema: Any) -> bool:
    """Whether a value of `schema` may be `null` (an untyped schema admits anything)."""
    return _admits_null(schema)


def _admits_null(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return schema is True
    if not any(key in schema for key in _TYPED):
        return True  # untyped: anything, null included
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind) or schema.get("nullable"):
        return True
    if "enum" in schema and None in schema["enum"]:
        return True
    options = schema.get("anyOf") or schema.get("oneOf")
    return isinstance(options, list) and any(_admits_null(option) for option in options)


# -- openai strict -------------------------------------------------------------------


def _strict(schema: Mapping[str, Any], path: str) -> dict[str, Any]:
    node = _merge_all_of(copy.deepcopy(dict(schema)))
    for key in _METADATA:
        node.pop(key, None)
    if "default" in node:
        _note(node, f"default: {json.dumps(node.pop('default'))}")
    for key in _STRICT_UNSUPPORTED:
        if key in node:
            _note(node, f"{key}: {json.dumps(node.pop(key))}")
    if "format" in node and node["format"] not in _STRICT_FORMATS:
        _note(node, f"format: {node.pop('format')}")
    if "oneOf" in node:
        node["anyOf"] = [*node.get("anyOf", []), *node.pop("oneOf")]
    if not any(key in node for key in _TYPED):
        raise SchemaError(f"{path}: an untyped value cannot be expressed in OpenAI strict mode")
    _walk_children(node, _strict, path)
    kind = node.get("type")
    kinds: list[Any] = kind if isinstance(kind, list) else [kind]
    if "object" in kinds or "properties" in node:
        extra = node.get("additionalProperties")
        if extra not in (None, False):
            raise SchemaError(
                f"{path}: a free-form object (additionalProperties) cannot be expressed in "
                "OpenAI strict mode"
            )
        properties: dict[str, Any] = node.setdefault("properties", {})
        required = set(node.get("required", []))
        for name, sub in properties.items():
            if name not in required:
                properties[name] = _nullable(sub)
        node["required"] = list(properties)
        node["additionalProperties"] = False
    if "array" in kinds:
        items = node.get("items")
        typed = isinstance(items, Mapping) and any(key in items for key in _TYPED)
        if not typed and not node.get("prefixItems"):
            raise SchemaError(f"{path}: an array of untyped items cannot be strict")
    return node


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` widened to admit `null`, for a property that was optional."""
    if _admits_null(schema):
        return schema
    node = dict(schema)
    if "anyOf" in node:
        node["anyOf"] = [*node["anyOf"], {"type": "null"}]
        return node
    if "const" in node:
        return {"anyOf": [{"const": node.pop("const")}, {"type": "null"}], **node}
    kind = node.get("type")
    if kind is not None:
        node["type"] = [*kind, "null"] if isinstance(kind, list) else [kind, "null"]
    if "enum" in node:
        node["enum"] = [*node["enum"], None]
    return node


# -- gemini --------------------------------------------------------------------------


def _gemini(schema: Mapping[str, Any], path: str = "(root)") -> dict[str, Any]:
    node = _merge_all_of(copy.deepcopy(dict(schema)))
    if "oneOf" in node:
        node["anyOf"] = [*node.get("anyOf", []), *node.pop("oneOf")]
    if "const" in node:
        const = node.pop("const")
        if isinstance(const, str):
            node["enum"] = [const]
            node.setdefault("type", "string")
        else:
            _note(node, f"always {json.dumps(const)}")
    kind = node.get("type")
    if isinstance(kind, list):
        real = [k for k in kind if k != "null"]
        if "null" in kind:
            node["nullable"] = True
        if len(real) == 1:
            node["type"] = real[0]
        else:
            del node["type"]
            node["anyOf"] = [*node.get("anyOf", []), *({"type": k} for k in real)]
    options = node.get("anyOf")
    if isinstance(options, list) and any(_is_null(option) for option in options):
        node["nullable"] = True
        options = [option for option in options if not _is_null(option)]
        node["anyOf"] = options
        if len(options) == 1 and isinstance(options[0], Mapping):
            del node["anyOf"]
            node = {**options[0], **node}
    enum = node.get("enum")
    if isinstance(enum, list) and not all(isinstance(value, str) for value in enum):
        _note(node, "one of: " + ", ".join(json.dumps(v) for v in node.pop("enum")))
    fmt = node.get("format")
    if fmt is not None:
        allowed = _GEMINI_STRING_FORMATS if node.get("type") == "string" else _GEMINI_NUMBER_FORMATS
        if fmt not in allowed:
            _note(node, f"format: {node.pop('format')}")
    for key in ("exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems"):
        if key in node:
            _note(node, f"{key}: {json.dumps(node.pop(key))}")
    for key in list(node):
        if key not in _GEMINI_FIELDS:
            del node[key]
    _walk_children(node, _gemini, path)
    return node


def _is_null(schema: Any) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "null" and len(schema) == 1


# -- the inverse of strict: null meant "absent" --------------------------------------


def _drop_nulls(value: Any, schema: Any) -> Any:
    if not isinstance(schema, Mapping):
        return value
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and isinstance(value, dict | list):
        # The branch that describes this kind of value (an object, an array), if any.
        wanted = "properties" if isinstance(value, dict) else "items"
        branch = next((o for o in options if isinstance(o, Mapping) and wanted in o), None)
        return value if branch is None else _drop_nulls(value, branch)
    if isinstance(value, dict):
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return value
        required = set(schema.get("required", []))
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key)
            if item is None and sub is not None and key not in required and not _admits_null(sub):
                continue
            out[key] = _drop_nulls(item, sub)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_drop_nulls(item, schema["items"]) for item in value]
    return value
