# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The server role's config: where SGLang's arguments come from and how the unit runs them.

A config is SGLang's own arguments (what follows `python -m sglang.launch_server`), from one
of: a flags mapping (`server_flags`, the `bwtune report` host_vars snippet), an argv list (a
result's `argv`, what `bwtune promote` passes), or a node's results file and a config id.
The role owns the listening address, the API key, metrics and the multi-node flags, so those
are dropped from the config and set from the role's variables. The unit's ExecStart is the
argv with every word quoted for systemd (no shell anywhere), `$` and `%` included: no word of
a config is ever expanded by systemd.

The API key is never on the command line (where `ps` shows it to every local user): SGLang
reads it from a YAML file given with `--config` (every release since 0.5.7 has `--config`;
its `api-key` key is a plain option), a file only root and the service user can read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_file import ResultsFile

MODEL_FLAGS = ("model-path", "model")
# Set by the role from its own variables, never taken from a config.
ROLE_FLAGS = ("host", "port", "api-key", "enable-metrics", "nnodes", "node-rank", "dist-init-addr")
_FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_LAUNCHERS = ("sglang.launch_server", "launch_server.py")
API_KEY_ENV = "BWTUNE_SERVER_API_KEY"
# SGLang's own config file option (YAML, merged into its argv in the process): the API key's way in.
API_KEY_CONFIG_FLAG = "--config"
API_KEY_CONFIG = "/etc/bwtune/server/api-key.yaml"


class ServerConfigError(ValueError):
    """A config that cannot be served; the message names the bad value and where it is."""


def flag_name(name: Any, where: str) -> str:
    text = str(name)
    text = text[2:] if text.startswith("--") else text
    if not _FLAG_NAME.match(text):
        raise ServerConfigError(f"{where}: {name!r} is not a flag name (lower-case words joined by -)")
    return text


def flags_to_args(flags: dict[str, Any], where: str = "server_flags") -> list[str]:
    """`{flag: value}` -> words: true -> `--flag`, false/null -> nothing, list -> its words."""
    if not isinstance(flags, dict):
        raise ServerConfigError(f"{where}: expected a mapping of flag -> value, got {type(flags).__name__}")
    args: list[str] = []
    for name, value in flags.items():
        flag = "--" + flag_name(name, where)
        if value is True:
            args.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, dict):
            args += [flag, json.dumps(value, sort_keys=True, separators=(",", ":"))]
        elif isinstance(value, list):
            args += [flag, *(str(v) for v in value)]
        else:
            args += [flag, str(value)]
    return args


def strip_launcher(argv: Sequence[Any]) -> list[str]:
    """SGLang's arguments from an argv that may start with `python -m sglang.launch_server`."""
    words = [str(w) for w in argv]
    for i, word in enumerate(words):
        if word.endswith(_LAUNCHERS):
            return words[i + 1 :]
    return words


def split_options(args: Sequence[str], where: str = "server_args") -> list[list[str]]:
    """[[--flag, value words...], ...] in order; a word before the first option is an error."""
    options: list[list[str]] = []
    for word in args:
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            options.append([name, value] if eq else [name])
        elif options:
            options[-1].append(word)
        else:
            raise ServerConfigError(f"{where}: {word!r} comes before any --flag")
    for option in options:
        flag_name(option[0], where)
    return options


def options_map(args: Sequence[str], where: str = "server_args") -> dict[str, list[str]]:
    """flag name (no dashes) -> its value words ([] for a switch); the last one wins."""
    return {opt[0][2:]: opt[1:] for opt in split_options(args, where)}


def from_results_file(path: str, config_id: str) -> dict[str, Any]:
    """The latest `ok` line of `config_id` in a node's results file."""
    lines = [line for line in ResultsFile(path).read() if line.get("config_id") == config_id]
    if not lines:
        raise ServerConfigError(f"server_config_id: {config_id} has no line in {path}")
    ok = [line for line in lines if line.get("status") == "ok"]
    if not ok:
        raise ServerConfigError(
            f"server_config_id: {config_id} in {path} has status {lines[-1].get('status')!r}, "
            "not a config that served"
        )
    return ok[-1]


def result_args(line: dict[str, Any], where: str) -> list[str]:
    argv = line.get("argv")
    if argv:
        return strip_launcher(argv)
    return flags_to_args(line.get("flags") or {}, where)


