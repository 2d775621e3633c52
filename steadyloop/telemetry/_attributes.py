"""Span and metric names steadyloop emits, in one place so the emitting site and the tests
that read them cannot drift apart.

Model calls follow OpenTelemetry's GenAI semantic conventions (`gen_ai.*`); what those
conventions have no name for (the receipt decision, the route's decision, the turn) is
`steadyloop.*`. No name here carries content: prompts, tool arguments and results are
added only under the `capture_content` opt-in (`CONTENT_*`).
"""

from __future__ import annotations

# GenAI semantic conventions.
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"  # the older name of gen_ai.provider.name; both are set
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOKEN_TYPE = "gen_ai.token.type"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
ERROR_TYPE = "error.type"
# Opt-in content (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT / --otel-content).
CONTENT_INPUT = "gen_ai.input.messages"
CONTENT_OUTPUT = "gen_ai.output.messages"
CONTENT_TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
CONTENT_TOOL_RESULT = "gen_ai.tool.call.result"
# MCP semantic conventions, on the execute_tool span of a tool an MCP server serves.
MCP_METHOD = "mcp.method.name"

# steadyloop's own.
ENDPOINT = "steadyloop.endpoint"
TURN = "steadyloop.turn"
ATTEMPT_SEQUENCE = "steadyloop.attempt.sequence"
ATTEMPT_ON_CANDIDATE = "steadyloop.attempt.on_candidate"
ATTEMPT_OUTCOME = "steadyloop.attempt.outcome"
ROUTE_ACTION = "steadyloop.route.action"
ROUTE_RULE = "steadyloop.route.rule"
ROUTE_DELAY_S = "steadyloop.route.delay_s"
BREAKER_RECORDED = "steadyloop.route.breaker_recorded"
STALL_PHASE = "steadyloop.stall.phase"
TTFT_S = "steadyloop.time_to_first_token_s"
RECEIPT_DECISION = "steadyloop.receipt.decision"
RECEIPT_DECISIONS = "steadyloop.receipt.decisions"
# A tool attempt that ended with no outcome: an event on its `execute_tool` span.
TOOL_ATTEMPT_LOST_EVENT = "steadyloop.tool.attempt_lost"
TOOL_ATTEMPT = "steadyloop.tool.attempt"
TOOL_LOST_KIND = "steadyloop.tool.lost.kind"
TOOL_LOST_REASON = "steadyloop.tool.lost.reason"
TOOL_ATTEMPTS_LOST = "steadyloop.tool.attempts_lost"
TOOL_EFFECT = "steadyloop.tool.effect"
TOOL_STATUS = "steadyloop.tool.status"
MCP_SERVER = "steadyloop.mcp.server"  # the configured server's name: MCP's have none for it
WORKFLOW_ID = "steadyloop.workflow_id"
RUN_ID = "steadyloop.run_id"
PARENT_WORKFLOW_ID = "steadyloop.parent.workflow_id"
RUN_OUTCOME = "steadyloop.run.outcome"
COST_USD = "steadyloop.cost_usd"
RETRY_REASON = "steadyloop.retry.reason"

# Span names.
RUN_SPAN = "invoke_agent steadyloop"
TURN_SPAN = "steadyloop.turn"

# Metric instruments.
METRIC_TOKENS = "gen_ai.client.token.usage"
METRIC_DURATION = "gen_ai.client.operation.duration"
METRIC_TTFT = "steadyloop.model.time_to_first_token"
METRIC_STALLS = "steadyloop.model.stalls"
METRIC_RETRIES = "steadyloop.model.retries"
METRIC_COST = "steadyloop.model.cost"
METRIC_RECEIPTS = "steadyloop.tool.receipt_decisions"
METRIC_REPLAYS = "steadyloop.tool.replays"
METRIC_BREAKER_OPENINGS = "steadyloop.breaker.openings"
