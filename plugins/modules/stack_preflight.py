#!/usr/bin/python
# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: stack_preflight
short_description: Check that a node can build and run the SGLang stack, before anything is built
version_added: "0.1.0"
description:
  - Checks the NVIDIA driver version, the GPU's SM tag (from M(bwtune.sglang.gpu_facts)),
    free disk where the build, the stacks and the checkpoint go, memory and cores for the
    build's job count, the Python that will create the stack venv, glibc, and that the
    node's Ansible Python has C(packaging) (Ansible's pip module needs it).
  - Fails with one line per missing piece, each with the numbers found and needed.
  - Where a disk path is a stack root, unverified stacks of failed builds there (not
    current, used by no running process) count as reclaimable free space, and the line
    or a warning says how much and which (M(bwtune.sglang.stack_layout) C(state=building)
    deletes them before the build).
  - Decides the build's job count from available memory and cores (or checks a requested one
    and refuses it when the jobs would not fit in memory).
  - Changes nothing on the node.
options:
  gpu:
    description: The C(bwtune_gpu) facts of M(bwtune.sglang.gpu_facts). Required unless O(skip_gpu).
    type: dict
  skip_gpu:
    description: Skip the driver and GPU checks (GPU-less test hosts; say so explicitly).
    type: bool
    default: false
  min_driver:
    description: The oldest NVIDIA driver accepted.
    type: str
    default: "580.65.06"
  supported_sm:
    description: SM tags the stack supports.
    type: list
    elements: str
    default: [sm90, sm100, sm120]
  disks:
    description: Free space needed, one entry per place.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Where (need not exist yet; its nearest existing parent is measured).
        type: path
        required: true
      need_gib:
        description: GiB needed there (0 skips the check).
        type: float
        required: true
      what:
        description: What needs the space, for the failure line.
        type: str
        required: true
  python:
    description: The Python that will create the stack venv (a name on PATH or a path).
    type: str
    default: python3
  min_python:
    description: The oldest Python accepted.
    type: str
    default: "3.10"
  glibc_below:
    description: Fail on glibc at or above this version (FlashInfer's JIT breaks on 2.41). Empty skips.
    type: str
    default: "2.41"
  accept_glibc_risk:
    description:
      - Accept a glibc at or above O(glibc_below) - a warning naming the risk instead of a
        failure - FlashInfer kernels that are not precompiled are JIT-compiled when the server
        first needs them, and that compilation can fail there.
    type: bool
    default: false
  writable:
    description:
      - Directories the build writes, each mapped to what goes there (for the failure line).
        They need not exist yet (the nearest existing parent is checked); each must be
        writable by the user the module runs as, else a line names it and says to become
        root or own it.
    type: dict
    default: {}
  min_cores:
    description: The fewest online cores accepted.
    type: int
    default: 1
  gib_per_job:
    description: Memory one build job needs, in GiB.
    type: float
    default: 4
  jobs:
    description: Build jobs wanted; 0 sizes it from memory and cores.
    type: int
    default: 0
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
- name: Check the node before building
  bwtune.sglang.stack_preflight:
    gpu: "{{ bwtune_gpu }}"
    disks:
      - {path: /var/tmp/bwtune-build, need_gib: 60, what: the sgl-kernel build}
    gib_per_job: 4
  register: preflight
"""

RETURN = r"""
jobs:
  description: The build job count (sized from memory and cores, or the requested one).
  type: int
  returned: always
cores:
  description: Online cores.
  type: int
  returned: always
mem_available_gib:
  description: Available memory in GiB.
  type: float
  returned: always
python_version:
  description: Version of O(python), null when it did not run.
  type: str
  returned: always
glibc_version:
  description: The node's glibc version.
  type: str
  returned: always
glibc_risk:
  description: The risk taken with O(accept_glibc_risk) on a glibc the check would refuse, else null.
  type: str
  returned: always
reclaimable:
  description:
    - Per O(disks) path that is a stack root holding failed attempts (unverified stacks
      that are not current and that no running process uses), their sizes in bytes
      (C(stacks)) and total (C(gib)). That space counts as free, since stack_layout
      C(state=building) deletes them before the build.
  type: dict
  returned: always
failures:
  description: One line per missing piece (empty on success).
  type: list
  elements: str
  returned: always
"""

import importlib.util
import os
import pwd
import sys

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils._provision import preflight as pf
from ansible_collections.bwtune.sglang.plugins.module_utils._provision import stack_root as sl


def check_disk(module: AnsibleModule, disk: dict, reclaimable: dict) -> list[str]:
    """pf.check_disk, counting failed stack attempts under a stack root as reclaimable.

    A failed or interrupted build leaves an unverified stack (gigabytes: torch) that no
    one needs; stack_layout state=building deletes those before the next build, so their
    space counts as free here, and the line or a warning says so.
    """
    failed = sl.failed_stacks(disk["path"]) if os.path.isdir(disk["path"]) else []
    if not failed or disk["need_gib"] <= 0:
        return pf.check_disk(disk["path"], disk["need_gib"], disk["what"])
    sizes = {fp: sl.disk_bytes(sl.stack_dir(disk["path"], fp)) for fp in failed}
    where, free = pf.free_bytes(disk["path"])
    extra = sum(sizes.values())
    reclaimable[disk["path"]] = {"stacks": sizes, "gib": round(extra / pf.GIB, 1)}
    held = (
        f"{extra / pf.GIB:.1f} GiB more is held by {len(failed)} unverified stack(s) of failed builds "
        f"({', '.join(failed)}), which provisioning deletes before it builds"
    )
    if free + extra < disk["need_gib"] * pf.GIB:
        return [
            f"disk: {free / pf.GIB:.1f} GiB free at {where} and {held}; "
            f"{disk['what']} needs {disk['need_gib']:g} GiB"
        ]
    if free < disk["need_gib"] * pf.GIB:
        module.warn(
            f"disk: {free / pf.GIB:.1f} GiB free at {where}, {disk['what']} needs {disk['need_gib']:g} GiB: "
            f"enough only because {held}"
        )
    return []


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "gpu": {"type": "dict"},
            "skip_gpu": {"type": "bool", "default": False},
            "min_driver": {"type": "str", "default": "580.65.06"},
            "supported_sm": {"type": "list", "elements": "str", "default": ["sm90", "sm100", "sm120"]},
            "disks": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "path": {"type": "path", "required": True},
                    "need_gib": {"type": "float", "required": True},
                    "what": {"type": "str", "required": True},
                },
            },
            "python": {"type": "str", "default": "python3"},
            "min_python": {"type": "str", "default": "3.10"},
            "glibc_below": {"type": "str", "default": "2.41"},
            "accept_glibc_risk": {"type": "bool", "default": False},
            "writable": {"type": "dict", "default": {}},
            "min_cores": {"type": "int", "default": 1},
            "gib_per_job": {"type": "float", "default": 4},
            "jobs": {"type": "int", "default": 0},
        },
        required_if=[("skip_gpu", False, ("gpu",))],
        supports_check_mode=True,
    )
    p = module.params
    failures: list[str] = []
    if not p["skip_gpu"]:
        failures += pf.check_driver(p["gpu"].get("driver_version"), p["min_driver"])
        failures += pf.check_gpu(p["gpu"], p["supported_sm"])
    reclaimable: dict = {}
    for disk in p["disks"]:
        failures += check_disk(module, disk, reclaimable)

    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        user = f"uid {os.geteuid()}"
    for path, what in sorted(p["writable"].items()):
        failures += pf.check_writable(path, str(what), user)

    python = p["python"] if os.sep in p["python"] else module.get_bin_path(p["python"])
    python_version = None
    if python and os.access(python, os.X_OK):
        rc, out, _err = module.run_command(
            [python, "-c", "import platform; print(platform.python_version())"]
        )
        python_version = out.strip() if rc == 0 else None
    failures += pf.check_python(python_version, p["min_python"])

    libc = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else None
    glibc = libc.split()[-1] if libc and libc.startswith("glibc") else None
    failures += pf.check_glibc(glibc, p["glibc_below"], p["accept_glibc_risk"])
    glibc_risk = pf.glibc_warning(glibc, p["glibc_below"], p["accept_glibc_risk"])
    if glibc_risk:
        module.warn(glibc_risk)

    # The build roles install with Ansible's pip module, which imports `packaging` on the node.
    if importlib.util.find_spec("packaging") is None:
        failures.append(
            f"ansible python: {sys.executable} has no 'packaging' module, which Ansible's pip module "
            "needs (install python3-packaging)"
        )

    cores = len(os.sched_getaffinity(0))
    failures += pf.check_cores(cores, p["min_cores"])
    with open("/proc/meminfo", encoding="ascii") as fh:
        mem = pf.mem_available_bytes(fh.read())
    jobs, job_failure = pf.build_jobs(mem, cores, p["gib_per_job"], p["jobs"] or None)
    if job_failure:
        failures.append(job_failure)

    result = {
        "changed": False,
        "jobs": jobs,
        "cores": cores,
        "mem_available_gib": round(mem / pf.GIB, 1),
        "python_version": python_version,
        "glibc_version": glibc,
        "glibc_risk": glibc_risk,
        "failures": failures,
        "reclaimable": reclaimable,
    }
    if failures:
        module.fail_json(msg=f"preflight: {len(failures)} problem(s): " + "; ".join(failures), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
