"""The `/docs` page: the OpenAPI spec as one self-contained HTML table.

FastAPI's own docs page loads Swagger UI from a CDN, which a server on a closed network
(or this project's offline CI) cannot reach; this page needs nothing but the spec.
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["openapi_page"]


def openapi_page(spec: dict[str, Any]) -> str:
    rows = []
    for path, operations in spec.get("paths", {}).items():
        for method, operation in operations.items():
            answers = ", ".join(
                f"{code} {answer.get('description', '')}"
                for code, answer in operation.get("responses", {}).items()
            )
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            schema = json.dumps(body["schema"], indent=1) if body else ""
            rows.append(
                "<tr>"
                f"<td><code>{html.escape(method.upper())}</code></td>"
                f"<td><code>{html.escape(path)}</code></td>"
                f"<td>{html.escape(operation.get('summary', ''))}<br>"
                f"<small>{html.escape(operation.get('description', ''))}</small></td>"
                f"<td><pre>{html.escape(schema)}</pre></td>"
                f"<td>{html.escape(answers)}</td>"
                "</tr>"
            )
    title = html.escape(spec.get("info", {}).get("title", "API"))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title} API</title>"
        "<style>body{font-family:sans-serif;margin:2em}td{vertical-align:top;"
        "border-top:1px solid #ccc;padding:.4em}pre{margin:0;font-size:.8em}</style>"
        f"</head><body><h1>{title} API</h1><p>The machine-readable spec: "
        "<a href='/openapi.json'>/openapi.json</a>. Every route but this page, the spec "
        "and <code>/healthz</code> needs <code>Authorization: Bearer TOKEN</code>.</p>"
        "<table><tr><th>method</th><th>path</th><th>what</th><th>body</th>"
        f"<th>answers</th></tr>{''.join(rows)}</table></body></html>"
    )
