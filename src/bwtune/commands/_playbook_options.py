"""The options of every command that runs a playbook, spelt as ansible-playbook spells them.

`-i/--inventory`, `-l/--limit`, `-e/--extra-vars` (repeatable: `key=value`, JSON or YAML,
`@file`), `-v/--verbose` (`-vvvv` the most) and `--forks`. `-e` is checked (by
`bwtune.app.playbook_args`, named here too) the way ansible-playbook reads it, so a bad one
is one line and exit 2 before anything runs, and then passed to ansible-playbook unchanged
(an `@file` made absolute).

(Not a subcommand: it has no `run`, so `bwtune.cli` passes it over.)
"""

from __future__ import annotations

import argparse

from bwtune.app.playbook_args import (  # noqa: F401  (the commands read them here)
    MAX_VERBOSITY,
    VAULT_HEADER,
    ExtraVarsError,
    check_extra_vars,
    extra_vars_args,
)


def verbosity(args: argparse.Namespace) -> int:
    """ansible-playbook's -v count from the options, capped (more adds nothing)."""
    return min(int(getattr(args, "verbose", 0) or 0), MAX_VERBOSITY)


def add_arguments(
    parser: argparse.ArgumentParser,
    inventory_required: bool = True,
    inventory_default: str = "with --resume/--attach, the run's own",
) -> None:
    """`inventory_default`: what an optional -i falls back to, in the command's own words."""
    inventory_help = "Ansible inventory (file or directory)"
    if not inventory_required:
        inventory_help += f"; {inventory_default}"
    parser.add_argument("-i", "--inventory", required=inventory_required, help=inventory_help)
    parser.add_argument("-l", "--limit", help="only these hosts (an Ansible host pattern)")
    parser.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        metavar="VARS",
        help="extra variables for the playbook, as ansible-playbook takes them: key=value, "
        "JSON or YAML, or @FILE; repeatable. bwtune's own options win for the variables they set",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="show ansible-playbook's output on stderr; -vv .. -vvvv for more detail",
    )
    parser.add_argument("--forks", type=int, help="hosts Ansible works on at once")
