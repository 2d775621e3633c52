"""The run's vocabulary: what a user starts a run with, says to it, and gets back.

`models` holds `RunInput` and `RunResult` and the stop reasons; `steering` what people say
to a running run (messages, interrupts, approval decisions); `resume` how a stopped run is
resumed as a new run; `bounds` what a caller may put in a run's configuration (durations,
counts, identities), checked before it reaches workflow code. What a run did as it
went (replays and why, retries, stalls, healing) is its event log (`steadyloop.events`).

Guarantees: every value here is a payload that crosses Temporal's data converter and is
refused with a reason that names it when out of bounds. Pure: nothing in this package
imports temporalio.
"""
