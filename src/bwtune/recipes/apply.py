"""Applying a recipe: its config brought into service on the hosts of its hardware group, the
way `bwtune promote` brings a run's config (bwtune.app.promote_service: host by host, the
server role, health and correctness checked, rollback on the first failure).

This module says what the server is given (the recipe's argv: flags only, never a secret:
a value the recipe holds as REDACTED is refused, and the API key is the server role's, from
the inventory as for promote), which hosts are of the group (bwtune.recipes.check's
comparison) and what building the recipe's stack takes: `bwtune provision` with the pinned
inputs the recipe records, as `-e` variables. Apply does not build a stack itself.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._serving.server_argv import (
    ROLE_FLAGS,
    ServerConfigError,
    split_options,
    strip_launcher,
)
from bwtune.analysis.hardware_group import HardwareGroup, why_not_in
from bwtune.recipes import check, recipe_file

# The one mapping of a recipe's stack manifest (`stack.components`) to the build roles'
# variables (roles/<role>/meta/argument_specs.yml; playbooks/provision.yml's inputs): component ->
# (role, variable) pairs. tests/unit/recipes/test_build_vars.py holds every variable to its role.
BUILD_VARS: dict[str, tuple[tuple[str, str], ...]] = {
    "torch": (("torch", "torch_version"),),
    "cuda": (("cuda_toolkit", "cuda_toolkit_version"), ("torch", "torch_expected_cuda")),
    "sglang_commit": (("sgl_kernel", "sgl_kernel_sglang_commit"),),
    # Only when the recipe records no commit (an SGLang installed from a release): its version.
    "sglang": (("sglang", "sglang_package"),),
    "flashinfer": (("sglang", "sglang_flashinfer_version"),),
    "sgl_kernel_build": (
        ("sgl_kernel", "sgl_kernel_require_targets"),
        ("sgl_kernel", "sgl_kernel_enable_sm100a"),
        ("sgl_kernel", "sgl_kernel_enable_sm90a"),
        ("sgl_kernel", "sgl_kernel_enable_fp4"),
    ),
}
# Components with no variable of their own, and why.
NOT_BUILT = {
    "sgl_kernel": "built from the SGLang commit (sgl_kernel_sglang_commit)",
    "driver": "the host's NVIDIA driver: no build role installs one",
}
# Kept for the `bwtune provision` line: the variables of each component, role aside.
PROVISION_VARS = {name: tuple(var for _role, var in pairs) for name, pairs in BUILD_VARS.items()}
# Inputs of a build that a recipe does not record: the inventory's values are used.
NOT_PINNED = ("torch_index_url", "preflight_python_version")


def server_args(recipe: Mapping[str, Any], path: str) -> list[str]:
    """SGLang's arguments from the recipe's argv, for the server role (which sets `--host`,
    `--port` and the API key itself and serves the host's bwtune_model_path). RecipeError when
    the argv is not options or a flag the role does not set holds a redacted secret."""
    argv = strip_launcher((recipe.get("launch") or {}).get("argv") or [])
    try:
        options = split_options(argv, "the recipe's launch.argv")
    except ServerConfigError as exc:
        raise recipe_file.RecipeError(f"{path}: {exc}") from None
    kept: list[str] = []
    for option in options:
        name = option[0][2:]
        if name in ROLE_FLAGS:
            continue  # the role's own (--api-key from the inventory): the recipe's value is dropped
        if recipe_file.REDACTED in option[1:]:
            raise recipe_file.RecipeError(
                f"{path}: --{name} is {recipe_file.REDACTED} in the recipe (a secret never is in one): "
                "the server cannot be started with it; give the value to the server another way "
                "(server_env in the inventory) and drop the flag from the recipe's argv"
            )
        kept += option
    return kept


def build_vars(recipe: Mapping[str, Any]) -> dict[str, Any]:
    """The build roles' variables for the stack the recipe records (BUILD_VARS: its pinned
    inputs, `-e` of provision.yml); empty when it records none. A value the run did not record
    (null, empty, `unknown`) pins nothing: the inventory's value is used."""
    components = (recipe.get("stack") or {}).get("components") or {}

    def known(name: str) -> str | None:
        value = components.get(name)
        return None if value in (None, "", check.UNKNOWN) else str(value)

    found: dict[str, Any] = {}
    if known("torch"):
        found["torch_version"] = known("torch")
    cuda = known("cuda")
    if cuda:
        # The toolkit's release is MAJOR.MINOR; torch.version.cuda may say more (12.8.1).
        found["cuda_toolkit_version"] = ".".join(cuda.split(".")[:2])
        found["torch_expected_cuda"] = cuda
    if known("sglang_commit"):
        found["sgl_kernel_sglang_commit"] = known("sglang_commit")
    elif known("sglang"):
        found["sglang_package"] = f"sglang=={known('sglang')}"
    if known("flashinfer"):
        found["sglang_flashinfer_version"] = known("flashinfer")
    build = known("sgl_kernel_build")
    if build and "; fp4 ops: " in build:
        targets_text, _, ops = build.partition("; fp4 ops: ")
        # The role's spelling, sm_120a (a binary's target, as stack facts read them).
        targets = [
            re.sub(r"^sm(?=\d)", "sm_", target)
            for target in ([] if targets_text == "no sm targets" else targets_text.split())
        ]
        if targets:
            found["sgl_kernel_require_targets"] = targets
            found["sgl_kernel_enable_sm100a"] = "sm_100a" in targets
            found["sgl_kernel_enable_sm90a"] = "sm_90a" in targets
        found["sgl_kernel_enable_fp4"] = ops.strip() not in ("", "none")
    return found


