#!/usr/bin/python
# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: server_health
short_description: Wait until the SGLang unit serves, or say why it does not
version_added: "0.1.0"
description:
  - Polls C(GET /health_generate) (a one-token generation) until it answers 200 or
    O(timeout_s) passes. Gives up at once when the unit's process has exited.
  - On failure prints the unit's journal tail and classifies it with the sweep's failure
    classes (C(invalid-args), C(unsupported-hardware), C(oom), C(crashed),
    C(startup-timeout)), and fails.
  - With O(gate=true), then sends the sweep's correctness prompts (greedy) and fails when
    an answer is wrong. The API key is read on the node from O(api_key_file) and never
    returned.
  - Changes nothing on the node.
options:
  unit:
    description: The systemd unit.
    type: str
    required: true
  host:
    description: Where to reach the server (C(127.0.0.1) when it binds every address).
    type: str
    default: 127.0.0.1
  port:
    description: The server's port.
    type: int
    default: 30000
  timeout_s:
    description: How long to wait for health.
    type: float
    default: 900
  poll_s:
    description: Seconds between polls.
    type: float
    default: 1
  journal_lines:
    description: Journal lines returned on failure.
    type: int
    default: 50
  gate:
    description: After health, run the correctness prompts.
    type: bool
    default: false
  api_key_file:
    description: EnvironmentFile holding C(BWTUNE_SERVER_API_KEY), for the correctness prompts.
    type: path
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
- name: Wait for the server
  bwtune.sglang.server_health:
    unit: bwtune-sglang.service
    port: 30000
    timeout_s: 900
"""

RETURN = r"""
healthy:
  description: Whether C(/health_generate) answered 200.
  type: bool
  returned: always
elapsed_s:
  description: Seconds waited.
  type: float
  returned: always
failure:
  description: C({class, message, log_tail}) when not healthy, else null.
  type: dict
  returned: always
gate:
  description: C({passed, message, outputs}) when O(gate=true) and healthy.
  type: dict
  returned: when gate ran
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils._serving.server_argv import API_KEY_ENV
from ansible_collections.bwtune.sglang.plugins.module_utils._serving.unit_health import (
    read_env_value,
    wait_serving,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "unit": {"type": "str", "required": True},
            "host": {"type": "str", "default": "127.0.0.1"},
            "port": {"type": "int", "default": 30000},
            "timeout_s": {"type": "float", "default": 900},
            "poll_s": {"type": "float", "default": 1},
            "journal_lines": {"type": "int", "default": 50},
            "gate": {"type": "bool", "default": False},
            "api_key_file": {"type": "path"},
        },
        supports_check_mode=True,
    )
    p = module.params
    host = "127.0.0.1" if p["host"] in ("0.0.0.0", "::", "") else p["host"]
    timeout = 0.0 if module.check_mode else p["timeout_s"]
    result = wait_serving(
        p["unit"], host, p["port"], timeout_s=timeout, poll_s=p["poll_s"], journal_lines=p["journal_lines"]
    )
    if not result["healthy"]:
        if module.check_mode:
            module.exit_json(changed=False, **result)
        failure = result["failure"]
        tail = "\n".join(failure["log_tail"])
        module.fail_json(
            msg=f"{p['unit']} is not serving: {failure['class']}: {failure['message']}\n"
            f"journal tail:\n{tail}",
            **result,
        )
    if p["gate"] and not module.check_mode:
        from ansible_collections.bwtune.sglang.plugins.module_utils._bench.correctness import run_gate

        key = read_env_value(p["api_key_file"], API_KEY_ENV) if p["api_key_file"] else None
        gate = run_gate(host, p["port"], api_key=key, timeout_s=min(120.0, max(10.0, p["timeout_s"])))
        result["gate"] = {"passed": gate.passed, "message": gate.message, "outputs": gate.outputs}
        if not gate.passed:
            module.fail_json(msg=f"{p['unit']} serves wrong answers: {gate.message}", **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
