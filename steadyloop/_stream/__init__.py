"""The stream: one streamed chat completion read into one turn, or a named failure.

Guarantees: SSE is decoded incrementally (`sse`); tool-call deltas are assembled by what
they say rather than by the `index` a gateway may reuse (`accumulator`, `turn_assembly`);
arguments are read into a value or a refusal that names the place, never an exception
(`arguments`); a finished stream that must not be dispatched as it is becomes a defect
(`defects`); arguments that grow without bound are cut (`runaway_guard`, under the limits
in `argument_limits`); a silent stream is a stall under a phase deadline (`watchdog`);
every failure is one value that crosses Temporal, made of the words and bounds in
`failures` (the model itself is routing's `StreamFailure`). `completion` holds the
payloads of one model turn. An endpoint's wire (`wire`: Chat Completions through
`chat_request` and `turn_assembly`; OpenAI Responses through `responses_request` and
`responses_assembly`; Anthropic Messages, `anthropic_wire`, through `anthropic_request`
and `anthropic_assembly`) builds the request and assembles the answer, and pass-back
items go back only to the endpoint that issued them (`passback`).
Text that may hold lone UTF-16 surrogates is made to encode by one rule (`surrogates`),
which redaction and tool results use too.

Not here: the HTTP request and the clock (`steadyloop._activities.model_stream`), or what a
failure leads to (`steadyloop._routing`). Pure: nothing in this package imports temporalio.
"""
