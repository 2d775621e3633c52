"""The `steadyloop` command line: a client of the worker, never the worker itself.

One module per command: `main` builds the parser (each command module registers its
own flags) and maps errors to exit codes; `worker_command` serves runs (the worker
process itself lives in `steadyloop._worker`); `run_command` starts a run, refusing with
`run_flags` what the flags alone decide before a worker is asked; `existing_runs` is
`show` and `resume`; `replay` checks a new version against the runs in flight;
`steering` (send, interrupt, approve) and `receipts` (list and resolve ambiguous calls)
steer a run through the client (`live_run`); `blobs` collects the blob store
(`blobs gc`); `demo_command` runs the keyless demos: `demo` and `demo_conversation`
(`demo_web` serves it on the web page), and `demo_tour` with its scripted provider
`demo_tour_conversation` and tools `demo_tour_tools`.

Shared by the commands: `arguments` checks values before anything starts; `run_ids`
refuses a reused `--id`; `invocation` spells printed next steps as the user typed the
command; `outcome` is the exit-code table and the follow-and-report a run's commands
end with, `follow` reading the run's event log through `steadyloop.client` and
`progress` printing it; `failure_text` says why a run or a command failed in one line;
`wire_bounds` holds `run`'s sampling flags to each endpoint's wire before it starts;
`core_logs` is the Temporal runtime of the commands' clients, which keeps the SDK core's
raw log lines off the terminal.

Guarantees: bad flags and values get one line that names them; no secret is printed.
"""
