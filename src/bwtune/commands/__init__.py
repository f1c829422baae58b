"""One module per `bwtune` subcommand.

Each module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`
(the exit code, one of `bwtune.exit_codes`). `bwtune.cli` discovers them; a module that
sets `HIDDEN = True` runs but is left out of `bwtune --help`. Modules whose name starts
with `_` share code between commands and have no `run`.
"""
