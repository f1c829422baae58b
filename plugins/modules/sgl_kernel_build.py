#!/usr/bin/python
# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sgl_kernel_build
short_description: Build the sgl-kernel wheel against a stack venv's torch, verify its GPU targets, cache it
version_added: "0.1.0"
description:
  - When O(cache_dir) already holds a verified sgl-kernel wheel (C(sglang_kernel-*) or
    C(sgl_kernel-*)), returns it and builds nothing.
  - Otherwise runs C(python -m pip wheel --no-build-isolation --no-deps) on O(source) with
    the stack venv's Python (so the build uses that venv's torch), the CMake options from
    O(options) in C(CMAKE_ARGS), and O(jobs) in C(MAX_JOBS) and C(CMAKE_BUILD_PARALLEL_LEVEL).
    The whole output goes to O(work_dir)/build.log; a failed build fails the task with the
    log's last lines.
  - Reads the fatbinary headers of every shared library in the built wheel and fails, without
    caching the wheel, when a required target is missing (C(sm_120a) whenever
    C(enable_fp4) is on, C(sm_100a) whenever C(enable_sm100a) is on, plus O(require_targets)).
    Only a verified wheel enters O(cache_dir) (written under a temporary name, then renamed).
options:
  python:
    description: The stack venv's Python (torch, scikit-build-core, cmake and ninja installed in it).
    type: path
    required: true
  source:
    description: The sgl-kernel source directory (C(<SGLang checkout>/sgl-kernel)).
    type: path
    required: true
  cache_dir:
    description: The wheel cache directory of this stack fingerprint.
    type: path
    required: true
  work_dir:
    description: Scratch directory for the wheel and C(build.log).
    type: path
    required: true
  options:
    description:
      - Build options; keys C(enable_fp4), C(enable_sm100a), C(enable_sm90a),
        C(enable_below_sm90), C(enable_ccache) (bools) and C(compile_threads) (int) become
        C(-DSGL_KERNEL_ENABLE_FP4=ON) and so on.
    type: dict
    default: {}
  cmake_args:
    description: More C(-D...) arguments appended to C(CMAKE_ARGS).
    type: list
    elements: str
    default: []
  require_targets:
    description: More sm targets the libraries must carry (for example C(sm_90) for the GPU at hand).
    type: list
    elements: str
    default: []
  jobs:
    description: Parallel build jobs (size it with M(bwtune.sglang.stack_preflight)).
    type: int
    required: true
  nvcc:
    description: The nvcc to build with (C(CUDACXX)); its directory goes first on PATH.
    type: path
  environment:
    description: More environment variables for the build.
    type: dict
    default: {}
  build:
    description:
      - Whether this host may build. Off (a fleet host whose group builds elsewhere, or a
        builder that took the controller's verified wheel for this fingerprint), a missing
        cached wheel fails the task instead.
    type: bool
    default: true
  mode:
    description:
      - C(build) builds when the cache has no wheel. Only one build of a O(work_dir) runs at
        a time; it holds a lock (flock) on C(<work_dir>.lock), inherited by the build's
        processes, and a second one fails with C(a build of <fingerprint> is already running),
        naming the build's pid and start. The build runs in its own process group; when the controller goes
        away (this module's stdout breaks, as when the run was cancelled or lost its connection), on
        SIGTERM, SIGHUP or SIGINT, or when this module dies, the whole group is stopped
        (SIGTERM, SIGKILL after 10 s) and O(work_dir) removed.
      - C(claim), before the source is prepared, fails the same way while a build of
        O(work_dir) runs (when O(build) is on; off, it leaves it alone), and removes what an
        interrupted build left in O(work_dir).
    type: str
    choices: [build, claim]
    default: build
author:
  - bwtune developers (@bwtune)
extends_documentation_fragment:
  - bwtune.sglang.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Build sgl-kernel with FP4 (sm_120a)
  bwtune.sglang.sgl_kernel_build:
    python: /opt/bwtune/stacks/3f9a0c1d2e4b/bin/python
    source: /var/tmp/bwtune-build/3f9a0c1d2e4b/sglang/sgl-kernel
    cache_dir: /var/cache/bwtune/wheels/3f9a0c1d2e4b
    work_dir: /var/tmp/bwtune-build/3f9a0c1d2e4b/work
    options: {enable_fp4: true, enable_sm100a: false, compile_threads: 1}
    jobs: 8
    nvcc: /usr/local/cuda-13.0/bin/nvcc
"""

RETURN = r"""
wheel:
  description: The verified wheel in O(cache_dir) (in check mode without one, null).
  type: str
  returned: always
built:
  description: Whether this task compiled anything.
  type: bool
  returned: always
targets:
  description: C(sm) and C(ptx) targets found in the wheel's libraries, and C(libraries) per file.
  type: dict
  returned: when a wheel was read
required_targets:
  description: The sm targets the wheel had to carry.
  type: list
  elements: str
  returned: always
log:
  description: The build log (when a build ran).
  type: str
  returned: when a build ran
cancelled:
  description: The build was stopped (the controller went away, or a signal); O(work_dir) was removed.
  type: bool
  returned: when a build was cancelled
removed:
  description: The directory an interrupted build left, removed (O(mode=claim)).
  type: str
  returned: when something was removed
log_tail:
  description: The build log's last lines (when the build failed).
  type: list
  elements: str
  returned: on failure
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils._provision import kernel_build as kb


def verify(module: AnsibleModule, wheel: str, required: list[str], result: dict) -> dict:
    targets = kb.wheel_targets(wheel)
    result["targets"] = targets
    if not targets["libraries"]:
        module.fail_json(msg=f"{os.path.basename(wheel)} has no CUDA shared library to read", **result)
    missing = kb.missing_targets(targets, required)
    if missing:
        have = ", ".join(targets["sm"]) or "no sm code"
        module.fail_json(
            msg=(
                f"{os.path.basename(wheel)} carries {have}; missing {', '.join(missing)} "
                "(SGL_KERNEL_ENABLE_FP4 on and CUDA >= 12.8 are needed for sm_120a); the wheel was not cached"
            ),
            missing_targets=missing,
            **result,
        )
    return targets


def claim(module: AnsibleModule, p: dict, result: dict) -> None:
    """mode=claim: refuse while a build of this directory runs (when this run would build);
    remove what an interrupted build left."""
    holder = kb.probe_lock(p["work_dir"])
    if holder:
        if p["build"]:
            module.fail_json(msg=kb.running_message(p["work_dir"], holder), **result)
        module.exit_json(msg=f"a build runs in {p['work_dir']} ({holder}); left alone", **result)
    if kb.interrupted(p["work_dir"]):
        result.update(changed=True, removed=p["work_dir"])
        if not module.check_mode:
            shutil.rmtree(p["work_dir"])
        result["msg"] = f"removed what an interrupted build left in {p['work_dir']}"
    module.exit_json(**result)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "python": {"type": "path", "required": True},
            "source": {"type": "path", "required": True},
            "cache_dir": {"type": "path", "required": True},
            "work_dir": {"type": "path", "required": True},
            "options": {"type": "dict", "default": {}},
            "cmake_args": {"type": "list", "elements": "str", "default": []},
            "require_targets": {"type": "list", "elements": "str", "default": []},
            "jobs": {"type": "int", "required": True},
            "nvcc": {"type": "path"},
            "environment": {"type": "dict", "default": {}},
            "build": {"type": "bool", "default": True},
            "mode": {"type": "str", "choices": ["build", "claim"], "default": "build"},
        },
        supports_check_mode=True,
    )
    p = module.params
    required = kb.required_targets(p["options"], p["require_targets"])
    result: dict = {"changed": False, "built": False, "wheel": None, "required_targets": required}
    if p["mode"] == "claim":
        claim(module, p, result)

    cached = kb.find_wheels(p["cache_dir"])
    if cached:
        result["wheel"] = cached[-1]
        verify(module, cached[-1], required, result)
        module.exit_json(**result)
    if not p["build"] and module.check_mode:
        result.update(
            changed=True,
            msg="would receive a verified wheel built elsewhere "
            "(the controller's wheelhouse, or the group's builder)",
        )
        module.exit_json(**result)
    if not p["build"]:
        module.fail_json(
            msg=f"no verified sgl-kernel wheel in {p['cache_dir']}, and this host does not build "
            "(its group's builder does)",
            **result,
        )
    if module.check_mode:
        result.update(changed=True, msg=f"would build sgl-kernel from {p['source']}")
        module.exit_json(**result)
    if p["jobs"] < 1:
        module.fail_json(msg=f"jobs must be at least 1, got {p['jobs']}", **result)
    if not os.path.isfile(os.path.join(p["source"], "pyproject.toml")):
        module.fail_json(
            msg=f"source: {p['source']} has no pyproject.toml (not an sgl-kernel directory)", **result
        )

    try:
        lock_fd = kb.take_lock(p["work_dir"])
    except kb.BuildRunning as exc:
        module.fail_json(msg=str(exc), **result)
    cached = kb.find_wheels(p["cache_dir"])
    if cached:  # a build that held the lock until now cached it
        os.close(lock_fd)
        result["wheel"] = cached[-1]
        verify(module, cached[-1], required, result)
        module.exit_json(**result)
    marker = os.path.join(p["work_dir"], kb.MARKER)
    dist = os.path.join(p["work_dir"], "dist")
    shutil.rmtree(dist, ignore_errors=True)
    os.makedirs(dist)
    with open(marker, "w", encoding="ascii") as fh:
        fh.write(f"{os.getpid()}\n")
    log = os.path.join(p["work_dir"], "build.log")
    result["log"] = log
    base = dict(os.environ)
    base["PATH"] = os.path.dirname(p["python"]) + os.pathsep + os.environ.get("PATH", "")
    base.update({k: str(v) for k, v in p["environment"].items()})
    env = kb.build_env(
        base,
        p["jobs"],
        kb.cmake_args(p["options"], p["cmake_args"]),
        p["nvcc"],
    )
    try:
        rc = kb.run_build(kb.wheel_argv(p["python"], p["source"], dist), env, log, lock_fd)
    except kb.Cancelled as exc:
        shutil.rmtree(p["work_dir"], ignore_errors=True)
        os.close(lock_fd)
        result["cancelled"] = True
        try:
            module.fail_json(
                msg=f"sgl-kernel build cancelled ({exc}): its process group was stopped and "
                f"{p['work_dir']} removed; nothing was cached",
                **result,
            )
        except BrokenPipeError:  # no one is there to read it
            os._exit(1)
    os.unlink(marker)
    result["built"] = True
    if rc != 0:
        tail = kb.log_tail(log)
        result["log_tail"] = tail
        module.fail_json(
            msg=f"sgl-kernel build failed (exit {rc}); log {log} ends: " + " | ".join(tail[-8:]), **result
        )
    wheels = kb.find_wheels(dist)
    if len(wheels) != 1:
        module.fail_json(
            msg=f"the build made {len(wheels)} sgl-kernel wheels in {dist}, expected one", **result
        )
    verify(module, wheels[0], required, result)

    os.makedirs(p["cache_dir"], exist_ok=True)
    final = os.path.join(p["cache_dir"], os.path.basename(wheels[0]))
    tmp = os.path.join(p["cache_dir"], f".{os.path.basename(wheels[0])}.tmp")
    shutil.copyfile(wheels[0], tmp)
    os.replace(tmp, final)
    os.close(lock_fd)
    result.update(changed=True, wheel=final)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
