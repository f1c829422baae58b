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
      - Whether this host may build. Off (a fleet host whose group builds elsewhere), a
        missing cached wheel fails the task instead.
    type: bool
    default: true
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
log_tail:
  description: The build log's last lines (when the build failed).
  type: list
  elements: str
  returned: on failure
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils import kernel_build as kb


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
        },
        supports_check_mode=True,
    )
    p = module.params
    required = kb.required_targets(p["options"], p["require_targets"])
    result: dict = {"changed": False, "built": False, "wheel": None, "required_targets": required}

    cached = kb.find_wheels(p["cache_dir"])
    if cached:
        result["wheel"] = cached[-1]
        verify(module, cached[-1], required, result)
        module.exit_json(**result)
    if not p["build"] and module.check_mode:
        result.update(changed=True, msg="would receive the wheel from the group's builder")
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

    dist = os.path.join(p["work_dir"], "dist")
    shutil.rmtree(dist, ignore_errors=True)
    os.makedirs(dist)
    log = os.path.join(p["work_dir"], "build.log")
    result["log"] = log
    base = {"PATH": os.path.dirname(p["python"]) + os.pathsep + os.environ.get("PATH", "")}
    base.update({k: str(v) for k, v in p["environment"].items()})
    env = kb.build_env(
        base,
        p["jobs"],
        kb.cmake_args(p["options"], p["cmake_args"]),
        p["nvcc"],
    )
    rc, out, err = module.run_command(kb.wheel_argv(p["python"], p["source"], dist), environ_update=env)
    with open(log, "w", encoding="utf-8") as fh:
        fh.write(out)
        fh.write(err)
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
    result.update(changed=True, wheel=final)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
