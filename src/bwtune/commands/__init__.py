"""One module per `bwtune` subcommand.

Each module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`
(the exit code: 0 success, 1 a host failed, 2 bad input). `bwtune.cli` discovers them.
"""
