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

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._serving.server_argv import (
    ROLE_FLAGS,
    ServerConfigError,
    split_options,
    strip_launcher,
)
from bwtune.recipes import check, recipe_file

# The build roles' variables for each stack component a recipe records (playbooks/provision.yml's
# inputs). The SGLang and sgl-kernel versions follow from the commit: no input of their own.
PROVISION_VARS = {
    "torch": ("torch_version",),
    "cuda": ("cuda_toolkit_version", "torch_expected_cuda"),
    "sglang_commit": ("sgl_kernel_sglang_commit",),
    "flashinfer": ("sglang_flashinfer_version",),
}
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


def pinned_inputs(recipe: Mapping[str, Any]) -> dict[str, Any]:
    """The build roles' variables for the stack the recipe records (`bwtune provision -e`);
    empty when it records none."""
    components = (recipe.get("stack") or {}).get("components") or {}
    found: dict[str, Any] = {}
    for name, variables in PROVISION_VARS.items():
        value = components.get(name)
        if value not in (None, "", check.UNKNOWN):
            for variable in variables:
                found[variable] = str(value)
    build = components.get("sgl_kernel_build")
    if isinstance(build, str) and "; fp4 ops: " in build:
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


def provision_command(inventory: str, hosts: Sequence[str], inputs: Mapping[str, Any]) -> str:
    """The `bwtune provision` command that builds the recipe's stack on `hosts`."""
    words = ["bwtune", "provision", "-i", inventory]
    if hosts:
        words += ["-l", ",".join(hosts)]
    words += ["-e", json.dumps(dict(inputs), sort_keys=True)]
    return shlex.join(words)


@dataclass
class Plan:
    """Which hosts get the recipe's config, which are left out (and why), which need its stack."""

    hosts: list[str]
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
    interconnect, and the stack fingerprint), in inventory order."""
    checks = check.check_hosts(recipe, hosts, facts, failed)
    chosen = [c.host for c in checks if c.in_group]
    left_out = {
        c.host: (f"its facts could not be gathered ({c.facts_failed})" if c.facts_failed else str(c.reason))
        for c in checks
        if not c.in_group
    }
    rebuild = [c.host for c in checks if any(d["name"] in check.REBUILT for d in c.differ)]
    unknown = [c.host for c in checks if c.facts_failed]
    return Plan(chosen, left_out, unknown, checks, rebuild)
