"""The one base of every exception steadyloop raises, and the `ApplicationError` types.

`except SteadyloopError` catches whatever the library raises on purpose; anything else
that escapes is a bug (or a library steadyloop calls). A class that a caller also meets
as a built-in kind keeps that base too: a bad value is still a `ValueError` (pydantic
turns a `ValueError` raised in a validator into a validation error, and callers that
validate input catch it), a missing name still a `LookupError`, a test kit's failure
still an `AssertionError` (pytest reports it as a failed assertion, not a crash).

    SteadyloopError
    ├── ClientError                      steadyloop.client: what a thread or run refused
    │   ├── ThreadBusy                   a run of the thread is in flight
    │   ├── ThreadCannotContinue         the last run cannot be inherited safely
    │   ├── RunEnded                     the run reads no more messages or decisions
    │   ├── NotTheCallReviewed           another call waits under that id
    │   ├── NoWorkerAnswered             no worker took the request (it waits)
    │   ├── RequestRefused               the run refused, for the reason it gave
    │   ├── RunFailed                    the run's workflow did not complete
    │   ├── RunNotFound                  no run has that workflow id
    │   ├── StopUnread                   a completed run's stop could not be read in time
    │   ├── TemporalLost                 Temporal stopped answering a follower for too long
    │   └── ToolsNotServed               the run names tools its worker does not serve
    ├── CursorExpired                    steadyloop.events: the events after it are gone
    ├── InvalidCursor (ValueError)       a cursor this library did not write
    ├── BackendError                     steadyloop._web: a refusal an HTTP route answers
    │   ├── ThreadNotFound               404 thread_not_found
    │   ├── UnknownRun                   404 run_not_found
    │   ├── UnknownCall                  404 call_not_found
    │   ├── RunInFlight                  409 run_in_flight
    │   ├── NotTheCall                   409 not_the_call
    │   ├── RunClosed                    409 run_ended
    │   ├── CursorTooOld                 410 cursor_expired
    │   ├── BadCursor                    400 bad_cursor
    │   ├── BadName                      400 refused
    │   ├── TooManyRuns                  429 too_many_runs
    │   ├── NoWorkerToRead               503 no_worker
    │   └── WaitingForWorker             202 waiting_for_worker
    ├── ApiError                         steadyloop._web: a refusal with its status and code
    ├── FellBehind                       steadyloop._web: a follower too slow for its fan-out
    ├── ConfigError                      steadyloop._worker: the worker's configuration
    │   ├── KeyPrefixError               a receipt key prefix the CLI cannot use
    │   └── ConverterRefused             steadyloop.plugin: a converter a run cannot use
    ├── TemporalUnreachable              no Temporal server at the address
    ├── DevServerError                   the embedded dev server did not start
    ├── TemporalBinaryMissing (RuntimeError)
    ├── TelemetryUnavailable (RuntimeError)
    ├── RunCommandFailure                `steadyloop run` could not run or follow
    ├── EndpointConfigError (ValueError) steadyloop._routing: an unusable endpoint
    ├── UnknownEndpointError (LookupError)
    ├── MissingApiKeyError (LookupError)
    ├── UnsupportedWireError (LookupError)
    ├── StreamFailed                     steadyloop._routing: a model attempt's failure
    ├── ToolDefinitionError (ValueError) steadyloop.tools: a tool that cannot be offered
    ├── SchemaError (ValueError)
    ├── DuplicateToolError (ValueError)
    ├── UnknownToolError (LookupError)
    ├── ToolWithoutDescription (UserWarning) a tool the model would see undescribed
    ├── PluginError (ValueError)
    ├── ProgressTooLarge (ValueError)
    ├── SandboxEscape (PermissionError)  a path outside an example tool's sandbox
    ├── McpConfigError (ValueError)      steadyloop._mcp
    ├── McpServerError
    ├── McpToolError
    ├── CanonicalJsonError (ValueError)  steadyloop._receipts: a value with no canonical JSON
    ├── NaiveDatetimeError (ValueError)
    ├── NothingToResume (ValueError)     steadyloop._run
    ├── UnquotableValue (ValueError)     steadyloop._chains
    ├── ObjectStoreError                 steadyloop._history: the blob store
    │   └── ObjectStoreUnavailable
    ├── Stop                             steadyloop._workflows: ends a run at a turn boundary
    ├── AgentStopped (ApplicationError)  steadyloop.workflow: an agent run without an answer
    ├── AgentDefinitionError (ValueError) an agent the loop could not run
    ├── NothingWaits (AssertionError)    steadyloop.testing: the run ended first
    ├── ScriptExhausted (AssertionError) a request nobody scripted
    └── UnknownToolWarning (UserWarning) a scripted call of a tool the run lacks

The loop's `Stop` never leaves the workflow (the run returns its stop reason), and
private control flow (`steadyloop._stream.arguments._Refused`) subclasses the base
too, so nothing the library raises falls outside the family.

Workflow and activity code fails with Temporal's `ApplicationError` instead, whose
`type` is a string that crosses the server: the constants below are every such type
steadyloop writes, so a raising site and a handling site (a `.type ==` check, a test,
a user's dashboard) read the same name. A model attempt's classified failures are typed
by their kind (`steadyloop._routing.taxonomy.FailureKind`), which lives with that model.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "AGENT_INPUT_REFUSED",
    "AGENT_STOPPED",
    "CHILD_RUN_FAILED",
    "CONFIGURATION_ERROR_TYPES",
    "MISSING_API_KEY",
    "OUTPUT_ALREADY_FORWARDED",
    "OUTPUT_HOST_UNAVAILABLE",
    "PAYLOAD_BLOB_CORRUPT",
    "PAYLOAD_BLOB_MISSING",
    "PAYLOAD_STORE_ERROR",
    "PAYLOAD_STORE_UNAVAILABLE",
    "PAYLOAD_TOO_LARGE",
    "RECEIPT_CLAIM",
    "RECEIPT_RESOLUTION",
    "RESERVED_TOOL_NAME",
    "SAMPLING_OUT_OF_RANGE",
    "UNKNOWN_ENDPOINT",
    "UNKNOWN_PLUGINS",
    "UNKNOWN_TOOLS",
    "UNSUPPORTED_WIRE",
    "UNUSABLE_WORKFLOW_ID",
    "SteadyloopError",
]


class SteadyloopError(Exception):
    """Base of every exception steadyloop raises on purpose (the tree is drawn above)."""


# -- the workflow refuses (the run, or the update, fails and names the cause) ------------

# A payload (an activity's input or result, the carried state) over Temporal's limit.
PAYLOAD_TOO_LARGE: Final = "PayloadTooLarge"
# The receipt ledger refused a claim that cannot be refused inside one workflow: said
# rather than guessed around.
RECEIPT_CLAIM: Final = "ReceiptClaim"
# A person's resolution of an ambiguous receipt that the ledger did not apply (the
# update is rejected; the run goes on).
RECEIPT_RESOLUTION: Final = "ReceiptResolution"
# A delegating run's workflow id that Temporal visibility cannot quote (quotes,
# backslashes, control characters), so its chain could not be counted.
UNUSABLE_WORKFLOW_ID: Final = "UnusableWorkflowId"
# A tool named like one steadyloop offers itself (the delegation tool).
RESERVED_TOOL_NAME: Final = "ReservedToolName"
# A run that names tools or plugins no worker of its task queue registered.
UNKNOWN_TOOLS: Final = "UnknownTools"
UNKNOWN_PLUGINS: Final = "UnknownPlugins"
# A child run the chain's measurement awaited ended without a result.
CHILD_RUN_FAILED: Final = "ChildRunFailed"
# An agent a user's workflow ran (`steadyloop.workflow.Agent.run`) stopped without a
# final answer: the calling workflow fails with it unless it catches `AgentStopped`.
AGENT_STOPPED: Final = "AgentStopped"
# An agent's run could not be started from what the workflow gave it (its prompt): the
# calling workflow fails with it, naming the problem.
AGENT_INPUT_REFUSED: Final = "AgentInputRefused"

# -- the payload codec's blob store (unavailable and error are retried: configuration or
# the store coming back fixes them; a missing or altered blob is not) --------------------

PAYLOAD_STORE_UNAVAILABLE: Final = "PayloadStoreUnavailable"
PAYLOAD_STORE_ERROR: Final = "PayloadStoreError"
PAYLOAD_BLOB_MISSING: Final = "PayloadBlobMissing"
PAYLOAD_BLOB_CORRUPT: Final = "PayloadBlobCorrupt"

# -- the model activity ----------------------------------------------------------------

# Configuration problems of the worker, found before any request is sent: the route
# traverses to a candidate another worker's configuration may serve.
UNKNOWN_ENDPOINT: Final = "unknown_endpoint"
MISSING_API_KEY: Final = "missing_api_key"
# The endpoint's `api` names a wire this version does not speak.
UNSUPPORTED_WIRE: Final = "unsupported_wire"
# Sampling knobs the endpoint's wire refuses (`steadyloop._run.bounds.SAMPLING_RANGES`).
SAMPLING_OUT_OF_RANGE: Final = "sampling_out_of_range"
CONFIGURATION_ERROR_TYPES: Final = frozenset(
    {UNKNOWN_ENDPOINT, MISSING_API_KEY, UNSUPPORTED_WIRE, SAMPLING_OUT_OF_RANGE}
)
# An attempt refused because an earlier attempt of the same turn already forwarded
# output (found on the run's output host before streaming again).
OUTPUT_ALREADY_FORWARDED: Final = "output_already_forwarded"
# The run's output host could not be asked whether output was already forwarded.
OUTPUT_HOST_UNAVAILABLE: Final = "output_host_unavailable"
