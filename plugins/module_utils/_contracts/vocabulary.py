# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The cross-role variables every bwtune role reads, and their defaults (docs/variables.md).

Set at inventory or group_vars level, with no role prefix. Roles read them through the
`bwtune.sglang.node_var` lookup, so a default lives here once and not in each role; each
role's meta/argument_specs.yml lists the ones it reads (with the same default, which a test
checks) so that a bad value fails validation before the role does anything.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from typing import Any

# name -> default; "{{ name }}" in a default stands for that variable's value for the host.
CROSS_ROLE: dict[str, Any] = {
    "bwtune_stack_root": "/opt/bwtune/stacks",
    "bwtune_stack_python": "{{ bwtune_stack_root }}/current/bin/python",
    "bwtune_model_path": "/models/Qwen3.5-397B-A17B-NVFP4",
    "bwtune_nvidia_smi": "nvidia-smi",
    "bwtune_simulated": False,
    "bwtune_run_id": None,
}

_REFERENCE = re.compile(r"\{\{ (\w+) \}\}")
_TRUE = ("1", "true", "yes", "on")


class VocabularyError(ValueError):
    """A name outside the vocabulary, or a value that cannot be worked out: one line."""


def is_true(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in _TRUE
    return bool(value)


def standin_nvidia_smi() -> str:
    """The stand-in's fake nvidia-smi, beside the bwtune package of this (the controller's) Python."""
    spec = importlib.util.find_spec("bwtune.standin")
    if spec is None or not spec.origin:
        raise VocabularyError(
            "bwtune_simulated is true but the bwtune stand-in is not installed with this Ansible's "
            "Python: install bwtune, or set bwtune_nvidia_smi"
        )
    return os.path.join(os.path.dirname(spec.origin), "bin", "nvidia-smi")


def value(name: str, lookup: Callable[[str], Any]) -> Any:
    """The host's value of cross-role variable `name`: `lookup(name)` (None when unset) or the default.

    A simulated host (bwtune_simulated) without its own bwtune_nvidia_smi gets the stand-in's
    fake one, which reads the same profile as the stand-in servers: facts and sweeps on such
    a host see the same GPUs.
    """
    if name not in CROSS_ROLE:
        raise VocabularyError(
            "%s is not a cross-role bwtune variable (known: %s)" % (name, ", ".join(sorted(CROSS_ROLE)))
        )
    found = lookup(name)
    if found is not None:
        return found
    if name == "bwtune_nvidia_smi" and is_true(value("bwtune_simulated", lookup)):
        return standin_nvidia_smi()
    default = CROSS_ROLE[name]
    if isinstance(default, str):
        return _REFERENCE.sub(lambda ref: str(value(ref.group(1), lookup)), default)
    return default
