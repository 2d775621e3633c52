"""`python -m steadyloop`: the `steadyloop` command, for when the console script is not on PATH."""

from steadyloop.cli.main import main

main()
