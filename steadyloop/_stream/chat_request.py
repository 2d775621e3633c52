"""The Chat Completions request: the `/chat/completions` body and headers of one turn.

Moved here unchanged from the model activity so the chat wire (`steadyloop._stream.wire`)
can wrap it without the activity's imports; `steadyloop._activities.model_stream` still
exports both names.

What the obvious body gets wrong, and what prevents each:

- `tool_choice` and `parallel_tool_calls` without `tools` are refused by OpenAI: both
  are sent only when tools are offered.
- An endpoint default in `extra_body` must not replace what the run asked for: the
  endpoint's fields come first, the run's overwrite them.
- A parameter the endpoint is known to refuse (`omit_parameters`, learned by the
  route) is left out wherever it came from, `extra_body` included.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._stream.completion import CompletionRequest

__all__ = ["USER_AGENT", "build_headers", "build_request_body"]


def _user_agent() -> str:
    try:
        return f"steadyloop/{importlib.metadata.version('steadyloop')}"
    except importlib.metadata.PackageNotFoundError:
        return "steadyloop"


USER_AGENT = _user_agent()


def build_request_body(request: CompletionRequest, endpoint: EndpointConfig) -> dict[str, Any]:
    """The `/chat/completions` body: streaming on, optional fields only when set.

    `tools`, `tool_choice` and `parallel_tool_calls` are sent only when tools are
    offered: OpenAI rejects the latter two without tools. The endpoint's `extra_body`
    comes first, so a field the request sets wins over the endpoint's default for it;
    a parameter the endpoint is known to refuse is left out wherever it came from.
    """
    body: dict[str, Any] = {
        **endpoint.extra_body,
        "model": request.model,
        "messages": [message.to_wire() for message in request.messages],
        "stream": True,
    }
    if endpoint.include_usage:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = [tool.to_wire() for tool in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.response_format is not None:
        body["response_format"] = request.response_format
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.max_tokens is not None:
        body[endpoint.max_tokens_field] = request.max_tokens
    if request.seed is not None:
        body["seed"] = request.seed
    if request.stop:
        body["stop"] = request.stop
    if request.reasoning_effort is not None:
        body["reasoning_effort"] = request.reasoning_effort
    for parameter in request.omit_parameters:  # what this endpoint is known to refuse
        body.pop(parameter, None)
    return body


def build_headers(endpoint: EndpointConfig, api_key: str | None) -> dict[str, str]:
    """Streaming headers, the endpoint's own, and the key as a bearer token."""
    headers = {
        "Accept": "text/event-stream",
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        **endpoint.headers,
    }
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers
