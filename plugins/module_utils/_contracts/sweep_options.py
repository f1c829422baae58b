# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The sweep module's options, defined once (issue 22: each contract owned once).

One row per option (name, type, default, choices, bounds, description), in the manner of
community.docker's ``OptionGroup``. From it come the module's ``argument_spec``
(:func:`argument_spec`) and ``SweepOptions``' defaults and bounds (:func:`value`), so a
default cannot differ between the module and the code that runs the sweep. The module's
DOCUMENTATION stays a literal YAML string (ansible-doc and ansible-test read it without
running the module); tests/unit/sweep_parts/test_sweep_options.py checks it, and the sweep
role's ``sweep_<option>`` variables (meta/argument_specs.yml, defaults/main.yml,
tasks/validate.yml), against this table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract


class Option:
    """One option of the sweep module.

    ``minimum``/``maximum`` bound a number (``exclusive_minimum``: it must be more than
    ``minimum``); ``doc`` is the option's description, exactly as DOCUMENTATION gives it.
    """

    def __init__(
        self,
        name: str,
        type: str,
        default: Any = None,
        required: bool = False,
        elements: str | None = None,
        choices: Sequence[str] | None = None,
        no_log: bool = False,
        minimum: float | None = None,
        maximum: float | None = None,
        exclusive_minimum: bool = False,
        suboptions: Sequence[Option] = (),
        required_one_of: Sequence[tuple[str, ...]] = (),
        doc: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.type = type
        self.default = default
        self.required = required
        self.elements = elements
        self.choices = list(choices) if choices is not None else None
        self.no_log = no_log
        self.minimum = minimum
        self.maximum = maximum
        self.exclusive_minimum = exclusive_minimum
        self.suboptions = tuple(suboptions)
        self.required_one_of = [tuple(group) for group in required_one_of]
        self.doc = list(doc)

    def spec(self) -> dict[str, Any]:
        """This option's entry of an AnsibleModule argument_spec."""
        out: dict[str, Any] = {"type": self.type}
        if self.required:
            out["required"] = True
        if self.default is not None:
            out["default"] = _copy(self.default)
        if self.elements:
            out["elements"] = self.elements
        if self.choices is not None:
            out["choices"] = list(self.choices)
        if self.no_log:
            out["no_log"] = True
        if self.suboptions:
            out["options"] = {sub.name: sub.spec() for sub in self.suboptions}
        if self.required_one_of:
            out["required_one_of"] = [list(group) for group in self.required_one_of]
        return out

    def bounds_text(self) -> str:
        """The bounds as the docs say them, e.g. ``1-65535``; empty when unbounded."""
        if self.minimum is None and self.maximum is None:
            return ""
        if self.exclusive_minimum:
            low = "more than %s" % _number(self.minimum)
            return low if self.maximum is None else "%s, at most %s" % (low, _number(self.maximum))
        if self.maximum is None:
            return "at least %s" % _number(self.minimum)
        return "%s-%s" % (_number(self.minimum), _number(self.maximum))

    def check(self, given: Any) -> Any:
        """`given`, or the default when it is None, within the bounds; ValueError naming the option."""
        if given is None:
            return _copy(self.default)
        if self.minimum is None and self.maximum is None:
            return given
        try:
            number = float(given)
        except (TypeError, ValueError):
            raise ValueError("%s: %r is not a number" % (self.name, given)) from None
        low_ok = self.minimum is None or (
            number > self.minimum if self.exclusive_minimum else number >= self.minimum
        )
        if math.isnan(number) or not (low_ok and (self.maximum is None or number <= self.maximum)):
            raise ValueError("%s: %r is out of range (%s)" % (self.name, given, self.bounds_text()))
        return given


def _copy(default: Any) -> Any:
    """A fresh list/dict each time, so that no caller shares (and mutates) the table's."""
    if isinstance(default, list):
        return list(default)
    if isinstance(default, dict):
        return dict(default)
    return default


def _number(value: float | None) -> str:
    return "%g" % value if value is not None else ""


OPTIONS: tuple[Option, ...] = (
    Option(
        "matrix",
        "raw",
        required=True,
        doc=(
            "The sweep matrix, as a dict or the path of a YAML or JSON file on the node.",
            "See the collection's C(docs/matrix.md).",
        ),
    ),
    Option(
        "results_path",
        "path",
        required=True,
        doc=(
            "The node's results file (JSON lines).",
            "Its folder also gets the server logs and the progress file.",
        ),
    ),
    Option(
        "run_id",
        "str",
        doc=("The id written on each result line. Defaults to the name of the results file's folder.",),
    ),
    Option(
        "launch_command",
        "list",
        elements="str",
        doc=(
            "The command that starts the server, before the config's flags.",
            "Defaults to O(python) C(-m sglang.launch_server).",
        ),
    ),
    Option(
        "python",
        "path",
        default="python3",
        doc=("The stack's Python, used for the default O(launch_command).",),
    ),
    Option(
        "env",
        "dict",
        default={},
        doc=(
            "Extra environment for the server processes.",
            (
                "It is shown in the task's result and the node's async job file; put secrets in "
                "O(secret_env) instead."
            ),
        ),
    ),
    Option(
        "secret_env",
        "dict",
        default={},
        no_log=True,
        doc=(
            "Extra environment for the server processes that must stay secret (an C(HF_TOKEN)).",
            (
                "Merged over O(env). Never logged, returned or written by the sweep; a server log "
                "line that shows one of its values is masked in the results."
            ),
        ),
    ),
    Option(
        "cache_dir",
        "path",
        doc=(
            (
                "One local directory for the compile and autotune caches of every launch "
                "(FlashInfer, Triton, TorchInductor, CUDA, DeepGEMM, SGLang's own), so a launch "
                "reuses what earlier launches built. Each server's environment gets "
                "C(XDG_CACHE_HOME), C(FLASHINFER_WORKSPACE_BASE) and C(SGLANG_CACHE_DIR) set to it, "
                "C(TRITON_CACHE_DIR), C(TORCHINDUCTOR_CACHE_DIR) and C(CUDA_CACHE_PATH) to its "
                "C(triton), C(inductor) and C(nv) folders, C(SGLANG_DG_CACHE_DIR) and "
                "C(DG_JIT_CACHE_DIR) to its C(deep_gemm) folder."
            ),
            (
                "Entries of O(env) and O(secret_env) win over these. Unset, the servers keep the "
                "environment the sweep runs with. The directory must exist (the role makes it)."
            ),
        ),
    ),
    Option(
        "api_key",
        "str",
        no_log=True,
        doc=("Passed to the server as C(--api-key) and used by the benchmark client. Never recorded.",),
    ),
    Option(
        "node",
        "str",
        doc=("The name of this node on each result line (the inventory name). Defaults to its hostname.",),
    ),
    Option(
        "node_lock",
        "path",
        doc=(
            (
                "The lock that lets one sweep at a time run on this node (two would race for ports "
                "and GPU memory). A second sweep fails at once, naming the run that holds it."
            ),
            (
                "Defaults to C(.bwtune-node.lock) in the folder above the run's folder (the results "
                "root, shared by every run of the node)."
            ),
        ),
    ),
    Option(
        "host",
        "str",
        default="127.0.0.1",
        doc=("The address the server listens on and the client connects to.",),
    ),
    Option(
        "port",
        "int",
        default=30000,
        minimum=1,
        maximum=65535,
        doc=("The first port to try for each launch (1-65535); the next free one is used.",),
    ),
    Option(
        "strategy",
        "str",
        # adaptive: the strategies and the one default are the results contract's.
        default=results_contract.DEFAULT_STRATEGY,
        choices=results_contract.STRATEGIES,
        doc=(
            (
                "V(grid) launches every valid config; V(coordinate) varies one axis at a time from a"
                " baseline and then combines the best of each; V(screen) runs a short workload first"
                " and the full workloads only where the result is not statistically worse than the "
                "best; V(adaptive) screens like V(screen) but launches one axis at a time from the "
                "baseline, then only the configs a main-effects model of the measured results says "
                'can still win by more than the noise (docs/benchmarks.md, "Search cost").'
            ),
        ),
    ),
    Option(
        "prior",
        "list",
        default=[],
        elements="dict",
        suboptions=(
            Option("config", "str", doc=("The config id (as in the plan and the results lines).",)),
            Option(
                "flags",
                "dict",
                doc=("The config's SGLang flags (as in the plan), when no O(prior[].config) is given.",),
            ),
            Option(
                "score",
                "float",
                required=True,
                doc=("The objective's value measured for the config (a positive number).",),
            ),
        ),
        required_one_of=[("config", "flags")],
        doc=(
            (
                "What earlier runs of the same matrix on the same hardware group measured, for "
                "O(strategy=adaptive) (other strategies ignore it); C(bwtune sweep) reads it from "
                "the results database. V(adaptive) starts from the best config of the prior instead "
                "of the matrix's baseline and does not try axis values the prior puts far behind "
                '(docs/benchmarks.md, "Search cost").'
            ),
            (
                "Each entry names a config by O(prior[].config) (its id) or O(prior[].flags), and "
                "gives its O(prior[].score). Entries for configs this plan does not launch are "
                "ignored."
            ),
            "A resumed sweep must get the same prior to make the same decisions.",
        ),
    ),
    Option(
        "only_configs",
        "list",
        elements="str",
        doc=(
            (
                "The config ids of the plan's launches this node runs (its share of a fleet sweep, "
                "which C(bwtune sweep) gives each host of a hardware group). The node plans the "
                "whole matrix as without it (the same pruned and duplicate lines) but launches only "
                "these; the plan's other launches get no line and are not listed as left out."
            ),
            (
                "Only with O(strategy=grid), whose launches do not depend on what earlier launches "
                "measured. Each id must be a launch of this node's plan. Unset, every launch runs."
            ),
        ),
    ),
    Option(
        "force",
        "bool",
        default=False,
        doc=("Measure again configs the results file already has for this stack.",),
    ),
    Option(
        "simulated",
        "bool",
        default=False,
        doc=("Mark results as simulated (the bwtune stand-in, not a GPU).",),
    ),
    Option(
        "facts",
        "dict",
        doc=(
            (
                "Facts from M(bwtune.sglang.gpu_facts) and M(bwtune.sglang.stack_facts) (C(gpu) and "
                "C(stack) keys), to fill C(gpu=auto) and C(version=auto) in the matrix and the stack"
                " fingerprint of each result."
            ),
        ),
    ),
    Option(
        "gpu",
        "str",
        doc=("Overrides the matrix's C(hardware.gpu).",),
    ),
    Option(
        "sglang_version",
        "str",
        doc=("Overrides the matrix's C(sglang.version).",),
    ),
    Option(
        "startup_timeout_s",
        "float",
        default=1200.0,
        minimum=0,
        exclusive_minimum=True,
        maximum=604800,
        doc=("How long a server may take to become healthy (more than 0, at most 604800 seconds).",),
    ),
    Option(
        "stop_grace_s",
        "float",
        default=30.0,
        doc=("How long a server gets after SIGTERM before its process group is killed.",),
    ),
    Option(
        "release_timeout_s",
        "float",
        default=120.0,
        doc=("How long to wait for the port and GPU memory to be released after a stop.",),
    ),
)

BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}
DEFAULTS: dict[str, Any] = {option.name: option.default for option in OPTIONS}


def argument_spec() -> dict[str, dict[str, Any]]:
    """The sweep module's AnsibleModule argument_spec (a fresh copy each call)."""
    return {option.name: option.spec() for option in OPTIONS}


def value(params: Mapping[str, Any], name: str) -> Any:
    """The value of option `name` in `params`: given (within its bounds) or its one default."""
    return BY_NAME[name].check(params.get(name))


def names() -> list[str]:
    return [option.name for option in OPTIONS]
