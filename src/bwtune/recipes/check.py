"""Comparing a recipe with hosts' facts: is each host of the recipe's hardware group, which
stack inputs differ, and what `bwtune recipe apply` would change there. Reads facts only.

A host's facts are what `bwtune facts` gathers (`bwtune_gpu`, `bwtune_stack`,
`bwtune_checkpoint`: docs/facts.md); the hardware group is bwtune.analysis.hardware_group's (its
same_stack grain, as `bwtune promote` uses it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import stack_info
from bwtune import ansible_run
from bwtune.analysis.hardware_group import HardwareGroup, why_not_in
from bwtune.recipes import recipe_file

# What apply can change on a host (the build roles' inputs, the checkpoint) and what it cannot.
REBUILT = ("torch", "cuda", "sglang", "sglang_commit", "sgl_kernel", "sgl_kernel_build", "flashinfer")
NOT_CHANGED = ("driver",)


class Refused(ValueError):
    """One line: the recipe may not be used on these hosts; nothing was run."""


@dataclass
class HostCheck:
    host: str
    in_group: bool
    reason: str | None = None  # why the host is not of the group
    gpu: str | None = None
    differ: list[dict[str, Any]] = field(default_factory=list)  # {"name", "recipe", "host"}
    apply_would: list[str] = field(default_factory=list)
    facts_failed: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# What a results line says for a stack facts could not read (the stand-in without a stack Python).
UNKNOWN = "unknown"


def group_of(recipe: Mapping[str, Any]) -> HardwareGroup:
    hardware = recipe.get("hardware") or {}
    fingerprint = hardware.get("stack_fingerprint")
    line = {
        "gpu": hardware.get("gpu"),
        "stack_fingerprint": None if fingerprint in (None, "", UNKNOWN) else fingerprint,
    }
    # The recipe's GPU facts (recipes.recipe_file._hardware) in the results database's summary keys.
    kept = {key: hardware.get(name) for key, name in (("gpus", "model"), ("count", "count"),
            ("sm", "sm"), ("interconnect", "interconnect"))}  # fmt: skip
    return HardwareGroup.of_result(line, kept)


def refuse_simulated(
    recipe: Mapping[str, Any],
    path: str,
    inventory: ansible_run.Inventory,
    doing: str = "checked and verified",
) -> None:
    """Refused when a simulated recipe meets a host that is not simulated (as promote refuses);
    `doing`: what is done with it only on simulated hosts, in words."""
    if not recipe.get("simulated"):
        return
    real = [host for host in inventory.hosts if not inventory.simulated(host)]
    if real:
        raise Refused(
            f"{path}: the recipe's numbers are simulated (the stand-in's), and {', '.join(real)} "
            f"{'is' if len(real) == 1 else 'are'} not simulated: a simulated recipe is {doing} "
            "only on hosts with bwtune_simulated: true (they serve the stand-in; see "
            "inventory/local.yml)"
        )


def _text(value: Any) -> str | None:
    return None if value in (None, "", []) else str(value)


def stack_differences(recipe: Mapping[str, Any], facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stack components whose value on the host is not the recipe's (recipe values the
    run did not record are not compared)."""
    stack = facts.get("bwtune_stack")
    return component_differences(recipe, stack_info.components(stack if isinstance(stack, dict) else None))


