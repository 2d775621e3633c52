"""The worker process and the `steadyloop` command line.

Everything that starts processes, binds ports or reads the worker's settings lives
here, apart from the library: `config` (flags, environment, config file), `process`
(the Temporal worker and its graceful shutdown), `dev_server` (the embedded Temporal
dev server and UI), `follow` and `progress` (watching a run from outside), `demo` and
`demo_conversation` (the no-key, no-Docker demo), and `cli` (the `steadyloop` command).
Import the module you need; nothing is re-exported, so importing the library never
imports the command line.
"""
