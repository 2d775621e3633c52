"""`python -m steadyloop`: the `steadyloop` command, for when the console script is not on PATH."""

from steadyloop._cli.main import main

main()
