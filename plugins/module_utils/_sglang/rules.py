# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""What SGLang does with a set of launch flags on a given GPU, before anything is launched.

Three kinds of rule, applied in one ordered pass (SGLang's own order where it matters):
- `adjust`: a change SGLang makes itself (NEXTN -> EAGLE, draft tokens = steps + 1, ...);
  these give the normalized flags two configs are compared by.
- `sglang`: SGLang refuses the flags at argument time (argparse or ServerArgs checks).
- `hardware`: SGLang accepts the flags, but the GPU fails them at model load or first
  forward (kernels that exist for SM100 only, NVFP4 MoE paths that cannot run, ...).

Each rule names the SGLang releases it applies to (a version range) and its source.
`evaluate()` returns every reason a flag set is refused, not just the first.
The rules live by family in rules_adjust, rules_refused and rules_hardware, their
vocabulary in rule_model; this module evaluates them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import (
    CatalogError,
    FlagTable,
    get_table,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.rule_model import (
    GPUS,
    KINDS,
    Context,
    ModelInfo,
    Reason,
    Rule,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.rules_adjust import ADJUST_RULES
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.rules_hardware import HARDWARE_RULES
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.rules_refused import REFUSED_RULES

# Every rule, in evaluation order: SGLang's own adjustments first, then its refusals, then
# what the GPU fails (each family keeps its rules in the order SGLang applies them).
RULES: list[Rule] = [*ADJUST_RULES, *REFUSED_RULES, *HARDWARE_RULES]

__all__ = [
    "GPUS",
    "KINDS",
    "RULES",
    "Context",
    "Evaluation",
    "ModelInfo",
    "Reason",
    "Rule",
    "check_gpu",
    "evaluate",
    "rules_for",
]


@dataclass
class Evaluation:
    """The flags as SGLang would hold them, and every reason they would be refused."""

    flags: dict[str, Any]
    reasons: list[Reason]
    adjusted_by: list[str] = field(default_factory=list)

    @property
    def rejected(self) -> bool:
        return bool(self.reasons)


_APPLICABLE: dict[tuple[str, str], list[Rule]] = {}


def rules_for(version: str, gpu: str) -> list[Rule]:
    """The rules that apply to one SGLang release on one GPU, in evaluation order."""
    key = (version, gpu)
    if key not in _APPLICABLE:
        _APPLICABLE[key] = [r for r in RULES if r.applies(version, gpu)]
    return _APPLICABLE[key]


def check_gpu(gpu: str) -> None:
    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r} (known: {', '.join(GPUS)})")


def evaluate(
    flags: dict[str, Any],
    gpu: str,
    version: str,
    model: ModelInfo | None = None,
    *,
    coerced: bool = False,
    table: FlagTable | None = None,
) -> Evaluation:
    """Normalize `flags` the way SGLang `version` would on `gpu`, and collect every refusal.

    `flags` maps flag names (CLI spelling or alias, dashes optional) to values as written;
    values are coerced as argparse would. A flag or value the release lacks is an `sglang`
    reason (argparse exits on it). Flags equal to the release's default are dropped from
    the result, so two spellings of the same launch normalize to the same flags.
    `coerced=True` says names are canonical and values already coerced (the planner's
    matrix is), which skips that step. `table` is the flag table to check against when it is
    not the catalog's for `version` (a node's own installed SGLang parser); the rules still
    apply by `version`.
    """
    check_gpu(gpu)
    table = table or get_table(version)
    ctx = Context(gpu, version, table, model or ModelInfo())
    reasons: list[Reason] = []
    current: dict[str, Any] = dict(flags) if coerced else {}
    for name, value in () if coerced else flags.items():
        try:
            canonical, value = table.coerce(name, value)
        except CatalogError as err:
            reasons.append(Reason("argparse", "sglang", str(err), f"sglang {version} argparse"))
            continue
        current[canonical] = value
    adjusted_by: list[str] = []
    for r in rules_for(version, gpu):
        if r.kind == "adjust":
            if r.fn(current, ctx):
                adjusted_by.append(r.id)
            continue
        message = r.fn(current, ctx)
        if message:
            reasons.append(Reason(r.id, r.kind, message, r.source))
    defaults = _defaults_of(table)
    normalized = {n: v for n, v in current.items() if n not in defaults or v != defaults[n]}
    return Evaluation(normalized, reasons, adjusted_by)


_DEFAULTS: dict[str, dict[str, Any]] = {}


def _defaults_of(table: FlagTable) -> dict[str, Any]:
    if table.key not in _DEFAULTS:
        _DEFAULTS[table.key] = {name: spec.default for name, spec in table.flags.items()}
    return _DEFAULTS[table.key]
