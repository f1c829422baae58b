# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A matrix's `auto` GPU and SGLang release, filled from the node's facts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._facts.gpu_info import node_sm
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix_fields import (
    expect,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix_model import (
    MatrixError,
    Path,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import CatalogError, FlagTable
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.installed_flags import (
    installed_sglang,
    installed_table,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.rules import GPUS

AUTO_WITHOUT_FACTS = "{what} is auto but no facts give it (gather facts first, or set it)"
# SM tags the rules do not cover, and the family whose rules a user may choose for them.
_FAMILIES = {"sm9": "sm90", "sm10": "sm100", "sm12": "sm120"}


def _setting(value: Any, path: Path, what: str) -> str:
    if value is None:
        raise MatrixError(path, f"missing {what} (a value, or auto to take it from the node's facts)")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise MatrixError(path, f'write the {what} as a quoted string ("{value}"), YAML read a number')
    return str(expect(value, str, path, f"the {what}"))


def _facts_part(facts: dict[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    found = (facts or {}).get(key)
    return found if isinstance(found, Mapping) else None


def resolve_gpu(value: Any, facts: dict[str, Any] | None) -> str:
    """`hardware.gpu`: as written, or the node's SM tag (`bwtune_gpu.sm`) for auto."""
    path: Path = ("hardware", "gpu")
    value = _setting(value, path, "GPU")
    gpu_facts = _facts_part(facts, "gpu")
    if value == "auto":
        if gpu_facts is None:
            raise MatrixError(path, AUTO_WITHOUT_FACTS.format(what="GPU"))
        try:
            sm = node_sm(dict(gpu_facts))
        except ValueError as err:
            raise MatrixError(path, str(err)) from None
        if sm not in GPUS:
            raise MatrixError(path, _uncovered_gpu(sm, gpu_facts))
        return sm
    node = gpu_facts.get("sm") if gpu_facts and gpu_facts.get("available") else None
    if node in GPUS and node != value:
        raise MatrixError(
            path,
            f"the matrix is for {value} but the node's GPUs are {node} ({gpu_facts.get('message')}):"  # type: ignore[union-attr]
            f" set hardware.gpu to {node} or auto",
        )
    return value


def _uncovered_gpu(sm: str, gpu_facts: Mapping[str, Any]) -> str:
    known = ", ".join(GPUS)
    message = (
        f"gpu: auto found {sm} ({gpu_facts.get('message')}), which bwtune's rules do not cover"
        f" (they know {known})"
    )
    family = next(
        (
            tag
            for prefix, tag in _FAMILIES.items()
            if sm[: len(prefix)] == prefix and sm[len(prefix) :].isdigit()
        ),
        None,
    )
    if family:
        return f"{message}: set hardware.gpu: {family} yourself if {family}'s rules hold for {sm}"
    return message


def resolve_release(value: Any, facts: dict[str, Any] | None, table_for: Any) -> tuple[str, FlagTable]:
    """(version, flag table) for `sglang.version`: as written, or the node's installed SGLang.

    With stack facts of an installed SGLang, the matrix must be for that release, and the
    table is the node's own parser (rules still apply by version range).
    """
    path: Path = ("sglang", "version")
    value = _setting(value, path, "SGLang version")
    stack = _facts_part(facts, "stack")
    sglang = installed_sglang(stack)
    installed = sglang.get("version") if sglang.get("installed") else None
    where = f"the node's stack ({(stack or {}).get('python') or 'python'})"
    if value == "auto":
        if stack is None:
            raise MatrixError(path, AUTO_WITHOUT_FACTS.format(what="SGLang version"))
        if not installed:
            raise MatrixError(path, f"SGLang version is auto but {where} has no SGLang installed")
        value = str(installed)
    elif installed and value != installed:
        raise MatrixError(
            path,
            f"the matrix is for SGLang {value} but {where} has SGLang {installed} installed:"
            f" set sglang.version to auto or {installed!r}",
        )
    table = None
    if installed:
        try:
            table = installed_table(stack)
        except CatalogError as err:
            raise MatrixError(path, f"the node's SGLang {installed}: {err}") from None
    if table is None:
        try:
            table = table_for(value)
        except CatalogError as err:
            hint = (
                "; the node's stack facts carry no flags of its own parser (gather them with"
                " stack_facts include_flags: true)"
                if installed
                else ""
            )
            raise MatrixError(path, f"{err}{hint}") from None
    return value, table
