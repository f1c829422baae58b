#!/usr/bin/python
# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sweep
short_description: Run a planned SGLang backend sweep on this node
version_added: "0.1.0"
description:
  - Plans the sweep from a matrix (the planner refuses, up front, every combination that
    SGLang or the GPU would refuse), then for each launch of the plan starts the server as
    its own process group, waits until it is healthy, checks its outputs are sane, runs the
    matrix's workloads, stops it and checks its port and GPU memory are released, and
    appends one JSON line for the config to the results file (written, flushed, fsync'd).
  - A failure of a config (refused arguments, unsupported hardware, out of memory, start-up
    timeout, crash, wrong output) is recorded and the sweep goes on. A server left running
    after its stop is a failure of the sweep.
  - Resumes. A re-run with the same results file skips configs already measured for the
    same stack fingerprint, unless O(force=true), and first stops any server a killed earlier
    run left behind, found by its in-flight record (written before each start) or by
    C(BWTUNE_SWEEP_RESULTS=<results_path>) in its environment.
  - One sweep per results file and one per node (O(node_lock)) at a time; a launch whose port
    another process takes first is started again on another port.
  - Meant to run under C(async) with C(poll=0), followed by M(bwtune.sglang.sweep_progress).
  - In check mode it returns the plan and launches nothing.
# The options, with their types, defaults, choices and bounds, are defined once in
# module_utils/_contracts/sweep_options.py (which makes the argument_spec); a unit test checks that
# these agree with it (tests/unit/sweep_parts/test_sweep_options.py).
options:
  matrix:
    description:
      - The sweep matrix, as a dict or the path of a YAML or JSON file on the node.
      - See the collection's C(docs/matrix.md).
    type: raw
    required: true
  results_path:
    description:
      - The node's results file (JSON lines).
      - Its folder also gets the server logs and the progress file.
    type: path
    required: true
  run_id:
    description: The id written on each result line. Defaults to the name of the results file's folder.
    type: str
  launch_command:
    description:
      - The command that starts the server, before the config's flags.
      - Defaults to O(python) C(-m sglang.launch_server).
    type: list
    elements: str
  python:
    description: The stack's Python, used for the default O(launch_command).
    type: path
    default: python3
  env:
    description:
      - Extra environment for the server processes.
      - It is shown in the task's result and the node's async job file; put secrets in
        O(secret_env) instead.
    type: dict
    default: {}
  secret_env:
    description:
      - Extra environment for the server processes that must stay secret (an C(HF_TOKEN)).
      - Merged over O(env). Never logged, returned or written by the sweep; a server log
        line that shows one of its values is masked in the results.
    type: dict
    default: {}
  cache_dir:
    description:
      - One local directory for the compile and autotune caches of every launch (FlashInfer,
        Triton, TorchInductor, CUDA, DeepGEMM, SGLang's own), so a launch reuses what earlier
        launches built. Each server's environment gets C(XDG_CACHE_HOME),
        C(FLASHINFER_WORKSPACE_BASE) and C(SGLANG_CACHE_DIR) set to it, C(TRITON_CACHE_DIR),
        C(TORCHINDUCTOR_CACHE_DIR) and C(CUDA_CACHE_PATH) to its C(triton), C(inductor) and
        C(nv) folders, C(SGLANG_DG_CACHE_DIR) and C(DG_JIT_CACHE_DIR) to its C(deep_gemm) folder.
      - Entries of O(env) and O(secret_env) win over these. Unset, the servers keep the
        environment the sweep runs with. The directory must exist (the role makes it).
    type: path
  api_key:
    description: Passed to the server as C(--api-key) and used by the benchmark client. Never recorded.
    type: str
  node:
    description: The name of this node on each result line (the inventory name). Defaults to its hostname.
    type: str
  node_lock:
    description:
      - The lock that lets one sweep at a time run on this node (two would race for ports
        and GPU memory). A second sweep fails at once, naming the run that holds it.
      - Defaults to C(.bwtune-node.lock) in the folder above the run's folder (the results
        root, shared by every run of the node).
    type: path
  host:
    description: The address the server listens on and the client connects to.
    type: str
    default: 127.0.0.1
  port:
    description: The first port to try for each launch (1-65535); the next free one is used.
    type: int
    default: 30000
  strategy:
    description:
      - V(grid) launches every valid config; V(coordinate) varies one axis at a time from a
        baseline and then combines the best of each; V(screen) runs a short workload first
        and the full workloads only where the result is not statistically worse than the best;
        V(adaptive) screens like V(screen) but launches one axis at a time from the baseline,
        then only the configs a main-effects model of the measured results says can still win
        by more than the noise (docs/benchmarks.md, "Search cost").
    type: str
    choices: [grid, coordinate, screen, adaptive]
    default: adaptive
  prior:
    description:
      - What earlier runs of the same matrix on the same hardware group measured, for
        O(strategy=adaptive) (other strategies ignore it); C(bwtune sweep) reads it from the
        results database. V(adaptive) starts from the best config of the prior instead of the
        matrix's baseline and does not try axis values the prior puts far behind
        (docs/benchmarks.md, "Search cost").
      - Each entry names a config by O(prior[].config) (its id) or O(prior[].flags), and gives
        its O(prior[].score). Entries for configs this plan does not launch are ignored.
      - A resumed sweep must get the same prior to make the same decisions.
    type: list
    elements: dict
    default: []
    suboptions:
      config:
        description: The config id (as in the plan and the results lines).
        type: str
      flags:
        description: The config's SGLang flags (as in the plan), when no O(prior[].config) is given.
        type: dict
      score:
        description: The objective's value measured for the config (a positive number).
        type: float
        required: true
  only_configs:
    description:
      - The config ids of the plan's launches this node runs (its share of a fleet sweep, which
        C(bwtune sweep) gives each host of a hardware group). The node plans the whole matrix
        as without it (the same pruned and duplicate lines) but launches only these; the plan's
        other launches get no line and are not listed as left out.
      - Only with O(strategy=grid), whose launches do not depend on what earlier launches
        measured. Each id must be a launch of this node's plan. Unset, every launch runs.
    type: list
    elements: str
  force:
    description: Measure again configs the results file already has for this stack.
    type: bool
    default: false
  simulated:
    description: Mark results as simulated (the bwtune stand-in, not a GPU).
    type: bool
    default: false
  facts:
    description:
      - Facts from M(bwtune.sglang.gpu_facts) and M(bwtune.sglang.stack_facts)
        (C(gpu) and C(stack) keys), to fill C(gpu=auto) and C(version=auto) in the matrix
        and the stack fingerprint of each result.
    type: dict
  gpu:
    description: Overrides the matrix's C(hardware.gpu).
    type: str
  sglang_version:
    description: Overrides the matrix's C(sglang.version).
    type: str
  startup_timeout_s:
    description: How long a server may take to become healthy (more than 0, at most 604800 seconds).
    type: float
    default: 1200
  stop_grace_s:
    description: How long a server gets after SIGTERM before its process group is killed.
    type: float
    default: 30
  release_timeout_s:
    description: How long to wait for the port and GPU memory to be released after a stop.
    type: float
    default: 120
