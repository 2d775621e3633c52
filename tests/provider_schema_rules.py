"""The tool-schema rules providers enforce, as checkers that list violations (empty: accepted).

Sources, quoted beside each check: OpenAI strict-mode 400s ("Invalid schema for function
'mysql_execute': In context=(), 'required' is required to be supplied and to be an array
including every key in properties. Missing 'params'.", kevinwatt/mysql-mcp#5;
"'additionalProperties' is required to be supplied and to be false",
spring-projects/spring-ai#6865; `default` refused, openai/openai-node#1988 and
dotnet/extensions#6266) and OpenAI's structured-outputs subset; Gemini 400s ('Invalid
JSON payload received. Unknown name "additionalProperties" ... Cannot find field.',
nanbingxyz/5ire#42; the same for "$schema" and "propertyNames", openswarm-ai/openswarm#24;
for "const", zed-industries/zed#44875; "Proto field is not repeating, cannot start list"
for a list-valued type, zed-industries/zed#53919) and Gemini's Schema object (a subset
of OpenAPI 3.0: Vertex AI REST reference, `Schema`); string formats on the Gemini
Developer API limited to 'enum' and 'date-time' (Firebase AI `SchemaShared.format`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

SchemaChecker = Callable[[dict[str, Any]], list[str]]

STRICT_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6"}
STRICT_FORMATS |= {"uuid"}
STRICT_REFUSED = {
    "default",
    "allOf",
    "oneOf",
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
    "$ref",
    "$defs",
}
GEMINI_FIELDS = {
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
TYPED = ("type", "anyOf", "enum", "const")


def nodes(schema: Any, path: str = "(root)") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema with its path (property names are not keywords)."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from nodes(sub, f"{path}.{name}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, sub in enumerate(schema.get(key) or []):
            yield from nodes(sub, f"{path}.{key}[{i}]")
    for key in ("items", "additionalProperties", "not"):
        yield from nodes(schema.get(key), f"{path}.{key}")


def openai_strict(schema: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    if schema.get("type") != "object":
        problems.append("the root is not an object")
    for path, node in nodes(schema):
        for key in STRICT_REFUSED & set(node):
            problems.append(f"{path}: '{key}' is not permitted")
        if "format" in node and node["format"] not in STRICT_FORMATS:
            problems.append(f"{path}: format {node['format']!r} is not supported")
        if not any(key in node for key in TYPED):
            problems.append(f"{path}: untyped schema")
        kind = node.get("type")
        kinds: list[Any] = kind if isinstance(kind, list) else [kind]
        if "object" in kinds:
            properties = list(node.get("properties", {}))
            missing = [p for p in properties if p not in node.get("required", [])]
            if "required" not in node or missing:
                problems.append(
                    f"{path}: 'required' is required to be supplied and to be an array "
                    f"including every key in properties. Missing {missing}"
                )
            if node.get("additionalProperties") is not False:
                problems.append(
                    f"{path}: 'additionalProperties' is required to be supplied and to be false"
                )
    return problems


def gemini(schema: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for path, node in nodes(schema):
        for key in set(node) - GEMINI_FIELDS:
            problems.append(f'{path}: Unknown name "{key}": Cannot find field.')
        if isinstance(node.get("type"), list):
            problems.append(f"{path}: type: Proto field is not repeating, cannot start list")
        if "enum" in node and not all(isinstance(v, str) for v in node["enum"]):
            problems.append(f"{path}: enum values must be strings")
        fmt = node.get("format")
        if node.get("type") == "string" and fmt is not None and fmt not in ("enum", "date-time"):
            problems.append(f"{path}: string format {fmt!r} refused by the Developer API")
    return problems


def portable(schema: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    if schema.get("type") != "object" or "properties" not in schema:
        problems.append("the root is not an object with properties")
    for path, node in nodes(schema):
        for key in {"$ref", "$defs", "definitions", "title", "discriminator"} & set(node):
            problems.append(f"{path}: {key!r} left in")
    return problems


CHECKERS: dict[str, SchemaChecker] = {
    "portable": portable,
    "openai": portable,
    "anthropic": portable,
    "mistral": portable,
    "openai_strict": lambda s: portable(s) + openai_strict(s),
    "gemini": lambda s: portable(s) + gemini(s),
}
