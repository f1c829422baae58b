#!/usr/bin/python
# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: stack_layout
short_description: Name, record, activate and roll back SGLang stack venvs under a stack root
version_added: "0.1.0"
description:
  - A stack is a venv at C(ROOT/FINGERPRINT/), the fingerprint a short hash of its build
    inputs (torch version, SGLang commit, CUDA version, Python version, CPU architecture,
    FlashInfer version, sgl-kernel build options). C(ROOT/current) points at the verified
    stack in use.
  - O(state=inspect) computes the fingerprint and says what differs from the current stack
    (changes nothing). O(state=building) deletes failed attempts (unverified stacks
    nothing uses) and records the inputs in the stack's manifest, not yet verified.
    O(state=activate) checks the installed stack's facts against the inputs,
    marks the stack verified, moves C(current) to it atomically and keeps the last O(keep)
    stacks; a stack a running process uses (a server started from it) is never deleted.
    O(state=rollback) moves C(current) back to the previous verified stack (or O(to)).
  - Bad inputs fail with one line naming the value, before anything is touched.
options:
  root:
    description: The stack root (C(bwtune_stack_root)).
    type: path
    required: true
  state:
    description: What to do.
    type: str
    choices: [inspect, building, activate, rollback]
    default: inspect
  inputs:
    description:
      - Build inputs; keys C(torch_version), C(sglang_commit) (40 hex digits), C(cuda_version)
        (C(13.0)), C(python_version) (C(3.12)), C(arch), C(flashinfer_version) and
        C(options) (a dict of build options). Required unless O(state=rollback).
    type: dict
  facts:
    description:
      - The C(bwtune_stack) facts of M(bwtune.sglang.stack_facts) for the stack's Python;
        with O(state=activate), any disagreement with O(inputs) fails the task and leaves
        C(current) where it was.
    type: dict
  checks:
    description: Verification results to record in the manifest (O(state=activate)).
    type: dict
  keep:
    description: Verified stacks to keep after O(state=activate) (the current one always stays).
    type: int
    default: 3
  to:
    description: The fingerprint to roll back to (O(state=rollback)); default the previous verified one.
    type: str
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
- name: Which stack do these inputs make, and why is it not the current one
  bwtune.sglang.stack_layout:
    root: /opt/bwtune/stacks
    inputs:
      torch_version: 2.12.0.dev20260307+cu130
      sglang_commit: 0123456789abcdef0123456789abcdef01234567
      cuda_version: "13.0"
      python_version: "3.12"
      arch: x86_64
      flashinfer_version: 0.7.2
      options: {enable_fp4: true, enable_sm100a: false}
  register: stack

- name: Roll back to the previous verified stack
  bwtune.sglang.stack_layout:
    root: /opt/bwtune/stacks
    state: rollback
"""

RETURN = r"""
fingerprint:
  description: The stack's fingerprint (after O(state=rollback), the one C(current) points at).
  type: str
  returned: always
  sample: 3f9a0c1d2e4b
stack_dir:
  description: The stack's venv directory.
  type: str
  returned: always
python:
  description: The stack venv's Python.
  type: str
  returned: always
exists:
  description: Whether the stack directory exists.
  type: bool
  returned: always
verified:
  description: Whether the stack passed verification before.
  type: bool
  returned: always
current:
  description: The fingerprint C(current) points at before this task (null when none).
  type: str
  returned: always
is_current:
  description: Whether C(current) points at this stack (after this task).
  type: bool
  returned: always
changes:
  description: Why this stack differs from the current one, one line per input (empty when it is current).
  type: list
  elements: str
  returned: always
removed:
  description:
    - Stacks deleted. O(state=activate) deletes those beyond the last O(keep);
      O(state=building) deletes failed attempts first (unverified stacks that are not
      current and that no running process uses), the space the preflight counted as
      reclaimable. In check mode, those it would delete.
  type: list
  elements: str
  returned: when state is activate or building
