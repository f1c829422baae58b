"""The application layer: the services the commands call (issue 22).

A command of `bwtune.commands` parses its options, calls a service here and renders what
it returns; a service never parses a command line of its own or imports a command or
`bwtune.cli` (tests/unit/test_import_contract.py holds that). Services use the results
store, the analysis, the Ansible layer (`bwtune.ansible_run`) and module_utils; a request is
typed (the command builds it from its options), so nothing here imports argparse.
"""
