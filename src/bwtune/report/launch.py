"""The winning config as something to run: its launch command and host_vars for the server role.

Both come from what the node recorded: `launch_command` + `argv` is the command that was
measured, word for word (no argv is rebuilt here), and the host_vars are the same
arguments as the server role's `server_flags`. What SGLang changes in those arguments by
itself (NEXTN runs as EAGLE, ...) is the planner's recorded resolution, the result's
`flags`: `resolution()` lists it beside both, so they never disagree.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._serving.server_argv import (
    MODEL_FLAGS,
    ServerConfigError,
    split_options,
    strip_launcher,
)

NOT_RECORDED = "# the node did not record its launch command; SGLang's arguments:"


def server_args(result: Mapping[str, Any]) -> list[str]:
    """SGLang's own arguments as recorded (the contract's `argv`)."""
    return strip_launcher(result.get("argv") or [])


def launch_argv(result: Mapping[str, Any]) -> list[str]:
    """The measured command: the recorded launch command, then the recorded arguments."""
    return [*[str(word) for word in result.get("launch_command") or []], *server_args(result)]


def launch_command(result: Mapping[str, Any], *, multiline: bool = False) -> str:
    """A shell-quoted command line; multiline puts each option on its own continued line."""
    prefix = [str(word) for word in result.get("launch_command") or []]
    args = server_args(result)
    if not multiline:
        text = shlex.join([*prefix, *args])
        return text if prefix else f"{NOT_RECORDED} {text}"
    lines = [shlex.join(prefix)] if prefix else []
    for arg in args:
        if arg.startswith("--") or not lines:
            lines.append(shlex.quote(arg))
        else:
            lines[-1] += " " + shlex.quote(arg)
    command = " \\\n    ".join(lines)
    return command if prefix else f"{NOT_RECORDED}\n{command}"


def _options(result: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(flag, value words) of the recorded arguments, split the way the server role splits them."""
    try:
        options = split_options(server_args(result), "argv")
    except ServerConfigError:
        return []  # not options at all: the command still shows them as recorded
    return [(option[0][2:], option[1:]) for option in options]


def _typed(words: list[str], recorded: Any) -> Any:
    """A flag's value for YAML: the recorded typed value when it is the same, else the words."""
    if not words:
        return True
    if len(words) > 1:
        return words
    if (
        not isinstance(recorded, bool)
        and isinstance(recorded, int | float | str)
        and str(recorded) == words[0]
    ):
        return recorded
    return words[0]


def host_vars(result: Mapping[str, Any]) -> dict[str, Any]:
    """Variables for the server role: the model path and the measured arguments, typed."""
    flags = result.get("flags") or {}
    model = None
    server_flags: dict[str, Any] = {}
    for name, words in _options(result):
        if name in MODEL_FLAGS:
            model = words[0] if words else None
            continue
        server_flags[name] = _typed(words, flags.get(name))
    if model is None:
        model = next((flags[name] for name in MODEL_FLAGS if flags.get(name)), None)
    return {"bwtune_model_path": model, "server_flags": server_flags}


def _same(words: list[str], value: Any) -> bool:
    if not words:
        return value is True
    text = " ".join(words)
    if isinstance(value, dict | list):
        try:
            return bool(json.loads(text) == value)
        except ValueError:
            return text == " ".join(str(v) for v in value) if isinstance(value, list) else False
    return text == str(value)


def resolution(result: Mapping[str, Any]) -> list[str]:
    """What SGLang changes in the measured arguments by itself, from the recorded `flags`
    (the planner's resolution): e.g. "speculative-algorithm NEXTN -> EAGLE"."""
    given = dict(_options(result))
    changes = []
    for name, value in (result.get("flags") or {}).items():
        if name in MODEL_FLAGS:
            continue
        if name in given:
            if not _same(given[name], value):
                changes.append(f"{name} {' '.join(given[name]) or 'on'} -> {_shown(value)}")
        elif value not in (None, False):
            changes.append(f"{name} (not given) -> {_shown(value)}")
    return changes


def _shown(value: Any) -> str:
    if value is True:
        return "on"
    return json.dumps(value, separators=(",", ":")) if isinstance(value, dict | list) else str(value)


def host_vars_snippet(result: Mapping[str, Any], *, run_id: str | None = None) -> str:
    header = f"# host_vars/{result.get('host')}.yml: config {result.get('id') or result.get('config_id')}"
    if run_id:
        header += f", best of run {run_id}"
    notes = "".join(f"# SGLang resolves: {change}\n" for change in resolution(result))
    body = yaml.safe_dump(host_vars(result), sort_keys=False, default_flow_style=False, width=1000)
    return f"{header}\n{notes}{body}"


def recipe_command(run_id: str, config_id: str, host: str) -> str:
    """The command that shares a run's config, as measured on `host`, as a recipe (`bwtune
    recipe export`, docs/recipes.md)."""
    words = (run_id, config_id, host, f"recipe-{config_id}.json")
    run, config, on, out = (shlex.quote(word) for word in words)
    return f"bwtune recipe export {run} --config {config} --host {on} -o {out}"
