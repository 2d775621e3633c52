"""The `steadyloop` command line: a client of the worker, never the worker itself.

`main` parses the commands and `arguments` checks their values before anything starts;
`run_ids` refuses a reused `--id`, and `invocation` spells printed next steps as the
user typed the command. `run`'s live view and `show` are `follow` (the run's event log,
read through `steadyloop.client`) printed by `progress`; people in the loop use
`steering` (send, interrupt, approve) and `receipts` (list and resolve ambiguous calls),
through the client's typed steering (`live_run`); `blobs` collects the blob store
(`blobs gc`); `demo` and `demo_conversation` are the keyless demo (`demo_web` serves it
on the web page), and `demo_tour` (with its scripted provider `demo_tour_conversation`
and tools `demo_tour_tools`) the keyless tour of approvals, interrupts and ambiguous
calls; `failure_text` says why a run or a command failed in one line; `wire_bounds`
holds `run`'s sampling flags to each endpoint's wire before it starts. The worker process
that `steadyloop worker` starts lives in `steadyloop.worker`.

Guarantees: bad flags and values get one line that names them; no secret is printed.
"""
