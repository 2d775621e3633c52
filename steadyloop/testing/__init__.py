"""Test doubles for steadyloop: a scripted OpenAI-compatible server and chunk builders.

Shipped in the package (not under `tests/`) because the no-API-key demo uses the same
server as its provider, and because users testing their own tools and workflows need a
provider that is deterministic and needs no key.
"""

from steadyloop.testing.chunks import (
    ScriptedCall,
    chunk,
    error_object,
    finish_chunk,
    reasoning_chunks,
    role_chunk,
    text_chunks,
    tool_call_chunks,
    tool_call_delta,
    tool_calls_chunk,
    usage_chunk,
)
from steadyloop.testing.scripted_server import (
    Exchange,
    Pause,
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    disconnect,
    error_response,
    json_response,
    raw_response,
    refused_base_url,
    sse_event,
    sse_response,
    unsupported_parameter_response,
)

__all__ = [
    "Exchange",
    "Pause",
    "RecordedRequest",
    "ScriptedCall",
    "ScriptedResponse",
    "ScriptedServer",
    "chunk",
    "disconnect",
    "error_object",
    "error_response",
    "finish_chunk",
    "json_response",
    "raw_response",
    "reasoning_chunks",
    "refused_base_url",
    "role_chunk",
    "sse_event",
    "sse_response",
    "text_chunks",
    "tool_call_chunks",
    "tool_call_delta",
    "tool_calls_chunk",
    "unsupported_parameter_response",
    "usage_chunk",
]