def config_args(
    *,
    flags: dict[str, Any] | None = None,
    args: Sequence[Any] | None = None,
    results_file: str | None = None,
    config_id: str | None = None,
) -> dict[str, Any]:
    """{"args": SGLang's words, "source": text, "config_id": id or None} from exactly one source."""
    given = [name for name, v in (("server_flags", flags), ("server_args", args)) if v]
    if results_file:
        given.append("server_results_file")
        if not config_id:
            raise ServerConfigError(f"server_results_file {results_file}: server_config_id is empty")
    if len(given) > 1:
        raise ServerConfigError(f"the config comes from one source; got {', '.join(given)}")
    if results_file and config_id:
        line = from_results_file(results_file, config_id)
        where = f"{results_file} ({config_id})"
        return {"args": result_args(line, where), "source": where, "config_id": config_id}
    # Without a results file, a config id only labels the config (what promote records).
    if args:
        return {"args": strip_launcher(args), "source": "server_args", "config_id": config_id or None}
    return {"args": flags_to_args(flags or {}), "source": "server_flags", "config_id": config_id or None}


def server_args(
    config: Sequence[str],
    *,
    model_path: str | None,
    host: str,
    port: int,
    enable_metrics: bool = False,
    nnodes: int = 1,
    node_rank: int = 0,
    dist_init_addr: str | None = None,
    api_key: bool = True,
    api_key_config: str = API_KEY_CONFIG,
) -> list[str]:
    """The full argument list: model, the config without the role's flags, then the role's flags.

    With `api_key`, the last two words are `--config <api_key_config>`: SGLang reads the key
    from that YAML file, so it is in no command line, no unit file and no Ansible output.
    """
    options = split_options(config)
    model = model_path
    kept: list[str] = []
    for option in options:
        name = option[0][2:]
        if name in MODEL_FLAGS:
            model = model or (option[1] if len(option) > 1 else None)
        elif name == API_KEY_CONFIG_FLAG[2:] and api_key:
            raise ServerConfigError(
                f"{' '.join(option)}: the server role gives SGLang the API key in its own --config file, "
                "and SGLang takes one --config only (set server_api_key_enabled: false to use yours)"
            )
        elif name not in ROLE_FLAGS:
            kept += option
    if not model:
        raise ServerConfigError("bwtune_model_path: empty, and the config names no --model-path")
    if nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ServerConfigError(f"node rank {node_rank} is outside 0..{nnodes - 1} (nnodes {nnodes})")
    out = ["--model-path", model, *kept, "--host", host, "--port", str(int(port))]
    if enable_metrics:
        out.append("--enable-metrics")
    if nnodes > 1:
        if not dist_init_addr:
            raise ServerConfigError("multi-node: no --dist-init-addr (the group's first host)")
        out += ["--nnodes", str(nnodes), "--node-rank", str(node_rank), "--dist-init-addr", dist_init_addr]
    if api_key:
        out += [API_KEY_CONFIG_FLAG, api_key_config]
    return out


def record_args(args: Sequence[str], api_key: bool) -> list[str]:
    """The arguments without the API key's `--config FILE` (what the state file records)."""
    words = list(args)
    if api_key and len(words) >= 2 and words[-2] == API_KEY_CONFIG_FLAG:
        return words[:-2]
    return words


def api_key_config_text(key: str) -> str:
    """The `--config` file's text: `{"api-key": KEY}` (JSON, and so YAML for SGLang's yaml.safe_load)."""
    return json.dumps({"api-key": key}) + "\n"


def systemd_quote(word: str) -> str:
    """One ExecStart word: double-quoted, with systemd's escapes; `%` (as `%%`) and `$` (as `$$`)
    taken literally, so neither a specifier nor a variable of systemd's ever reaches a value."""
    if "\n" in word or "\r" in word or "\0" in word:
        raise ServerConfigError(f"argument {word!r}: a line break or NUL cannot be in a unit's command line")
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    # Other control characters as C escapes, which systemd reads back (a tab stays one word).
    escaped = re.sub(r"[\x01-\x1f\x7f]", lambda m: "\\x%02x" % ord(m.group(0)), escaped)
    return f'"{escaped}"'


def exec_start(command: Sequence[str], args: Sequence[str]) -> str:
    """ExecStart's value: every word quoted, none expanded by systemd (no variable, no specifier)."""
    return " ".join(systemd_quote(str(w)) for w in [*command, *args])


def changed_flags(old: Sequence[str] | None, new: Sequence[str]) -> list[dict[str, Any]]:
    """[{flag, old, new}] between two argument lists (values are the words joined by a space)."""
    before = options_map(old or [], "previous config")
    after = options_map(new, "new config")
    out = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a != b:
            out.append(
                {
                    "flag": name,
                    "old": None if a is None else (" ".join(a) or True),
                    "new": None if b is None else (" ".join(b) or True),
                }
            )
    return out