def component_differences(
    recipe: Mapping[str, Any], components: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """The recipe's stack components whose value in `components` (a results line's `stack`,
    or stack_info.components of a host's facts) is not the recipe's."""
    wanted = (recipe.get("stack") or {}).get("components") or {}
    have = components or {}
    found = []
    for name, words in stack_info.COMPONENTS:
        if name not in wanted or _text(wanted.get(name)) is None:
            continue
        if _text(wanted.get(name)) != _text(have.get(name)):
            found.append({"name": name, "words": words, "recipe": wanted.get(name), "host": have.get(name)})
    return found


def check_host(recipe: Mapping[str, Any], host: str, facts: Mapping[str, Any]) -> HostCheck:
    group = group_of(recipe)
    if group.stack_fingerprint is None:
        # The run recorded no stack: only the GPU can be compared, and that is said.
        host_stack = HardwareGroup.of_facts(facts).stack_fingerprint
        reason = why_not_in(replace(group, stack_fingerprint=host_stack), facts)
        reason = reason if reason is not None or not group.sm else None
    else:
        reason = why_not_in(group, facts)
    found = facts.get("bwtune_gpu")
    gpu: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    outcome = HostCheck(host, reason is None, reason, _text(gpu.get("sm")))
    outcome.differ = stack_differences(recipe, facts)
    if outcome.gpu is not None and group.sm and outcome.gpu != group.sm:
        outcome.apply_would.append(
            f"nothing it can: the GPUs are {outcome.gpu}, the recipe's {group.sm} "
            "(its numbers do not hold here)"
        )
        return outcome
    rebuild = [d for d in outcome.differ if d["name"] in REBUILT]
    if rebuild:
        inputs = ", ".join(f"{d['words']} {d['recipe']} (here {d['host'] or 'none'})" for d in rebuild)
        outcome.apply_would.append(
            f"need a stack with {inputs}: apply builds it first with the recipe's pinned inputs "
            "(the build roles, provision.yml; a simulated host gets a simulated stack)"
        )
    for d in outcome.differ:
        if d["name"] in NOT_CHANGED:
            outcome.apply_would.append(
                f"not change the {d['words']}: {d['host'] or 'unknown'} here, the recipe's {d['recipe']}"
            )
    if group.stack_fingerprint is None:
        outcome.apply_would.append(
            "not know the recipe's stack: its run recorded none (only the GPU is compared)"
        )
    checkpoint = facts.get("bwtune_checkpoint")
    wanted_path = (recipe.get("checkpoint") or {}).get("path")
    if isinstance(checkpoint, Mapping) and wanted_path:
        have_path = checkpoint.get("path")
        if have_path and have_path != wanted_path:
            # The server role serves the host's bwtune_model_path, as promote does.
            outcome.apply_would.append(
                f"serve this host's checkpoint at {have_path} (bwtune_model_path; the recipe's run "
                f"served {wanted_path})"
            )
        elif not checkpoint.get("complete"):
            outcome.apply_would.append(
                f"serve the checkpoint at {wanted_path}, which is not complete here: fetch it first "
                "(bwtune provision --serve, or the checkpoint role)"
            )
    launch = recipe.get("launch") or {}
    config_id = (recipe.get("measured") or {}).get("config_id")
    outcome.apply_would.append(
        f"serve config {config_id} with its argv ({len(launch.get('argv') or [])} words)"
    )
    return outcome


def check_hosts(
    recipe: Mapping[str, Any],
    hosts: Sequence[str],
    facts: Mapping[str, Mapping[str, Any]],
    failed: Mapping[str, str],
) -> list[HostCheck]:
    """One HostCheck per host, inventory order; a host whose facts failed says so."""
    found = []
    for host in hosts:
        if host in failed:
            found.append(HostCheck(host, False, "its facts could not be gathered", facts_failed=failed[host]))
        else:
            found.append(check_host(recipe, host, facts.get(host) or {}))
    return found


def describe(check: HostCheck) -> list[str]:
    """A host's lines, as `bwtune recipe check` prints them."""
    if check.facts_failed:
        return [f"{check.host}: facts could not be gathered ({check.facts_failed})"]
    head = (
        "in the recipe's hardware group"
        if check.in_group
        else f"not in the recipe's hardware group: {check.reason}"
    )
    lines = [f"{check.host}: {head}"]
    if check.differ:
        lines.append(
            "  stack inputs that differ: "
            + "; ".join(f"{d['words']} {d['host'] or 'none'} (recipe {d['recipe']})" for d in check.differ)
        )
    elif check.in_group:
        lines.append("  stack inputs: the recipe's")
    lines += [f"  apply would {what}" for what in check.apply_would]
    return lines


def loaded(path: str) -> dict[str, Any]:
    return recipe_file.load(path)
