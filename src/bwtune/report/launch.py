"""The winning config as something to run: a launch command line and role host_vars."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

import yaml

LAUNCH_PREFIX = ("python", "-m", "sglang.launch_server")
_MODEL_FLAGS = ("model-path", "model")


def server_args(result: Mapping[str, Any]) -> list[str]:
    """SGLang's own arguments for a result: its argv without any interpreter prefix.

    Results carry the planner's argv; when it is empty the arguments are rebuilt from flags.
    """
    argv = [str(arg) for arg in result.get("argv") or []]
    for index, arg in enumerate(argv):
        if arg.endswith("sglang.launch_server") or arg.endswith("launch_server.py"):
            return argv[index + 1 :]
    if argv:
        return argv
    return flags_to_args(result.get("flags") or {})


def flags_to_args(flags: Mapping[str, Any]) -> list[str]:
    args: list[str] = []
    for name, value in flags.items():
        if value is True:
            args.append(f"--{name}")
        elif value is False or value is None:
            continue
        elif isinstance(value, dict | list):
            args += [f"--{name}", json.dumps(value, separators=(",", ":"))]
        else:
            args += [f"--{name}", str(value)]
    return args


def launch_argv(result: Mapping[str, Any]) -> list[str]:
    return [*LAUNCH_PREFIX, *server_args(result)]


def launch_command(result: Mapping[str, Any], *, multiline: bool = False) -> str:
    """A shell-quoted command line; multiline puts each option on its own continued line."""
    argv = launch_argv(result)
    if not multiline:
        return shlex.join(argv)
    lines = [shlex.join(argv[:3])]
    for arg in argv[3:]:
        if arg.startswith("--") or len(lines) == 1:
            lines.append(shlex.quote(arg))
        else:
            lines[-1] += " " + shlex.quote(arg)
    return " \\\n    ".join(lines)


def host_vars(result: Mapping[str, Any]) -> dict[str, Any]:
    """Variables for the server role: the model path and every other flag, typed."""
    flags = dict(result.get("flags") or {})
    model = next((flags.pop(name) for name in _MODEL_FLAGS if name in flags), None)
    if model is None:
        args = server_args(result)
        model = next((args[i + 1] for i, arg in enumerate(args[:-1]) if arg[2:] in _MODEL_FLAGS), None)
    return {"bwtune_model_path": model, "server_flags": flags}


def host_vars_snippet(result: Mapping[str, Any], *, run_id: str | None = None) -> str:
    header = f"# host_vars/{result.get('host')}.yml: config {result.get('id') or result.get('config_id')}"
    if run_id:
        header += f", best of run {run_id}"
    body = yaml.safe_dump(host_vars(result), sort_keys=False, default_flow_style=False, width=1000)
    return f"{header}\n{body}"
