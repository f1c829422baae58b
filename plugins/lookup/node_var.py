# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: node_var
short_description: A cross-role bwtune variable for this host, or its default
version_added: "0.1.0"
description:
  - Returns the value of each named cross-role variable (C(bwtune_stack_python),
    C(bwtune_nvidia_smi), C(bwtune_model_path), ...) as the host's variables give it, or the
    default of the collection's C(docs/variables.md) when the host does not set it.
  - C(bwtune_stack_python) defaults to C(bwtune_stack_root)/current/bin/python.
  - On a simulated host (C(bwtune_simulated)) without its own C(bwtune_nvidia_smi), that is
    the stand-in's fake nvidia-smi installed with the controller's bwtune, so that every
    role sees the same simulated GPUs.
  - Every bwtune role reads these variables through this lookup, so that their defaults live in
    one place.
author:
  - bwtune developers (@bwtune)
options:
  _terms:
    description: Names of cross-role variables.
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Gather GPU facts with the host's nvidia-smi
  bwtune.sglang.gpu_facts:
    nvidia_smi: "{{ lookup('bwtune.sglang.node_var', 'bwtune_nvidia_smi') }}"
"""

RETURN = r"""
_raw:
  description: The value of each variable, in the order asked.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import vocabulary


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}

        def host_value(name):
            if name not in variables:
                return None
            return self._templar.template(variables[name])

        try:
            return [vocabulary.value(str(term), host_value) for term in terms]
        except vocabulary.VocabularyError as exc:
            raise AnsibleLookupError(str(exc)) from None
