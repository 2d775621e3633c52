"""The worker process: what `steadyloop worker` starts, apart from the command line.

Everything that runs a Temporal worker, binds ports or reads the worker's settings lives
here: `config` (flags, environment, config file), `process` (the Temporal worker and its
graceful shutdown) and `dev_server` (the embedded Temporal dev server and UI). The
`steadyloop` command itself, a client of this worker, is `steadyloop._cli`. Import the
module you need; nothing is re-exported, so importing the library never imports either.
"""
