"""The steps of `bwtune recipe apply` before the server, and of `recipe verify --apply-stack`:
the recipe's stack built where its inputs differ, its checkpoint fetched and verified
(playbooks/recipe_apply.yml); the server is promote_service's rollout.

The stack: on a host that is not simulated, provision.yml with the recipe's pinned inputs
(bwtune.recipes.apply.build_vars, as `-e`), so the build roles build it into its own
fingerprinted venv and `current` moves only once it is verified; on a simulated host
(`bwtune_simulated`, the stand-in) nothing is built: the stack is a folder named by the pinned
inputs' hash whose Python runs the stand-in's with those inputs as package metadata, so its
facts, a sweep's results lines and `recipe check` read them. verify's scratch stack
(`scratch`) never becomes `current` (simulated hosts only: provision.yml makes every stack it
builds current). The checkpoint: the checkpoint role with the recipe's revision, then its
shard hashes compared with what the role verified. A step already in place changes nothing;
with `check`, Ansible's check mode: nothing is written.

Nothing here prints; the command does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import stack_info
from bwtune import ansible_run
from bwtune.app.promote_service import PlaybookOptions
from bwtune.recipes import apply, check

RECIPE_PLAYBOOK = "recipe_apply.yml"
# provision.yml's task whose stack_layout result names the stack it builds (bwtune provision's too).
FINGERPRINT_TASK = "Work out the stack fingerprint and what differs from the current stack"
SIMULATED_STACK_TASK = "The recipe's stack"
# The tasks that report and do not change: their `changed` is not the host's.
_REPORTING = ("ansible.builtin.debug", "debug", "ansible.builtin.assert", "assert")


@dataclass
class HostStep:
    """What the stack and checkpoint steps did on one host."""

    stack: str | None = None  # the stack's fingerprint (the name of its folder)
    python: str | None = None  # its Python
    simulated: bool = False
    changed: bool = False  # something was written (with check: would be)
    checkpoint: bool = False  # the checkpoint step ran here
    failed: str | None = None  # the failure's line


@dataclass
class StepsRequest:
    inventory: ansible_run.Inventory
    recipe: Mapping[str, Any]
    build_hosts: list[str]  # hosts whose stack inputs differ from the recipe's
    checkpoint_hosts: list[str] = field(default_factory=list)
    check: bool = False
    scratch: bool = False  # verify: the stack does not become current
    options: PlaybookOptions = field(default_factory=PlaybookOptions)


@dataclass
class StepsResult:
    hosts: dict[str, HostStep]
    error: str | None = None  # the playbook did not run
    canceled: bool = False

    @property
    def failed(self) -> dict[str, str]:
        return {host: step.failed for host, step in self.hosts.items() if step.failed}

    def pythons(self) -> dict[str, str]:
        """host -> the Python of the stack built (or in place) there."""
        return {host: step.python for host, step in self.hosts.items() if step.python and not step.failed}


def simulated_packages(recipe: Mapping[str, Any]) -> list[dict[str, str]]:
    """The package metadata a simulated stack records for the recipe's pinned inputs: torch,
    FlashInfer and SGLang (with its commit as pip records a VCS install), as stack facts read
    them. The CUDA of torch's build and sgl-kernel's build are not simulated (no code runs)."""
    components = (recipe.get("stack") or {}).get("components") or {}

    def known(name: str) -> str | None:
        value = components.get(name)
        return None if value in (None, "", check.UNKNOWN) else str(value)

    found: list[dict[str, str]] = []
    for name, dist in (("torch", "torch"), ("flashinfer", "flashinfer-python")):
        if known(name):
            found.append({"name": dist, "version": str(known(name))})
    if known("sglang") or known("sglang_commit"):
        sglang = {"name": "sglang", "version": known("sglang") or "0+unknown"}
        if known("sglang_commit"):
            sglang["commit"] = str(known("sglang_commit"))
        found.append(sglang)
    return found


def not_simulated_parts(recipe: Mapping[str, Any]) -> list[str]:
    """The recipe's pinned inputs a simulated stack cannot carry (in words)."""
    components = (recipe.get("stack") or {}).get("components") or {}
    words = dict(stack_info.COMPONENTS)
    return [
        words[name]
        for name in ("cuda", "sgl_kernel", "sgl_kernel_build")
        if components.get(name) not in (None, "", check.UNKNOWN)
    ]


