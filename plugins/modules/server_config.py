#!/usr/bin/python
# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: server_config
short_description: Resolve the SGLang server's launch arguments and its systemd ExecStart
version_added: "0.1.0"
description:
  - Takes the config to serve from exactly one source (a flags mapping, an argument list, or
    a node's sweep results file and a config id), drops the flags the server role owns
    (C(--host), C(--port), C(--api-key), C(--enable-metrics), the multi-node flags) and adds
    them from the options, and returns the argument list and the unit's C(ExecStart) with
    every word quoted for systemd (C($) as C($$) and C(%) as C(%%), so systemd expands nothing).
  - The API key is never on the command line; with O(api_key=true) the arguments end with
    C(--config) O(api_key_config), SGLang's YAML config file, which holds only the key
    (C(ps) shows a command line to every local user; that file is root's and the service's).
    A config that brings its own C(--config) is refused then (SGLang takes one).
  - Reads the previous config record (O(state_file)) and returns the flags that change.
  - Changes nothing on the node.
options:
  flags:
    description: SGLang flags, name (no dashes) -> value; true is a switch, false or null leaves it out.
    type: dict
  args:
    description: SGLang's arguments as a list (a sweep result's C(argv)); a leading launcher is dropped.
    type: list
    elements: str
  results_file:
    description: A node's sweep results file (JSON lines); with O(config_id).
    type: path
  config_id:
    description:
      - The config in O(results_file) to serve; its latest C(ok) line is used.
      - With another source, only a label returned as RV(config_id).
    type: str
  model_path:
    description: The checkpoint directory; wins over a C(--model-path) in the config.
    type: str
  command:
    description:
      - The launcher, for example C([/opt/bwtune/stacks/current/bin/python, -m, sglang.launch_server]).
    type: list
    elements: str
    required: true
  host:
    description: The address SGLang binds.
    type: str
    default: 127.0.0.1
  port:
    description: The port SGLang listens on.
    type: int
    default: 30000
  enable_metrics:
    description: Serve C(/metrics).
    type: bool
    default: false
  api_key:
    description: Require the API key (SGLang reads it from O(api_key_config)).
    type: bool
    default: true
  api_key_config:
    description: The YAML file (JSON, which is YAML) with the key under C(api-key), for SGLang's C(--config).
    type: path
    default: /etc/bwtune/server/api-key.yaml
  nnodes:
    description: Nodes of one multi-node server.
    type: int
    default: 1
  node_rank:
    description: This node's rank.
    type: int
    default: 0
  dist_init_addr:
    description: C(host:port) of rank 0, for more than one node.
    type: str
  state_file:
    description: The record of the config now installed (JSON), read to report what changes.
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
- name: Resolve the config of a sweep result
  bwtune.sglang.server_config:
    results_file: /var/lib/bwtune/results/r1/results.jsonl
    config_id: c0123456789
    model_path: /models/Qwen3.5-397B-A17B-NVFP4
    command: [/opt/bwtune/stacks/current/bin/python, -m, sglang.launch_server]
  register: server_resolved
"""

RETURN = r"""
config:
  description: The config's own arguments (without the model and the role's flags).
  type: list
  elements: str
  returned: success
args:
  description: Every argument after the launcher; with O(api_key), the last two are C(--config) and its file.
  type: list
  elements: str
  returned: success
exec_start:
  description: The unit's ExecStart value, each word quoted for systemd.
  type: str
  returned: success
source:
  description: Where the config came from.
  type: str
  returned: success
config_id:
  description: The config id, when the source names one.
  type: str
  returned: success
previous:
  description: The state file's record, or null when there is none.
  type: dict
  returned: success
record_args:
  description: The arguments without the API key's C(--config) file, what the state file records.
  type: list
  elements: str
  returned: success
changed_flags:
  description: Flags whose value differs from the previous record, each C({flag, old, new}).
  type: list
  elements: dict
  returned: success
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_file import ResultsFileError
from ansible_collections.bwtune.sglang.plugins.module_utils._serving.server_argv import (
    ServerConfigError,
    changed_flags,
    config_args,
    exec_start,
    record_args,
    server_args,
    split_options,
)


def read_previous(path):
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None  # an unreadable record is replaced; nothing to compare with
    return data if isinstance(data, dict) else None


def main():
    module = AnsibleModule(
        argument_spec={
            "flags": {"type": "dict"},
            "args": {"type": "list", "elements": "str"},
            "results_file": {"type": "path"},
            "config_id": {"type": "str"},
            "model_path": {"type": "str"},
            "command": {"type": "list", "elements": "str", "required": True},
            "host": {"type": "str", "default": "127.0.0.1"},
            "port": {"type": "int", "default": 30000},
            "enable_metrics": {"type": "bool", "default": False},
            "api_key": {"type": "bool", "default": True},
            "api_key_config": {"type": "path", "default": "/etc/bwtune/server/api-key.yaml"},
            "nnodes": {"type": "int", "default": 1},
            "node_rank": {"type": "int", "default": 0},
            "dist_init_addr": {"type": "str"},
            "state_file": {"type": "path"},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        if not p["command"]:
            raise ServerConfigError("server_launch_command: empty")
        resolved = config_args(
            flags=p["flags"], args=p["args"], results_file=p["results_file"], config_id=p["config_id"]
        )
        model = p["model_path"]
        config = []
        for option in split_options(resolved["args"], resolved["source"]):
            if option[0][2:] in ("model-path", "model"):
                model = model or (option[1] if len(option) > 1 else None)
            else:
                config += option
        args = server_args(
            config,
            model_path=model,
            host=p["host"],
            port=p["port"],
            enable_metrics=p["enable_metrics"],
            nnodes=p["nnodes"],
            node_rank=p["node_rank"],
            dist_init_addr=p["dist_init_addr"],
            api_key=p["api_key"],
            api_key_config=p["api_key_config"],
        )
        line = exec_start(p["command"], args)
    except (ServerConfigError, ResultsFileError) as exc:
        module.fail_json(msg=str(exc))
    previous = read_previous(p["state_file"])
    # What the state file records and what is compared: the arguments without the key's file.
    kept = record_args(args, p["api_key"])
    module.exit_json(
        changed=False,
        config=config,
        model_path=model,
        args=args,
        record_args=kept,
        exec_start=line,
        source=resolved["source"],
        config_id=resolved["config_id"],
        previous=previous,
        changed_flags=changed_flags((previous or {}).get("args"), kept),
    )


if __name__ == "__main__":
    main()
