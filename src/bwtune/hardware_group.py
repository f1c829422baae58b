"""Which hosts a measured config holds for: the hardware group its result was measured on.

A results line records where it was measured as `gpu` (the node's SM tag, `sm120`) and
`stack_fingerprint` (bwtune.sglang.stack_facts' fingerprint over torch, sgl-kernel,
FlashInfer, SGLang and the driver). A host is in that hardware group when its facts now
(`bwtune_gpu.sm`, `bwtune_stack.fingerprint`, as `bwtune facts` gathers them) give the same
two values. `bwtune promote` rolls a config out to those hosts only: on any other GPU or
stack the measured speed, and even a clean start, are not known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class HardwareGroup:
    gpu: str | None
    stack_fingerprint: str | None

    @classmethod
    def of_result(cls, result: Mapping[str, Any]) -> HardwareGroup:
        """The group a results line (or a `--json` result) was measured on."""
        return cls(_text(result.get("gpu")), _text(result.get("stack_fingerprint")))

    @classmethod
    def of_facts(cls, facts: Mapping[str, Any]) -> HardwareGroup:
        """A host's group from its `bwtune_gpu` and `bwtune_stack` facts (None where unknown)."""
        gpu = facts.get("bwtune_gpu")
        stack = facts.get("bwtune_stack")
        sm = gpu.get("sm") if isinstance(gpu, Mapping) and gpu.get("available") else None
        fingerprint = stack.get("fingerprint") if isinstance(stack, Mapping) else None
        return cls(None if sm == "mixed" else _text(sm), _text(fingerprint))

    def missing(self) -> list[str]:
        """What is not known of the group: "GPU", "stack fingerprint"."""
        return [
            what
            for what, value in (("GPU", self.gpu), ("stack fingerprint", self.stack_fingerprint))
            if not value
        ]

    def as_dict(self) -> dict[str, str | None]:
        return {"gpu": self.gpu, "stack_fingerprint": self.stack_fingerprint}

    def __str__(self) -> str:
        return f"{self.gpu or 'GPU unknown'}, stack {self.stack_fingerprint or 'unknown'}"


@dataclass
class Selection:
    """The hosts of the group (inventory order), and why each other host was left out."""

    group: HardwareGroup
    hosts: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    # Hosts left out because their facts could not be gathered: they may be of the group.
    unknown: list[str] = field(default_factory=list)


def why_not_in(group: HardwareGroup, facts: Mapping[str, Any]) -> str | None:
    """None when a host with these facts is in `group`, else why not, in a few words."""
    gpu = facts.get("bwtune_gpu")
    gpu = gpu if isinstance(gpu, Mapping) else {}
    if not gpu.get("available"):
        return f"its GPUs are unknown ({gpu.get('reason') or 'no GPU facts'})"
    if gpu.get("sm") == "mixed":
        return f"its GPUs are of several kinds ({', '.join(gpu.get('sms') or [])})"
    host = HardwareGroup.of_facts(facts)
    if not host.gpu:
        return "its GPU model is unknown"
    if not host.stack_fingerprint:
        return "its stack is unknown (no stack Python at bwtune_stack_python)"
    differ = []
    if host.gpu != group.gpu:
        differ.append(f"GPU {host.gpu}, the run's {group.gpu}")
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


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None