def extravars(request: StepsRequest) -> dict[str, Any]:
    """recipe_apply.yml's variables (the build roles' ones with them: the recipe pins those)."""
    inputs = apply.build_vars(request.recipe)
    simulated = [h for h in request.build_hosts if request.inventory.simulated(h)]
    real = [h for h in request.build_hosts if not request.inventory.simulated(h)]
    shards = apply.checkpoint_vars(request.recipe).get("shards") or {}
    revision = apply.checkpoint_vars(request.recipe).get("revision")
    found: dict[str, Any] = {
        **inputs,
        "recipe_hosts": list(dict.fromkeys([*request.build_hosts, *request.checkpoint_hosts])),
        "provision_hosts": real,
        "recipe_simulated_hosts": simulated,
        "recipe_fingerprint": apply.stack_fingerprint(inputs),
        "recipe_build_vars": inputs,
        "recipe_packages": simulated_packages(request.recipe),
        "recipe_scratch": request.scratch,
        "recipe_checkpoint_hosts": list(request.checkpoint_hosts),
        "recipe_shards": shards,
    }
    if revision and request.checkpoint_hosts:
        found["checkpoint_revision"] = found["recipe_revision"] = revision
    return found


def prepare(request: StepsRequest) -> StepsResult:
    """recipe_apply.yml on the build and checkpoint hosts; each host's stack and whether
    anything was (with check: would be) written."""
    hosts = {h: HostStep() for h in dict.fromkeys([*request.build_hosts, *request.checkpoint_hosts])}
    if not hosts:
        return StepsResult({})
    if request.scratch and any(not request.inventory.simulated(h) for h in request.build_hosts):
        raise ValueError("a scratch stack is built on simulated hosts only")  # the command refuses first

    def on_event(event: ansible_run.RunnerEvent) -> None:
        host = event.host
        if host is None or host not in hosts or event.kind != "ok":
            return
        step = hosts[host]
        if event.res.get("changed") and event.action not in _REPORTING:
            step.changed = True
        if event.task == SIMULATED_STACK_TASK:
            msg = event.res.get("msg")
            if isinstance(msg, Mapping):
                step.stack, step.python, step.simulated = msg.get("fingerprint"), msg.get("python"), True
        elif event.task == FINGERPRINT_TASK:
            step.stack = event.res.get("fingerprint")
            step.python = event.res.get("python")
        if host in request.checkpoint_hosts and (event.action or "").endswith("checkpoint_facts"):
            step.checkpoint = True

    options = request.options
    with ansible_run.cancel_on_interrupt() as cancel:
        outcome = ansible_run.run_playbook(
            RECIPE_PLAYBOOK,
            request.inventory,
            extravars(request),
            limit=",".join(hosts),
            on_event=on_event,
            cancel=cancel.event,
            forks=options.forks,
            quiet=True,
            verbosity=options.verbosity,
            extra_args=[*options.extra_args, *(["--check"] if request.check else [])],
        )
    if outcome.canceled:
        return StepsResult(hosts, canceled=True)
    for host, failure in outcome.failures.items():
        hosts.setdefault(host, HostStep()).failed = failure.line()
    error = outcome.error
    if error is None and outcome.rc not in (0, None) and not outcome.failures:
        error = f"ansible-playbook exited {outcome.rc}"
    return StepsResult(hosts, error)


def stack_python_vars(pythons: Mapping[str, str], variable: str) -> list[str]:
    """`-e` words that point `variable` (bwtune_stack_python, server_python) at each host's
    built stack; a host not in `pythons` keeps its own (the server role's default, where the
    variable is not bwtune_stack_python itself: that one cannot default to itself)."""
    if not pythons:
        return []
    value = "{{ recipe_stack_pythons[inventory_hostname] }}"
    if variable != "bwtune_stack_python":
        value = (
            "{{ recipe_stack_pythons[inventory_hostname] "
            "| default(lookup('bwtune.sglang.node_var', 'bwtune_stack_python')) }}"
        )
    return ["-e", json.dumps({"recipe_stack_pythons": dict(pythons), variable: value})]


def sweep_vars(pythons: Mapping[str, str], simulated: Sequence[str]) -> list[str]:
    """`-e` values (each a JSON object) for a sweep that launches from each host's scratch
    stack: its facts and, on simulated hosts, the stand-in from that stack's Python."""
    if not pythons:
        return []
    found: dict[str, Any] = {
        "recipe_stack_pythons": dict(pythons),
        "bwtune_stack_python": "{{ recipe_stack_pythons[inventory_hostname] }}",
    }
    if simulated:
        found["sweep_launch_command"] = [
            "{{ recipe_stack_pythons[inventory_hostname] }}",
            "-m",
            "bwtune.standin",
        ]
    return [json.dumps(found)]
