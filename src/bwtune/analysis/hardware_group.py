"""The hardware group: which hosts a measured result holds for, defined once.

A group is five parts: the GPU model, how many GPUs the host has, their SM tag, how they
are linked (interconnect) and the software stack's fingerprint. Two grains of it are used:

- `same_hardware`: model, count, SM and interconnect agree. Regression history and the
  adaptive prior compare runs at this grain (a stack change is what regression looks for).
- `same_stack`: the same hardware and the same stack fingerprint. `bwtune promote` and
  `bwtune recipe check` roll a config out only to hosts of this grain, and `bwtune facts`
  groups hosts by it (one sweep's results hold for each of its groups).

Where the parts come from: a host's facts now (`bwtune_gpu`, `bwtune_stack`, as
bwtune.sglang.gpu_facts and stack_facts return them), or a results line: its `hardware`
(model, count, SM, interconnect, which the node records from its GPU facts since issue 25)
and `stack_fingerprint`. An older line has only `gpu` (the SM tag); its other parts come
from the GPU facts the results database kept of the host for that run (the `hosts`
table's summary: count, interconnect, "8 x NAME"), where it kept any.

Unknown parts: the SM and the stack fingerprint are compared as they are (two lines that
both lack them are alike, as before). The model, count and interconnect are compared only
where both sides know them: older lines imported without facts, or recorded before the
sweep kept host facts, know only the SM; refusing them would drop every older run's history.
`missing()` says what a group does not know, so a caller can say so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# gpu_info.build_facts' message for one kind of GPU: "8 x NVIDIA RTX PRO 6000 Blackwell ...".
_ONE_KIND = re.compile(r"^\s*(\d+)\s+x\s+(.+?)\s*$")
# bwtune_gpu.sm when the GPUs are of several generations: no one group.
MIXED = "mixed"


@dataclass(frozen=True, kw_only=True)  # by name: five parts, easily swapped
class HardwareGroup:
    gpu_model: str | None = None
    gpu_count: int | None = None
    sm: str | None = None
    interconnect: str | None = None  # gpu_info.interconnect's kind: nvlink, pcie, none, ...
    stack_fingerprint: str | None = None

    # ------------------------------------------------------------------ building one

    @classmethod
    def of_facts(cls, facts: Mapping[str, Any]) -> HardwareGroup:
        """A host's group from its `bwtune_gpu` and `bwtune_stack` facts (None where unknown)."""
        gpu = _mapping(facts.get("bwtune_gpu"))
        stack = _mapping(facts.get("bwtune_stack"))
        fingerprint = _text(stack.get("fingerprint"))
        if not gpu.get("available"):
            return cls(stack_fingerprint=fingerprint)
        names = {_text(g.get("name")) for g in gpu.get("gpus") or [] if isinstance(g, Mapping)}
        model = names.pop() if len(names) == 1 else None
        sm = _text(gpu.get("sm"))
        return cls(
            gpu_model=model or _model_of_message(gpu.get("message")),
            gpu_count=_count(gpu.get("count")),
            sm=None if sm == MIXED else sm,
            interconnect=_text(gpu.get("interconnect")),
            stack_fingerprint=fingerprint,
        )

    @classmethod
    def of_result(
        cls, result: Mapping[str, Any], gpu_facts: Mapping[str, Any] | None = None
    ) -> HardwareGroup:
        """The group a results line (or a `--json` result) was measured on: its `hardware`
        (model, count, SM, interconnect, as the node recorded them) where the line has it.
        Each part it lacks (older lines lack the whole field) comes from `gpu_facts`, what
        the database kept of its host's GPUs for that run (store.run_hosts' `gpu_facts`,
        store.gpu_facts_summary's keys), where it kept any."""
        recorded = _mapping(result.get("hardware"))
        sm = _text(recorded.get("sm")) or _text(result.get("gpu"))
        kept = gpu_facts or {}
        kept_sm = _text(kept.get("sm"))
        if sm is not None and kept_sm is not None and kept_sm != sm:
            kept = {}  # facts of other GPUs than the line's (the host was re-imaged): not this line's
        return cls(
            gpu_model=_text(recorded.get("gpu_model")) or _model_of_message(kept.get("gpus")),
            gpu_count=_count(recorded.get("gpu_count")) or _count(kept.get("count")),
            sm=sm or (None if kept_sm == MIXED else kept_sm),
            interconnect=_text(recorded.get("interconnect")) or _text(kept.get("interconnect")),
            stack_fingerprint=_text(result.get("stack_fingerprint")),
        )

    # ------------------------------------------------------------------ its grains

    def same_hardware(self, other: HardwareGroup) -> bool:
        """The same GPUs: SM alike, and model, count and interconnect where both know them."""
        return self.sm == other.sm and not self.hardware_differences(other)

    def same_stack(self, other: HardwareGroup) -> bool:
        """The same hardware and the same software stack (fingerprint)."""
        return self.same_hardware(other) and self.stack_fingerprint == other.stack_fingerprint

    def hardware_differences(self, other: HardwareGroup) -> list[tuple[str, Any, Any]]:
        """(what, ours, theirs) for each hardware part both know and that differs; the SM
        first, then count, model, interconnect."""
        found: list[tuple[str, Any, Any]] = []
        if self.sm != other.sm:
            found.append(("GPU", self.sm, other.sm))
        for what, ours, theirs in (
            ("GPUs", self.gpu_count, other.gpu_count),
            ("GPU model", self.gpu_model, other.gpu_model),
            ("interconnect", self.interconnect, other.interconnect),
        ):
            if ours is not None and theirs is not None and ours != theirs:
                found.append((what, ours, theirs))
        return found

    def key(self) -> str:
        """A stable string of all five parts ("?" where unknown): equal keys, equal groups."""
        return f"{self.hardware_key()}|stack {self.stack_fingerprint or '?'}"

    def hardware_key(self) -> str:
        """The hardware parts only, e.g. "sm120|8 x NVIDIA RTX PRO 6000|nvlink"."""
        count = "?" if self.gpu_count is None else str(self.gpu_count)
        return f"{self.sm or '?'}|{count} x {self.gpu_model or '?'}|{self.interconnect or '?'}"

    def missing(self) -> list[str]:
        """What is not known of the group, in words ("GPU" is the SM tag)."""
        return [
            what
            for what, value in (
                ("GPU", self.sm),
                ("GPU count", self.gpu_count),
                ("GPU model", self.gpu_model),
                ("interconnect", self.interconnect),
                ("stack fingerprint", self.stack_fingerprint),
            )
            if value is None
        ]

    def as_dict(self) -> dict[str, Any]:
        # "gpu" (the SM tag) is the name results lines and earlier `--json` outputs use.
        return {
            "gpu": self.sm,
            "gpu_model": self.gpu_model,
            "gpu_count": self.gpu_count,
            "interconnect": self.interconnect,
            "stack_fingerprint": self.stack_fingerprint,
        }

    def __str__(self) -> str:
        gpus = self.sm or "GPU unknown"
        if self.gpu_count is not None or self.gpu_model is not None:
            gpus += f" ({self.gpu_count if self.gpu_count is not None else '?'} x {self.gpu_model or 'GPU'})"
        if self.interconnect:
            gpus += f", {self.interconnect}"
        return f"{gpus}, stack {self.stack_fingerprint or 'unknown'}"