# The name the `bwtune provision` line and its tests know it by.
pinned_inputs = build_vars


def provision_command(inventory: str, hosts: Sequence[str], inputs: Mapping[str, Any]) -> str:
    """The `bwtune provision` command that builds the recipe's stack on `hosts`."""
    words = ["bwtune", "provision", "-i", inventory]
    if hosts:
        words += ["-l", ",".join(hosts)]
    words += ["-e", json.dumps(dict(inputs), sort_keys=True)]
    return shlex.join(words)


def checkpoint_vars(recipe: Mapping[str, Any]) -> dict[str, Any]:
    """What the checkpoint step is given: the recipe's revision (the checkpoint role's
    checkpoint_revision: fetched from the inventory's checkpoint_repo_id) and its shard hashes
    (file -> sha256, compared with what the role verified); empty when it records neither."""
    found = recipe.get("checkpoint") or {}
    out: dict[str, Any] = {}
    if isinstance(found.get("revision"), str) and found["revision"]:
        out["revision"] = found["revision"]
    shards = found.get("shards")
    if isinstance(shards, Mapping) and shards:
        out["shards"] = {str(name): str(digest) for name, digest in shards.items()}
    return out


@dataclass
class Plan:
    """Which hosts get the recipe's config, which are left out (and why), which need its stack."""

    hosts: list[str]  # served: of the group now, or once their stack is built (needs_build)
    left_out: dict[str, str]
    unknown: list[str]  # hosts whose facts could not be gathered
    checks: list[check.HostCheck]
    needs_build: list[str] = field(default_factory=list)  # hosts whose stack inputs differ


def plan(
    recipe: Mapping[str, Any],
    hosts: Sequence[str],
    facts: Mapping[str, Mapping[str, Any]],
    failed: Mapping[str, str],
) -> Plan:
    """The hosts of the recipe's hardware group (check.check_hosts: the GPU, its count, model and
    interconnect, and the stack fingerprint), in inventory order. A host of the recipe's GPU
    group whose stack inputs differ is served once apply has built the recipe's stack there
    (when the recipe pins any input: build_vars); a host of another GPU group is left out."""
    checks = check.check_hosts(recipe, hosts, facts, failed)
    pinned = bool(build_vars(recipe))
    group = check.group_of(recipe)
    chosen: list[str] = []
    rebuild: list[str] = []
    left_out: dict[str, str] = {}
    for c in checks:
        differs = any(d["name"] in check.REBUILT for d in c.differ)
        if c.in_group and not (differs and pinned):
            chosen.append(c.host)
            continue
        if c.facts_failed:
            left_out[c.host] = f"its facts could not be gathered ({c.facts_failed})"
            continue
        host_facts = facts.get(c.host) or {}
        # Of the recipe's group but for the stack: the build makes it one.
        gpu_only = replace(group, stack_fingerprint=HardwareGroup.of_facts(host_facts).stack_fingerprint)
        if differs and pinned and why_not_in(gpu_only, host_facts) is None:
            chosen.append(c.host)
            rebuild.append(c.host)
        else:
            left_out[c.host] = str(c.reason)
    unknown = [c.host for c in checks if c.facts_failed]
    return Plan(chosen, left_out, unknown, checks, rebuild)


def built_stack_matches(recipe: Mapping[str, Any], facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    """After a build: the recipe's pinned inputs the host's stack still differs in (empty: it
    has the recipe's stack)."""
    return [d for d in check.stack_differences(recipe, facts) if d["name"] in check.REBUILT]


def stack_fingerprint(inputs: Mapping[str, Any]) -> str:
    """A simulated stack's name under bwtune_stack_root: the hash of the pinned inputs (a real
    one is provision.yml's stack_layout fingerprint of every build input)."""
    text = json.dumps(dict(inputs), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
