#!/usr/bin/python
# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: stack_facts
short_description: Gather facts about an SGLang software stack (torch, sgl_kernel, FlashInfer, SGLang)
version_added: "0.1.0"
description:
  - Runs a small probe script with the stack's Python interpreter (O(python)) and returns,
    under the fact C(bwtune_stack), the torch version, C(torch.version.cuda), the CUDA arch
    list torch was built for and whether CUDA is usable; the sgl_kernel version, whether its
    NVFP4 ops are present and which GPU targets its compiled kernels carry (read from the
    fatbinary sections of its shared libraries, so C(sm_120a) shows when it is there);
    the FlashInfer version; the SGLang version, its git commit when it comes from a
    checkout, and the flag names and choices of its own argument parser.
  - A C(fingerprint), a short stable hash of all of these and the NVIDIA driver version,
    keys results and build caches.
  - Changes nothing on the node.
options:
  python:
    description:
      - The stack venv's Python interpreter; a bare name (C(python3)) is looked up on PATH.
    type: path
    required: true
  driver_version:
    description:
      - The NVIDIA driver version to put in the fingerprint. When left out, the module asks
        C(nvidia-smi); without one the fingerprint has no driver in it.
    type: str
  include_flags:
    description:
      - Return SGLang's whole flag table (names, choices, aliases) in
        C(bwtune_stack.sglang.flags). Off, only its count and digest are returned.
    type: bool
    default: true
author:
  - bwtune developers (@bwtune)
extends_documentation_fragment:
  - bwtune.sglang.attributes
  - bwtune.sglang.attributes.facts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
notes:
  - The layout of C(bwtune_stack) is described in the collection's docs/facts.md.
  - Importing SGLang's argument parser imports torch; allow a few seconds.
"""

EXAMPLES = r"""
- name: Gather stack facts for the SGLang venv
  bwtune.sglang.stack_facts:
    python: /opt/bwtune/stacks/current/bin/python
    driver_version: "{{ bwtune_gpu.driver_version }}"

- name: Refuse a kernel library without SM120 code on an SM120 node
  ansible.builtin.assert:
    that: bwtune_stack.sgl_kernel.sm120a
    fail_msg: "sgl_kernel {{ bwtune_stack.sgl_kernel.version }} has no sm_120a kernels"
  when: bwtune_gpu.sm == 'sm120'
"""

RETURN = r"""
ansible_facts:
  description: The facts.
  returned: always
  type: dict
  contains:
    bwtune_stack:
      description: Stack facts (see docs/facts.md for every key).
      returned: always
      type: dict
      contains:
        fingerprint:
          description:
            - Short stable hash of what is installed and the driver - torch version, CUDA and arch list,
              sgl_kernel version, SM targets and FP4 ops, FlashInfer, SGLang version, commit and flags digest,
              the driver version. Hosts with the same GPUs and fingerprint are one sweep group.
            - Not the name C(bwtune provision) gives the stack - that is
              RV(ansible_facts.bwtune_stack.build_fingerprint).
          type: str
          returned: always
          sample: 81b74dfb424f
        build_fingerprint:
          description:
            - The provision playbook's name for the stack C(python) is in (its directory under
              C(bwtune_stack_root), which C(current) points at) - a hash of the build inputs (torch pin,
              SGLang commit, CUDA, Python, CPU architecture, FlashInfer, sgl-kernel options).
            - Null for a Python that is not in a provisioned stack.
          type: str
          returned: always
          sample: a400606c593d
        torch:
          description: C(version), C(cuda), C(arch_list), C(cuda_available), C(device_count), C(capabilities).
          type: dict
          returned: always
        sgl_kernel:
          description:
            - C(installed), C(version), C(fp4), C(fp4_ops), C(sm_targets), C(ptx_targets),
              C(sm120a), C(sm100a), C(libraries).
          type: dict
          returned: always
        flashinfer:
          description: C(installed), C(version).
          type: dict
          returned: always
        sglang:
          description: C(installed), C(version), C(git_commit), C(flag_count), C(flags_digest), C(flags).
          type: dict
          returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils._facts.stack_info import StackFactsError, gather


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "python": {"type": "path", "required": True},
            "driver_version": {"type": "str"},
            "include_flags": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    python = module.params["python"]
    if os.sep not in python:
        python = module.get_bin_path(python) or python
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        module.fail_json(msg=f"python: {python} is not an executable file", python=python)

    def run(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv, environ_update={"LC_ALL": "C", "PYTHONDONTWRITEBYTECODE": "1"})

    try:
        facts = gather(
            run,
            python,
            module.get_bin_path("nvidia-smi"),
            module.params["driver_version"],
            module.params["include_flags"],
        )
    except StackFactsError as exc:
        module.fail_json(msg=str(exc), python=python)
    module.exit_json(changed=False, ansible_facts={"bwtune_stack": facts})


if __name__ == "__main__":
    main()
