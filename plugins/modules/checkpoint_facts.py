#!/usr/bin/python
# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: checkpoint_facts
short_description: Gather facts about a Hugging Face model checkpoint directory
version_added: "0.1.0"
description:
  - Reads C(config.json), C(hf_quant_config.json), C(model.safetensors.index.json) and the
    header of each safetensors shard, and returns under the fact C(bwtune_checkpoint) the
    architectures, the text config (layers, experts, hidden size, attention layer types),
    the MTP layers and how many MTP tensors the weight map holds, the quantization
    (ModelOpt NVFP4 quant_algo, group_size, KV cache quantization, excluded modules and
    whether the MTP layers are excluded and so run in BF16), completeness, total size, and
    the SGLang flags the checkpoint implies.
  - Completeness means every shard named in the index exists, has a readable header, is
    at least as long as its header says, and holds the tensors the index places in it.
    Missing, truncated and corrupt shards are listed; tensor data is never read.
  - Changes nothing on the node.
options:
  path:
    description: The model directory.
    type: path
    required: true
  check_shards:
    description:
      - Read each shard's header to check its length and tensors. Off, only checks that
        each shard file exists.
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
  - The layout of C(bwtune_checkpoint) is described in the collection's docs/facts.md.
"""

EXAMPLES = r"""
- name: Gather checkpoint facts
  bwtune.sglang.checkpoint_facts:
    path: /models/Qwen3.5-397B-A17B-NVFP4

- name: Refuse an incomplete download
  ansible.builtin.assert:
    that: bwtune_checkpoint.complete
    fail_msg: "{{ bwtune_checkpoint.problems | join('; ') }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts.
  returned: always
  type: dict
  contains:
    bwtune_checkpoint:
      description: Checkpoint facts (see docs/facts.md for every key).
      returned: always
      type: dict
      contains:
        available:
          description: Whether the directory has a readable config.json.
          type: bool
          returned: always
        complete:
          description: Whether config and every shard are present and whole.
          type: bool
          returned: always
        problems:
          description: One line per problem found (missing shard, truncated shard, bad JSON).
          type: list
          elements: str
          returned: always
        implied_flags:
          description: >-
            SGLang flags the checkpoint implies, flag names without dashes, for example
            C(quantization=modelopt_fp4).
          type: dict
          returned: when available
        speculative_algorithms:
          description: Speculative algorithms the checkpoint's MTP layers allow (C(NEXTN), C(EAGLE)).
          type: list
          elements: str
          returned: when available
        source:
          description: >-
            What the checkpoint's source manifest (C(.bwtune-checkpoint.json), written by
            C(checkpoint_fetch)) gave: C(source), C(commit), C(files), and C(hashed), the files
            whose sha256 was checked this time; null without a manifest. Its problems (a missing
            file, a wrong size or hash) are in C(problems).
          type: dict
          returned: when available
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils._checkpoint.checkpoint_info import gather


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "check_shards": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    facts = gather(module.params["path"], module.params["check_shards"])
    module.exit_json(changed=False, ansible_facts={"bwtune_checkpoint": facts})


if __name__ == "__main__":
    main()
