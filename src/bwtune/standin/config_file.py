"""SGLang's `--config FILE.yaml`, as the stand-in reads it.

SGLang (every release since 0.5.7, `server_args_config_parser.ConfigArgumentMerger`) reads a
YAML mapping of option -> value and puts those options before the command line's own (which
win). The server role passes the API key this way, so that it is on no command line. The
stand-in does the same with the same refusals; it reads the file with PyYAML when the stack
has it and as JSON otherwise (the role writes JSON, which is YAML).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class ConfigFileError(ValueError):
    """What SGLang's ConfigArgumentMerger raises, in its words."""


def _load(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    try:
        import yaml
    except ImportError:
        return json.loads(text) if text.strip() else None
    return yaml.safe_load(text)


def merge(argv: list[str], switches: set[str]) -> list[str]:
    """argv with the `--config` file's options first and `--config FILE` taken out.

    `switches`: the store_true flags (a true value is the bare flag, a false one is left out).
    """
    where = [i for i, word in enumerate(argv) if word == "--config"]
    if not where:
        return argv
    if len(where) > 1:
        raise ConfigFileError("Multiple config files specified! Only one allowed.")
    index = where[0]
    if index == len(argv) - 1:
        raise ConfigFileError("No config file specified after --config flag!")
    path = Path(argv[index + 1])
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigFileError(f"Config file must be YAML format, got: {path.suffix}")
    if not path.exists():
        raise ConfigFileError(f"Config file not found: {path}")
    data = _load(path) or {}
    if not isinstance(data, dict):
        raise ConfigFileError("Config file must contain a dictionary at root level")
    words: list[str] = []
    for key, value in data.items():
        flag = f"--{key}"
        if isinstance(value, bool):
            if str(key).replace("_", "-") in switches:
                words += [flag] if value else []
            else:
                words += [flag, str(value).lower()]
        elif isinstance(value, list):
            words += [flag, *(str(v) for v in value)] if value else []
        else:
            words += [flag, str(value)]
    return words + argv[:index] + argv[index + 2 :]
