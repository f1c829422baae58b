# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: sweep_matrix
short_description: Read a sweep matrix file on the controller, as C(bwtune sweep -m) does
version_added: "0.1.0"
description:
  - Finds the matrix file as C(bwtune sweep -m FILE) does, reads it (YAML or JSON) and
    returns the matrix with a relative C(model.path) made absolute.
  - A relative file path is looked up against the current directory (where
    C(ansible-playbook) was started), then against the playbook's directory.
  - A relative C(model.path) is relative to the matrix file's directory.
  - Used by the C(bwtune.sglang.sweep) role for its C(sweep_matrix_file).
author:
  - bwtune developers (@bwtune)
options:
  _terms:
    description: The matrix file (one).
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Read the matrix
  ansible.builtin.set_fact:
    my_matrix: "{{ lookup('bwtune.sglang.sweep_matrix', 'examples/demo.yml') }}"
"""

RETURN = r"""
_raw:
  description: The matrix (a mapping), one per file asked.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.bwtune.sglang.plugins.module_utils._plan import matrix_source, matrix_yaml


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        playbook_dir = (variables or {}).get("playbook_dir")
        fallbacks = [str(playbook_dir)] if playbook_dir else []
        return [self._read(str(term), fallbacks) for term in terms]

    @staticmethod
    def _read(term, fallbacks):
        try:
            path = matrix_source.locate(term, fallbacks)
        except matrix_source.MatrixSourceError as exc:
            raise AnsibleLookupError("sweep_matrix_file: %s" % exc) from None
        try:
            # The one matrix reader: regular files only, size and alias limits, duplicate keys.
            matrix = matrix_yaml.load(matrix_yaml.read_text(path), path)
        except matrix_yaml.MatrixTextError as exc:
            raise AnsibleLookupError("sweep_matrix_file: %s" % exc) from None
        if not isinstance(matrix, dict):
            raise AnsibleLookupError(
                "sweep_matrix_file: %s: a matrix is a mapping, not %s" % (path, type(matrix).__name__)
            )
        return matrix_source.resolve_model_path(matrix, path)
