"""The playbook arguments every playbook run takes from its user, checked before it runs.

`-e/--extra-vars` values are checked the way ansible-playbook reads them (key=value, JSON or
YAML, `@file` made absolute), so a bad one is one line and exit 2 before anything runs, then
passed to ansible-playbook unchanged; `MAX_VERBOSITY` caps ansible-playbook's `-v` count (the
commands read both from their options: nothing here knows argparse).
The commands' option spelling is `bwtune.commands._playbook_options`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

MAX_VERBOSITY = 4  # ansible-playbook -vvvv: connection debugging; more adds nothing
VAULT_HEADER = "$ANSIBLE_VAULT;"


class ExtraVarsError(ValueError):
    """A -e value ansible-playbook would refuse (bad input, exit 2)."""


def check_extra_vars(values: Sequence[str] | None) -> list[str]:
    """The -e values, each checked as ansible-playbook reads it (an @file made absolute).

    Raises ExtraVarsError naming the bad value and why, as ansible-playbook would refuse it.
    """
    return [_checked(value) for value in values or ()]


def extra_vars_args(values: Sequence[str]) -> list[str]:
    """ansible-playbook arguments for checked -e values: ["-e", value, ...]."""
    return [arg for value in values for arg in ("-e", value)]


def _checked(value: str) -> str:
    from ansible.errors import AnsibleError
    from ansible.parsing.dataloader import DataLoader
    from ansible.parsing.splitter import parse_kv

    if not value:
        raise ExtraVarsError("-e: an empty value")
    try:
        if value.startswith("@"):
            path = Path(value[1:]).expanduser()
            if not path.is_file():
                raise ExtraVarsError(f"-e {value}: {path}: no such file")
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise ExtraVarsError(f"-e {value}: cannot read {path}: {err}") from None
            path = path.resolve()
            value = f"@{path}"
            if text.lstrip().startswith(VAULT_HEADER):
                return value  # ansible-playbook decrypts it with the vault password it is given
            data = DataLoader().load(text, file_name=str(path))
        elif value[0] in "/.":
            raise ExtraVarsError(f"-e {value}: a file of variables is given as @{value}")
        elif value[0] in "[{":
            data = DataLoader().load(value)
        else:
            data = parse_kv(value)
            if "_raw_params" in data:  # words without `=`: ansible-playbook would drop them silently
                raise ExtraVarsError(f"-e {value}: not key=value, JSON/YAML or @FILE")
    except AnsibleError as err:
        reason = " ".join(str(err.message if hasattr(err, "message") else err).split())
        raise ExtraVarsError(f"-e {value}: {reason}") from None
    if not isinstance(data, Mapping):
        raise ExtraVarsError(f"-e {value}: not a mapping of variables (key=value, JSON/YAML or @FILE)")
    return value
