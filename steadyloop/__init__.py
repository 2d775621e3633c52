"""steadyloop: an LLM agent's tool loop as a Temporal workflow.

What a user builds and catches is exported here: a run's input and the options it is
made of (`RunInput`, `RunOptions`, `RunLimits`, `RouteConfig`, `Delegation`, ...), the
messages of a transcript, the client entry points (`connect`, `Thread`, `RunHandle`)
and the errors they raise.

The public modules, each with its own `__all__`:

- `steadyloop`: this page.
- `steadyloop.client`: start, follow and steer runs from your own code.
- `steadyloop.events`: the typed items of a run's event log, and its cursors.
- `steadyloop.tools`: define tools (`@tool`, `ToolRegistry`, `ToolPlugin`).
- `steadyloop.testing`: run your agent against a scripted model, without a cluster.
- `steadyloop.telemetry`: install OpenTelemetry in your own worker.
- `steadyloop.delegation`: the agents a run may delegate to, and the chain limits.
- `steadyloop.plugin`: `SteadyloopPlugin`, steadyloop on your own Temporal client and
  worker.
- `steadyloop.workflow`: `Agent`, run an agent from your own workflow as a child run.
- `steadyloop.errors`: every exception steadyloop raises is a `SteadyloopError`; the
  module draws the family and names the `ApplicationError` types a run fails with.

Every other module is private (its path has a leading underscore: `steadyloop._stream`,
`steadyloop._workflows`, `steadyloop.tools._registry`, ...): it can change in any
release without notice.
"""

from temporalio import workflow

# Temporal's sandbox re-imports every module a workflow file reaches, including this
# package's __init__. Re-imported here, these payload classes would be copies, and
# pydantic would refuse a `ToolSpec` built from the real module inside a sandboxed
# `CompletionRequest`. They are pure (no I/O, no state), so every workflow run can
# share the real modules: pass them through.
with workflow.unsafe.imports_passed_through():
    from steadyloop._chat import ChatMessage, FunctionCall, ToolCall
    from steadyloop._history.compaction import CompactionPolicy
    from steadyloop._output.forwarding import ForwardingOptions
    from steadyloop._output.typed import OutputType
    from steadyloop._routing.pricing import Price
    from steadyloop._routing.route_plan import Backoff, RouteCandidate, RouteConfig
    from steadyloop._run.models import (
        AgentProfile,
        ContinuationOptions,
        Delegation,
        RunInput,
        RunLimits,
        RunPlugins,
        RunResult,
        Sampling,
    )
    from steadyloop._run.resume import NothingToResume, resume_input
    from steadyloop.client import (
        ClientError,
        ConfigError,
        CursorExpired,
        InvalidCursor,
        NotTheCallReviewed,
        NoWorkerAnswered,
        RequestRefused,
        RunEnded,
        RunEventItem,
        RunFailed,
        RunHandle,
        RunNotFound,
        RunOptions,
        RunSnapshot,
        SteadyloopClient,
        StopUnread,
        TemporalUnreachable,
        Thread,
        ThreadBusy,
        ThreadCannotContinue,
        connect,
    )
    from steadyloop.errors import SteadyloopError

__all__ = [
    "AgentProfile",
    "Backoff",
    "ChatMessage",
    "ClientError",
    "CompactionPolicy",
    "ConfigError",
    "ContinuationOptions",
    "CursorExpired",
    "Delegation",
    "ForwardingOptions",
    "FunctionCall",
    "InvalidCursor",
    "NoWorkerAnswered",
    "NotTheCallReviewed",
    "NothingToResume",
    "OutputType",
    "Price",
    "RequestRefused",
    "RouteCandidate",
    "RouteConfig",
    "RunEnded",
    "RunEventItem",
    "RunFailed",
    "RunHandle",
    "RunInput",
    "RunLimits",
    "RunNotFound",
    "RunOptions",
    "RunPlugins",
    "RunResult",
    "RunSnapshot",
    "Sampling",
    "SteadyloopClient",
    "SteadyloopError",
    "StopUnread",
    "TemporalUnreachable",
    "Thread",
    "ThreadBusy",
    "ThreadCannotContinue",
    "ToolCall",
    "connect",
    "resume_input",
]