kept_in_use:
  description:
    - Stacks beyond O(keep) that were not deleted because a running process uses them
      (its executable, working directory, command line or a mapped library lies in the
      stack, read from C(/proc)), fingerprint -> which process and path. A warning says so.
  type: dict
  returned: when state is activate
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils._provision import stack_root as sl


def describe(root: str, fp: str) -> dict:
    cur = sl.current(root)
    cur_manifest = sl.read_manifest(root, cur) if cur else None
    new_manifest = sl.read_manifest(root, fp) or {}
    return {
        "fingerprint": fp,
        "stack_dir": sl.stack_dir(root, fp),
        "python": os.path.join(sl.stack_dir(root, fp), "bin", "python"),
        "exists": os.path.isdir(sl.stack_dir(root, fp)),
        "verified": sl.is_verified(root, fp),
        "current": cur,
        "is_current": cur == fp,
        "changes": []
        if cur == fp
        else sl.changed_inputs((cur_manifest or {}).get("inputs"), new_manifest.get("inputs") or {}),
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "required": True},
            "state": {
                "type": "str",
                "choices": ["inspect", "building", "activate", "rollback"],
                "default": "inspect",
            },
            "inputs": {"type": "dict"},
            "facts": {"type": "dict"},
            "checks": {"type": "dict"},
            "keep": {"type": "int", "default": 3},
            "to": {"type": "str"},
        },
        required_if=[
            ("state", "inspect", ("inputs",)),
            ("state", "building", ("inputs",)),
            ("state", "activate", ("inputs",)),
        ],
        supports_check_mode=True,
    )
    p = module.params
    root, state = p["root"], p["state"]
    try:
        if state == "rollback":
            target = sl.rollback_target(root, p["to"])
            result = describe(root, target)
            changed = result["current"] != target
            if changed and not module.check_mode:
                sl.switch_current(root, target)
            result["is_current"] = True
            module.exit_json(changed=changed, **result)

        inputs = sl.validate_inputs(p["inputs"])
        fp = sl.fingerprint(inputs)
        result = describe(root, fp)
        if not result["exists"] or not sl.read_manifest(root, fp):
            result["changes"] = (
                sl.changed_inputs((sl.read_manifest(root, result["current"]) or {}).get("inputs"), inputs)
                if result["current"]
                else ["no stack yet"]
            )
        if state == "inspect":
            module.exit_json(changed=False, **result)

        if state == "building":
            changed = not result["verified"] and (sl.read_manifest(root, fp) or {}).get("inputs") != inputs
            # Failed attempts (unverified, not current, unused) go first: the preflight
            # counted their space as reclaimable.
            failed = sl.failed_stacks(root, protect=(fp,))
            if not module.check_mode:
                failed = sl.remove_failed(root, protect=(fp,))
                if changed:
                    os.makedirs(root, exist_ok=True)
                    sl.write_manifest(root, inputs, verified=False)
            module.exit_json(changed=changed or bool(failed), removed=failed, **result)

        # activate
        mismatches = sl.facts_mismatches(inputs, p["facts"]) if p["facts"] is not None else []
        if mismatches:
            module.fail_json(
                msg=f"stack {fp} is not what was built ({'; '.join(mismatches)}); "
                f"current stays at {result['current']}",
                mismatches=mismatches,
                **result,
            )
        if module.check_mode:
            changed = not result["verified"] or not result["is_current"]
            module.exit_json(changed=changed, removed=[], kept_in_use={}, **result)
        changed = sl.write_manifest(root, inputs, verified=True, checks=p["checks"])
        changed = (sl.switch_current(root, fp) != fp) or changed
        kept: dict = {}
        removed = sl.prune(root, p["keep"], protect=(fp,), kept=kept)
        result.update(verified=True, is_current=True)
        for old, why in sorted(kept.items()):
            module.warn(
                f"kept stack {old} although it is beyond keep={p['keep']}: it is in use ({why}); "
                "restart that process onto current, and the next activation prunes it"
            )
        module.exit_json(changed=changed or bool(removed), removed=removed, kept_in_use=kept, **result)
    except (sl.StackLayoutError, OSError) as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
