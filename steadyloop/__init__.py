"""steadyloop: an LLM agent's tool loop as a Temporal workflow.

The pure primitives are importable from here without a Temporal server: streamed
tool-call assembly, the tool-call argument reader, completion-defect detection,
canonical JSON, receipt decisions, the receipt ledger, transcript healing and tool-schema
sanitizing, chain rules for child runs (`admit_child_run`) and lineage (`descend_chain`),
and routing: the failure taxonomy, `plan_route`, `failure_disposition` and the circuit
breaker.
Workflows live under `steadyloop.workflows` (deterministic), activities under
`steadyloop.activities` (all I/O).

The client API starts, follows and steers runs from your own code (`steadyloop.client`):
`connect`, `Thread`, `RunHandle`, `RunOptions` and its typed errors. Every exception
steadyloop raises is a `SteadyloopError` (`steadyloop.errors` draws the family).
"""

from temporalio import workflow

# Temporal's sandbox re-imports every module a workflow file reaches, including this
# package's __init__. Re-imported here, these payload classes would be copies, and
# pydantic would refuse a `ToolSpec` built from the real module inside a sandboxed
# `CompletionRequest`. They are pure (no I/O, no state), so every workflow run can
# share the real modules: pass them through.
with workflow.unsafe.imports_passed_through():
    from steadyloop.chains.limits import (
        ChainBudgetLimit,
        ChainLimit,
        DepthLimit,
        PairCooldownLimit,
        PairSeenLimit,
        TenantCeilingLimit,
        TenantRateLimit,
    )
    from steadyloop.chains.lineage import Lineage, descend_chain
    from steadyloop.chains.rules import (
        Admitted,
        ChainBudgetRule,
        ChainRule,
        DepthRule,
        PairCooldownRule,
        PairSeenRule,
        Refused,
        TenantCeilingRule,
        TenantRateRule,
        admit_child_run,
    )
    from steadyloop.chat import ChatMessage, FunctionCall, ToolCall, ToolSpec
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
    from steadyloop.history.healing import (
        Healing,
        TranscriptProfile,
        TranscriptRules,
        validate_and_heal,
    )
    from steadyloop.receipts.canonical_json import CanonicalJsonError, canonical_json
    from steadyloop.receipts.decision import (
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
    from steadyloop.receipts.ledger import (
        AmbiguityResolution,
        DidNotHappen,
        GiveUp,
        Happened,
        LedgerWrite,
        ReceiptLedger,
        WriteApplied,
        WriteIgnored,
    )
    from steadyloop.routing.circuit_breaker import BreakerPolicy, BreakerState
    from steadyloop.routing.disposition import AttemptContext, Disposition, failure_disposition
    from steadyloop.routing.endpoint_health import EndpointHealth
    from steadyloop.routing.route_plan import (
        Backoff,
        RouteCandidate,
        RouteConfig,
        RoutePlan,
        RouteRequest,
        plan_route,
    )
    from steadyloop.routing.taxonomy import StreamFailed, StreamFailure
    from steadyloop.run.models import AgentProfile, Delegation
    from steadyloop.stream.accumulator import AssemblyDefect, ToolCallAccumulator
    from steadyloop.stream.arguments import (
        ArgumentsReading,
        ParsedArguments,
        UnparseableArguments,
        UnsupportedToolCallType,
        parse_tool_call_arguments,
        tool_call_arguments_absent,
    )
    from steadyloop.stream.completion import AssembledTurn, CompletionRequest, StreamStats, Usage
    from steadyloop.stream.defects import (
        DEFECT_RETRY_BUDGETS,
        CompletionDefect,
        detect_completion_defect,
        detect_completion_defects,
    )
    from steadyloop.tools.schema_profiles import SchemaProfile, sanitize_tool_schema

__all__ = [
    "DEFECT_RETRY_BUDGETS",
    "Admitted",
    "AgentProfile",
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
    "ChainBudgetLimit",
    "ChainBudgetRule",
    "ChainLimit",
    "ChainRule",
    "ChatMessage",
    "ClientError",
    "CompletionDefect",
    "CompletionRequest",
    "ConfigError",
    "CursorExpired",
    "Delegation",
    "DepthLimit",
    "DepthRule",
    "DidNotHappen",
    "Disposition",
    "Effect",
    "EndpointHealth",
    "Execute",
    "FunctionCall",
    "GiveUp",
    "Happened",
    "Healing",
    "InvalidCursor",
    "LedgerWrite",
    "Lineage",
    "NaiveDatetimeError",
    "NoWorkerAnswered",
    "NotTheCallReviewed",
    "PairCooldownLimit",
    "PairCooldownRule",
    "PairSeenLimit",
    "PairSeenRule",
    "ParsedArguments",
    "Receipt",
    "ReceiptDecision",
    "ReceiptKey",
    "ReceiptLedger",
    "Refused",
    "Replay",
    "RequestRefused",
    "RouteCandidate",
    "RouteConfig",
    "RoutePlan",
    "RouteRequest",
    "RunEnded",
    "RunEventItem",
    "RunFailed",
    "RunHandle",
    "RunNotFound",
    "RunOptions",
    "RunSnapshot",
    "SchemaProfile",
    "SteadyloopClient",
    "SteadyloopError",
    "StopUnread",
    "StreamFailed",
    "StreamFailure",
    "StreamStats",
    "TemporalUnreachable",
    "TenantCeilingLimit",
    "TenantCeilingRule",
    "TenantRateLimit",
    "TenantRateRule",
    "Thread",
    "ThreadBusy",
    "ThreadCannotContinue",
    "ToolCall",
    "ToolCallAccumulator",
    "ToolSpec",
    "TranscriptProfile",
    "TranscriptRules",
    "UnparseableArguments",
    "UnsupportedToolCallType",
    "Usage",
    "Wait",
    "WriteApplied",
    "WriteIgnored",
    "admit_child_run",
    "canonical_json",
    "connect",
    "decide_tool_call_receipt",
    "descend_chain",
    "detect_completion_defect",
    "detect_completion_defects",
    "failure_disposition",
    "parse_tool_call_arguments",
    "plan_route",
    "receipt_key",
    "sanitize_tool_schema",
    "tool_call_args_hash",
    "tool_call_arguments_absent",
    "validate_and_heal",
]