# ---------------------------------------------------------------------- hosts of a group


@dataclass
class Selection:
    """The hosts of the group (inventory order), and why each other host was left out."""

    group: HardwareGroup
    hosts: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    # Hosts left out because their facts could not be gathered: they may be of the group.
    unknown: list[str] = field(default_factory=list)


def why_not_in(group: HardwareGroup, facts: Mapping[str, Any]) -> str | None:
    """None when a host with these facts is in `group` (same_stack), else why not, in a few words."""
    gpu = _mapping(facts.get("bwtune_gpu"))
    if not gpu.get("available"):
        return f"its GPUs are unknown ({gpu.get('reason') or 'no GPU facts'})"
    if gpu.get("sm") == MIXED:
        return f"its GPUs are of several kinds ({', '.join(gpu.get('sms') or [])})"
    host = HardwareGroup.of_facts(facts)
    if not host.sm:
        return "its GPU model is unknown"
    if not host.stack_fingerprint:
        return "its stack is unknown (no stack Python at bwtune_stack_python)"
    differ = [f"{what} {theirs}, the run's {ours}" for what, ours, theirs in group.hardware_differences(host)]
    if host.stack_fingerprint != group.stack_fingerprint:
        differ.append(f"stack {host.stack_fingerprint}, the run's {group.stack_fingerprint}")
    return ("another hardware group: " + "; ".join(differ)) if differ else None


def select(
    group: HardwareGroup,
    hosts: Sequence[str],
    facts: Mapping[str, Mapping[str, Any]],
    failed: Mapping[str, str],
) -> Selection:
    """Split `hosts` by their facts: in `group`, or left out with the reason.

    `failed` names the hosts whose facts could not be gathered, with Ansible's line.
    """
    selection = Selection(group)
    for host in hosts:
        if host in failed:
            selection.left_out[host] = f"its facts could not be gathered ({failed[host]})"
            selection.unknown.append(host)
            continue
        why = why_not_in(group, facts.get(host) or {})
        if why is None:
            selection.hosts.append(host)
        else:
            selection.left_out[host] = why
    return selection


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _count(value: Any) -> int | None:
    # bool is an int: a stray true is not one GPU.
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _model_of_message(message: Any) -> str | None:
    """The model out of "8 x NAME" (one kind of GPU); None for several kinds or none."""
    found = _ONE_KIND.match(message) if isinstance(message, str) else None
    return found.group(2) if found else None
