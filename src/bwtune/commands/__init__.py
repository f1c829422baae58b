"""One module per `bwtune` subcommand.

Each module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`
(the exit code, one of `bwtune.exit_codes`). `bwtune.cli` discovers them and gives each
`args._parser`, the whole parser; no command imports `bwtune.cli` or another command
(tests/unit/test_import_contract.py). Modules whose name starts with `_` share code
between commands and have no `run`.
"""
