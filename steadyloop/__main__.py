"""`python -m steadyloop`: the `steadyloop` command, for when the console script is not on PATH."""

from steadyloop.worker.cli import main

main()
