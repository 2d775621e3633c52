"""steadyloop: an LLM agent's tool loop as a Temporal workflow.

The pure primitives are importable from here without a Temporal server: streamed
tool-call assembly, the tool-call argument reader, completion-defect detection,
canonical JSON, receipt decisions and the receipt ledger, and routing: the failure
taxonomy, `plan_route`, `failure_disposition` and the circuit breaker.
Workflows live under `steadyloop.workflows` (deterministic), activities under
`steadyloop.activities` (all I/O).
"""

from temporalio import workflow

# Temporal's sandbox re-imports every module a workflow file reaches, including this
# package's __init__. Re-imported here, these payload classes would be copies, and
# pydantic would refuse a `ToolSpec` built from the real module inside a sandboxed
# `CompletionRequest`. They are pure (no I/O, no state), so every workflow run can
# share the real modules: pass them through.
with workflow.unsafe.imports_passed_through():
    from steadyloop.accumulator import AssemblyDefect, ToolCallAccumulator
    from steadyloop.arguments import (
        ArgumentsReading,
        ParsedArguments,
        UnparseableArguments,
        UnsupportedToolCallType,
        parse_tool_call_arguments,
        tool_call_arguments_absent,
    )
    from steadyloop.canonical_json import CanonicalJsonError, canonical_json
    from steadyloop.chat import ChatMessage, FunctionCall, ToolCall, ToolSpec
    from steadyloop.circuit_breaker import BreakerPolicy, BreakerState
    from steadyloop.completion import AssembledTurn, CompletionRequest, StreamStats, Usage
    from steadyloop.defects import (
        DEFECT_RETRY_BUDGETS,
        CompletionDefect,
        detect_completion_defect,
        detect_completion_defects,
    )
    from steadyloop.endpoint_health import EndpointHealth
    from steadyloop.failure_disposition import AttemptContext, Disposition, failure_disposition
    from steadyloop.failure_taxonomy import FailureFacts, facts_from_stream_failure
    from steadyloop.receipt_decision import (
        Ambiguous,
        Effect,
        Execute,
        NaiveDatetimeError,
        Receipt,
        ReceiptDecision,
        ReceiptKey,
        Replay,
        Wait,
        decide_tool_call_receipt,
        receipt_key,
        tool_call_args_hash,
    )
    from steadyloop.receipt_ledger import (
        AmbiguityResolution,
        DidNotHappen,
        GiveUp,
        Happened,
        LedgerWrite,
        ReceiptLedger,
        WriteApplied,
        WriteIgnored,
    )
    from steadyloop.route_plan import (
        Backoff,
        RouteCandidate,
        RouteConfig,
        RoutePlan,
        RouteRequest,
        plan_route,
    )
    from steadyloop.stream_failures import StreamFailed, StreamFailure

__all__ = [
    "DEFECT_RETRY_BUDGETS",
    "AmbiguityResolution",
    "Ambiguous",
    "ArgumentsReading",
    "AssembledTurn",
    "AssemblyDefect",
    "AttemptContext",
    "Backoff",
    "BreakerPolicy",
    "BreakerState",
    "CanonicalJsonError",
    "ChatMessage",
    "CompletionDefect",
    "CompletionRequest",
    "DidNotHappen",
    "Disposition",
    "Effect",
    "EndpointHealth",
    "Execute",
    "FailureFacts",
    "FunctionCall",
    "GiveUp",
    "Happened",
    "LedgerWrite",
    "NaiveDatetimeError",
    "ParsedArguments",
    "Receipt",
    "ReceiptDecision",
    "ReceiptKey",
    "ReceiptLedger",
    "Replay",
    "RouteCandidate",
    "RouteConfig",
    "RoutePlan",
    "RouteRequest",
    "StreamFailed",
    "StreamFailure",
    "StreamStats",
    "ToolCall",
    "ToolCallAccumulator",
    "ToolSpec",
    "UnparseableArguments",
    "UnsupportedToolCallType",
    "Usage",
    "Wait",
    "WriteApplied",
    "WriteIgnored",
    "canonical_json",
    "decide_tool_call_receipt",
    "detect_completion_defect",
    "detect_completion_defects",
    "facts_from_stream_failure",
    "failure_disposition",
    "parse_tool_call_arguments",
    "plan_route",
    "receipt_key",
    "tool_call_args_hash",
    "tool_call_arguments_absent",
]