author:
  - bwtune developers (@bwtune)
extends_documentation_fragment:
  - bwtune.sglang.attributes
attributes:
  check_mode:
    support: full
    details: Returns the plan; nothing is launched or written.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Sweep MoE and FP4 GEMM backends
  bwtune.sglang.sweep:
    matrix: "{{ lookup('ansible.builtin.file', 'examples/qwen35-397b-nvfp4-sm120.yml') | from_yaml }}"
    results_path: /var/lib/bwtune/sweeps/2026-11-30/results.jsonl
    python: /opt/sglang/venv/bin/python
    strategy: coordinate
    cache_dir: /var/cache/bwtune-sglang
  async: 172800
  poll: 0
  register: sweep_job

- name: Show the plan only
  bwtune.sglang.sweep:
    matrix: /etc/bwtune/matrix.yml
    results_path: /var/lib/bwtune/sweeps/plan-only/results.jsonl
  check_mode: true
"""

RETURN = r"""
plan:
  description: The plan (the JSON of C(bwtune plan --format json)).
  returned: always
  type: dict
results:
  description:
    - Every line of this run the results file holds, in file order (each launch of a
      re-measured config, and a resumed run's earlier lines, pruned and duplicate ones
      included).
  returned: when not in check mode
  type: list
  elements: dict
best:
  description: The best config by the matrix's objective among those that passed the correctness gate.
  returned: when not in check mode
  type: dict
summary:
  description:
    - Counts by status, launches made and saved by the strategy, timings.
    - C(warnings) lists what the sweep repaired or skipped (a line that is not a result, a
      results file removed mid-run); C(left_out) (a finished run) or C(not_reached) (a
      stopped one) names each launch of the plan without a line, with its point.
  returned: always
  type: dict
"""

import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import node_outcome, sweep_options
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_runner


def main():
    module = AnsibleModule(
        # Every option, its type, default, choices and bounds: module_utils/_contracts/sweep_options.py.
        argument_spec=sweep_options.argument_spec(),
        supports_check_mode=True,
    )
    try:
        options = sweep_runner.SweepOptions.from_params(module.params)
        the_plan = sweep_runner.make_plan(options)
    except sweep_runner.BadInput as exc:
        module.fail_json(msg=str(exc))
    if module.check_mode:
        module.exit_json(changed=False, plan=the_plan, summary=the_plan.get("summary", {}))
    try:
        outcome = sweep_runner.run_sweep(options, the_plan)
    except sweep_runner.SweepFailed as exc:
        module.fail_json(msg=str(exc), **exc.partial)
    except Exception as exc:  # the node must say what broke, not just "MODULE FAILURE"
        module.fail_json(msg="sweep failed: %s" % exc, exception=traceback.format_exc())
    summary = node_outcome.summary_of(outcome)  # the outcome's keys: module_utils/_contracts/node_outcome
    for warning in summary.get("warnings") or []:
        module.warn(warning)  # what the sweep repaired or skipped, as Ansible warnings too
    module.exit_json(changed=bool(summary.get("launches")), plan=the_plan, **outcome)


if __name__ == "__main__":
    main()
