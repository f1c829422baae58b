#!/usr/bin/python
# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather facts about the node's NVIDIA GPUs
version_added: "0.1.0"
description:
  - Runs C(nvidia-smi -q -x), C(nvidia-smi --query-gpu=index,uuid,compute_cap) and
    C(nvidia-smi topo -m) and returns what bwtune decides with, under the fact
    C(bwtune_gpu).
  - Per GPU, the index, name, uuid, compute capability and C(sm) tag (sm90, sm100, sm120),
    memory total and used, power limit, PCIe generation and width, and the processes
    holding GPU memory. For the node, the GPU count, one C(sm) (or C(mixed)),
    C(fp4_native), the interconnect between GPUs (nvlink, partial-nvlink, pcie) and
    C(pcie_only).
  - A node without nvidia-smi, with a driver/library mismatch (C(Failed to initialize
    NVML)), or with no GPUs gets C(available=false) and a C(reason) code and C(message),
    not a failed task, so a later task can fail with that message.
  - Changes nothing on the node.
options:
  nvidia_smi:
    description:
      - The nvidia-smi program to run, a name looked up on PATH or a full path.
    type: str
    default: nvidia-smi
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
  - The layout of C(bwtune_gpu) is described in the collection's docs/facts.md.
"""

EXAMPLES = r"""
- name: Gather GPU facts
  bwtune.sglang.gpu_facts:

- name: Stop when the node has no usable GPU
  ansible.builtin.assert:
    that: bwtune_gpu.available
    fail_msg: "{{ bwtune_gpu.message }}"

- name: Show the node's GPUs
  ansible.builtin.debug:
    msg: "{{ bwtune_gpu.message }} ({{ bwtune_gpu.sm }}, {{ bwtune_gpu.interconnect }})"
  when: bwtune_gpu.available
"""

RETURN = r"""
ansible_facts:
  description: The facts.
  returned: always
  type: dict
  contains:
    bwtune_gpu:
      description: GPU facts of the node (see docs/facts.md for every key).
      returned: always
      type: dict
      contains:
        available:
          description: Whether nvidia-smi answered and listed at least one GPU.
          type: bool
          returned: always
        reason:
          description:
            - Why no GPU is usable, null when RV(ansible_facts.bwtune_gpu.available) is true.
            - One of C(nvidia-smi-missing), C(nvml-init-failed), C(driver-not-loaded),
              C(no-gpus), C(nvidia-smi-failed), C(parse-error).
          type: str
          returned: always
        message:
          description: One line for people, for example C(8 x NVIDIA RTX PRO 6000 Blackwell Server Edition).
          type: str
          returned: always
        driver_version:
          description: The NVIDIA driver version.
          type: str
          returned: always
          sample: "580.159.04"
        cuda_version:
          description: The highest CUDA version the driver supports.
          type: str
          returned: always
          sample: "13.0"
        count:
          description: How many GPUs the node has.
          type: int
          returned: always
        gpus:
          description: One dict per GPU, ordered by index.
          type: list
          elements: dict
          returned: always
        sm:
          description: The node's SM tag (C(sm90), C(sm100), C(sm120)), C(mixed), or null.
          type: str
          returned: always
          sample: sm120
        fp4_native:
          description: Whether every GPU has native FP4 tensor cores (SM100 or SM120 families).
          type: bool
          returned: always
        interconnect:
          description: C(nvlink), C(partial-nvlink), C(pcie), C(none) (one GPU) or C(unknown).
          type: str
          returned: always
        pcie_only:
          description: True when the node has two or more GPUs and no NVLink between any of them.
          type: bool
          returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils._facts.gpu_info import gather


def main() -> None:
    module = AnsibleModule(
        argument_spec={"nvidia_smi": {"type": "str", "default": "nvidia-smi"}},
        supports_check_mode=True,
    )
    nvidia_smi = module.get_bin_path(module.params["nvidia_smi"])

    def run(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv, environ_update={"LC_ALL": "C"})

    facts = gather(run, nvidia_smi, module.params["nvidia_smi"])
    module.exit_json(changed=False, ansible_facts={"bwtune_gpu": facts})


if __name__ == "__main__":
    main()
