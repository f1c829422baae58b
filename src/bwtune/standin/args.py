"""SGLang's command line, rebuilt from the generated flag tables.

`python -m sglang.launch_server` parses its argv with one argparse parser; the generated
tables (plugins/module_utils/_sglang/sglang_flags.py) hold every flag of that parser per release,
so an argparse parser built from them refuses exactly what SGLang's does: unknown flags,
bad choices, values of the wrong type (exit 2, argparse's message).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

PROG = "launch_server.py"  # what SGLang's argparse calls itself in its messages


def _str2bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes", "y", "on"):
        return True
    if text.lower() in ("false", "0", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value: {text!r}")


def _upper(text: str) -> str:
    return text.upper()


def _lower(text: str) -> str:
    return text.lower()


_TYPES: dict[str, Any] = {
    "int": int,
    "float": float,
    "upper": _upper,
    "lower": _lower,
    "json": json.loads,
    "bool": _str2bool,
}
_SWITCHES = ("store_true", "store_false")


def flag_table(version: str) -> dict[str, dict[str, Any]]:
    """The flags of one SGLang release: name (no dashes) -> spec."""
    from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.sglang_flags import FLAG_TABLES

    if version not in FLAG_TABLES:
        known = ", ".join(sorted(FLAG_TABLES))
        raise KeyError(f"no flag table for SGLang {version} (known: {known})")
    return dict(FLAG_TABLES[version]["flags"])


@dataclass(frozen=True)
class ParsedArgs:
    explicit: dict[str, Any]  # flags given on the command line: name (no dashes) -> value
    values: dict[str, Any]  # every flag: name -> value (explicit, else the release default)
    dests: tuple[tuple[str, str], ...] = ()  # flag name -> its ServerArgs field (argparse dest)

    def get(self, name: str, fallback: Any = None) -> Any:
        value = self.values.get(name)
        return fallback if value is None else value


def _option_strings(name: str, aliases: list[str] | None) -> list[str]:
    strings = [f"--{name}"]
    for alias in aliases or []:
        strings.append(alias if alias.startswith("-") else f"--{alias}")
    return list(dict.fromkeys(strings))


def build_parser(flags: dict[str, dict[str, Any]]) -> argparse.ArgumentParser:
    """An argparse parser with SGLang's flags. Defaults are suppressed so that the
    namespace holds only what was given (`parse` adds the defaults back)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [-h] --model-path MODEL_PATH [options]",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=True,  # SGLang keeps argparse's default: `--tp` works for `--tp-size`
    )
    for name, spec in sorted(flags.items()):
        action = spec.get("action") or "store"
        kwargs: dict[str, Any] = {"dest": spec.get("dest") or name.replace("-", "_")}
        if action in _SWITCHES:
            kwargs["action"] = action
        elif action in ("boolean_optional", "BooleanOptionalAction"):
            kwargs["action"] = argparse.BooleanOptionalAction
        elif action in ("store_const", "append_const") or spec.get("nargs") == 0:
            kwargs["action"], kwargs["const"] = "store_const", True
        elif action in ("store", "append"):
            kwargs["action"] = action
            kwargs["type"] = _TYPES.get(str(spec.get("type")), str)
            if spec.get("choices") is not None:
                kwargs["choices"] = spec["choices"]
            if spec.get("nargs") is not None:
                kwargs["nargs"] = spec["nargs"]
        elif action == "count":
            kwargs["action"] = "count"
        else:  # help/version-like or custom actions: take one value
            kwargs["type"] = str
        parser.add_argument(*_option_strings(name, spec.get("aliases")), **kwargs)
    return parser


def parse(argv: list[str], flags: dict[str, dict[str, Any]]) -> ParsedArgs:
    """Parse SGLang argv; argparse errors exit 2 with argparse's message (as SGLang's do)."""
    parser = build_parser(flags)
    namespace = vars(parser.parse_args(argv))
    by_dest = {(spec.get("dest") or name.replace("-", "_")): name for name, spec in flags.items()}
    explicit = {by_dest[dest]: value for dest, value in namespace.items() if dest in by_dest}
    if "model-path" in flags and "model-path" not in explicit:
        parser.error("the following arguments are required: --model-path/--model")
    values = {name: spec.get("default") for name, spec in flags.items()}
    values.update(explicit)
    dests = tuple((name, spec.get("dest") or name.replace("-", "_")) for name, spec in flags.items())
    return ParsedArgs(explicit, values, dests)
