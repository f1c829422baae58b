# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Plan a sweep: matrix -> configs (valid / pruned with reasons / duplicate) -> launches.

expand the axes -> apply excludes -> prune by rules (keeping every reason) -> normalize the
way SGLang would -> drop configs identical after normalization (`duplicate_of`) -> one
launch per valid config that runs all its workloads.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._plan import matrix as matrix_mod
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import Matrix, MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import (
    FlagTable,
    get_table,
    supported_versions,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.rules import (
    GPUS,
    ModelInfo,
    Reason,
    evaluate,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.versions import release_at_or_below

VALID, PRUNED, DUPLICATE = "valid", "pruned", "duplicate"


def config_id(flags: dict[str, Any], point: dict[str, Any] | None = None) -> str:
    """`c` + 10 hex digits of a hash of the normalized flags; key order does not matter.

    The model's path is not part of it: the same flags have the same id wherever the
    checkpoint lies (the argv, which starts with `--model-path`, says where it was).
    `point` is mixed in only to tell apart configs that normalize alike (a duplicate, or two
    pruned configs), so every config of a plan has its own id.
    """
    identity: dict[str, Any] = dict(flags)
    if point is not None:
        identity = {"flags": identity, "point": point}
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return "c" + hashlib.sha256(text.encode()).hexdigest()[:10]


def launch_argv(model_path: str, flags: dict[str, Any], table: FlagTable) -> list[str]:
    """The words after `python -m sglang.launch_server`: model first, then flags by name.

    `flags` are canonical names with coerced values (as the matrix gives them).
    """
    argv = ["--model-path", model_path]
    for name in sorted(flags):
        value = flags[name]
        key = (
            table.key,
            name,
            type(value).__name__,
            value if isinstance(value, (str, int, float)) else repr(value),
        )
        words = _ARGV_WORDS.get(key)
        if words is None:
            words = _ARGV_WORDS[key] = table.flags[name].argv(value)
        argv.extend(words)
    return argv


# (release, flag, value) -> argv words: a sweep repeats the same few values many times.
_ARGV_WORDS: dict[tuple[str, str, str, Any], list[str]] = {}


@dataclass
class Config:
    id: str
    point: dict[str, Any]
    flags: dict[str, Any]
    argv: list[str]
    status: str
    reasons: list[Reason] = field(default_factory=list)
    duplicate_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "point": self.point,
            "flags": self.flags,
            "argv": self.argv,
            "status": self.status,
            "reasons": [r.to_dict() for r in self.reasons],
            "duplicate_of": self.duplicate_of,
        }


@dataclass
class Plan:
    sglang_version: str
    gpu: str
    model_path: str
    configs: list[Config]
    launches: list[dict[str, Any]]
    summary: dict[str, Any]
    axes: list[str]
    objective: dict[str, Any] | None = None

    @property
    def rules_release(self) -> str | None:
        """The known release whose rules applied: the version's own, or for a build between
        releases (`0.5.23.post2.dev45+g1a2b3c4`) the newest release at or before it."""
        return release_at_or_below(self.sglang_version, supported_versions())

    def to_dict(self) -> dict[str, Any]:
        return {
            "sglang_version": self.sglang_version,
            "rules_release": self.rules_release,
            "gpu": self.gpu,
            "model_path": self.model_path,
            "objective": self.objective,
            "configs": [c.to_dict() for c in self.configs],
            "launches": self.launches,
            "summary": self.summary,
        }

    def valid(self) -> list[Config]:
        return [c for c in self.configs if c.status == VALID]


def model_info(m: Matrix, facts: dict[str, Any] | None) -> ModelInfo:
    """Architecture and checkpoint quantization: matrix `model:` keys, else facts, else the files."""
    architecture, quantization = _from_checkpoint_facts((facts or {}).get("checkpoint"))
    architecture = m.model.get("architecture") or architecture
    quantization = m.model.get("quantization") or quantization
    if architecture is None or quantization is None:
        read_arch, read_quant = _read_checkpoint(m.model_path)
        architecture = architecture or read_arch
        quantization = quantization or read_quant
    return ModelInfo(architecture=architecture, quantization=quantization)


def _from_checkpoint_facts(checkpoint: Any) -> tuple[str | None, str | None]:
    """(architecture, SGLang quantization) from `bwtune_checkpoint` (docs/facts.md)."""
    if not isinstance(checkpoint, dict) or not checkpoint.get("available"):
        return None, None
    architectures = checkpoint.get("architectures") or [None]
    quantization = checkpoint.get("quantization")
    sglang_quantization = quantization.get("sglang_quantization") if isinstance(quantization, dict) else None
    return architectures[0], sglang_quantization


def _read_checkpoint(path: str) -> tuple[str | None, str | None]:
    """(architecture, quantization) from a local checkpoint's config files, when they are here."""
    architecture = quantization = None
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as fh:
            config = json.load(fh)
        architecture = (config.get("architectures") or [None])[0]
        quant_cfg = config.get("quantization_config") or {}
        if str(quant_cfg.get("quant_algo", "")).upper() == "NVFP4":
            quantization = "modelopt_fp4"
    except (OSError, ValueError, AttributeError):
        return None, None
    try:
        with open(os.path.join(path, "hf_quant_config.json"), encoding="utf-8") as fh:
            algo = (json.load(fh).get("quantization") or {}).get("quant_algo", "")
        if str(algo).upper() == "NVFP4":
            quantization = "modelopt_fp4"
    except (OSError, ValueError, AttributeError):
        pass
    return architecture, quantization


def plan(
    matrix: dict[str, Any],
    gpu: str | None = None,
    sglang_version: str | None = None,
    facts: dict[str, Any] | None = None,
) -> Plan:
    """Plan a sweep from a matrix (parsed YAML). Raises MatrixError on bad input."""
    m = matrix_mod.parse(matrix, get_table, gpu=gpu, sglang_version=sglang_version, facts=facts)
    if m.gpu not in GPUS:
        where = ("hardware", "gpu")
        raise MatrixError(where, f"unknown GPU {m.gpu!r} (known: {', '.join(GPUS)}, auto)")
    table = m.table or get_table(m.sglang_version)
    model = model_info(m, facts)
    configs: list[Config] = []
    first_valid: dict[str, str] = {}  # normalized-flags id -> the valid config that has it
    taken: set[str] = set()
    for point, requested in m.points():
        result = evaluate(requested, m.gpu, m.sglang_version, model, coerced=True, table=table)
        cid = config_id(result.flags)
        argv = launch_argv(m.model_path, requested, table)
        own_id = cid if cid not in taken else config_id(result.flags, point)
        taken.add(own_id)
        if result.reasons:
            configs.append(Config(own_id, point, result.flags, argv, PRUNED, result.reasons))
        elif cid in first_valid:
            configs.append(
                Config(own_id, point, result.flags, argv, DUPLICATE, duplicate_of=first_valid[cid])
            )
        else:
            first_valid[cid] = own_id
            configs.append(Config(own_id, point, result.flags, argv, VALID))
    workloads = [w.to_dict() for w in m.workloads]
    launches = [{"config": c.id, "workloads": workloads} for c in configs if c.status == VALID]
    return Plan(
        sglang_version=m.sglang_version,
        gpu=m.gpu,
        model_path=m.model_path,
        configs=configs,
        launches=launches,
        summary=_summary(m, configs, launches),
        axes=[axis.name for axis in m.axes],
        objective=m.objective,
    )


def _summary(m: Matrix, configs: list[Config], launches: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {status: 0 for status in (VALID, PRUNED, DUPLICATE)}
    hardware = 0
    for c in configs:
        counts[c.status] += 1
        hardware += c.status == PRUNED and all(r.kind == "hardware" for r in c.reasons)
    per_launch_s = m.startup_s + sum(w.estimate_s or matrix_mod.DEFAULT_WORKLOAD_S for w in m.workloads)
    gpu_launches = 0  # the GPUs each launch holds, summed: GPU-hours = per_launch_s x this / 3600
    by_id = {c.id: c for c in configs if c.status == VALID}
    for launch in launches:
        flags = by_id[launch["config"]].flags
        gpu_launches += m.gpu_count or int(flags.get("tp-size", 1)) * int(flags.get("pp-size", 1))
    gpu_seconds = per_launch_s * gpu_launches
    return {
        "combinations": m.size(),
        "excluded": m.size() - len(configs),
        "expanded": len(configs),
        "valid": counts[VALID],
        "pruned": counts[PRUNED],
        "pruned_hardware_only": hardware,
        "duplicates": counts[DUPLICATE],
        "launches": len(launches),
        "workloads_per_launch": len(m.workloads),
        "estimate": {
            "startup_s": m.startup_s,
            "per_launch_s": per_launch_s,
            "gpu_launches": gpu_launches,
            "gpu_hours": round(gpu_seconds / 3600.0, 2),
        },
    }
