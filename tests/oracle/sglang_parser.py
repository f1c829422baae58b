"""SGLang's own argparse parser, read the way bwtune names flags.

Runs inside an oracle venv (tests/oracle/make_venv.sh). Shared by the flag-catalog
generator (scripts/gen_flag_catalog.py) and the evaluator (sglang_eval.py), so both
name a flag the same way: its long option without dashes, preferring the one that
spells the ServerArgs field its value lands in (`--tp-size` -> tp_size, even where
argparse's dest is tensor_parallel_size, as in 0.5.9), then the one that spells its
dest; the other option strings are its aliases.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
from typing import Any

_ACTION_NAMES = {
    argparse._StoreAction: "store",
    argparse._StoreTrueAction: "store_true",
    argparse._StoreFalseAction: "store_false",
    argparse._StoreConstAction: "store_const",
    argparse._AppendAction: "append",
    argparse._AppendConstAction: "append_const",
    argparse._CountAction: "count",
    argparse.BooleanOptionalAction: "boolean_optional",
}


def sglang_parser() -> argparse.ArgumentParser:
    """The parser `python -m sglang.launch_server` builds (add_cli_args on a bare parser)."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return parser


def server_args_fields() -> frozenset[str]:
    """Names of ServerArgs' fields (a dataclass up to 0.5.1x, a msgspec Struct in 0.5.2x)."""
    from sglang.srt.server_args import ServerArgs

    struct_fields = getattr(ServerArgs, "__struct_fields__", None)
    if struct_fields is not None:
        return frozenset(struct_fields)
    return frozenset(f.name for f in dataclasses.fields(ServerArgs))


def flag_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """{flag name: action} for every option the parser has except --help."""
    fields = server_args_fields()
    flags: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if any(o.startswith("--") for o in action.option_strings):
            flags[flag_name(action, fields)] = action
    return flags


def field_of(action: argparse.Action, fields: frozenset[str]) -> str | None:
    """The ServerArgs field the flag's value lands in, if any."""
    for option in action.option_strings:
        if option.startswith("--") and option[2:].replace("-", "_") in fields:
            return option[2:].replace("-", "_")
    return action.dest if action.dest in fields else None


def flag_name(action: argparse.Action, fields: frozenset[str]) -> str:
    longs = [o[2:] for o in action.option_strings if o.startswith("--")]
    field = field_of(action, fields)
    for wanted in (field, action.dest):
        if wanted is not None and wanted.replace("_", "-") in longs:
            return wanted.replace("_", "-")
    return longs[0]


def flag_aliases(action: argparse.Action, fields: frozenset[str]) -> list[str]:
    """Other spellings of the flag; a boolean_optional flag's --no-X negation is not one."""
    name = flag_name(action, fields)
    negation = "no-" + name if isinstance(action, argparse.BooleanOptionalAction) else None
    return [o.lstrip("-") for o in action.option_strings if o.lstrip("-") not in (name, negation)]


def action_kind(action: argparse.Action) -> str:
    for cls in type(action).__mro__:
        if cls in _ACTION_NAMES:
            return _ACTION_NAMES[cls]
    return type(action).__name__


def type_name(action: argparse.Action) -> str:
    """Short name of what the flag's value is: str/int/float/bool/json/other."""
    kind = action_kind(action)
    if kind in ("store_true", "store_false", "boolean_optional"):
        return "bool"
    if kind in ("store_const", "append_const", "count"):
        return "int" if kind == "count" else _value_type(action.const)
    converter = action.type
    if converter is None:
        return "str" if action.choices is None else _value_type(next(iter(action.choices)))
    if converter in (str, int, float, bool):
        return converter.__name__
    if converter is json.loads or getattr(converter, "__name__", "") in ("loads", "json_loads"):
        return "json"
    if getattr(converter, "__name__", "") in ("str2bool", "_str2bool", "strtobool"):
        return "bool"
    return "other"


def _value_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    for cls in (int, float, str):
        if isinstance(value, cls):
            return cls.__name__
    return "other"


def plain(value: Any) -> Any:
    """A JSON-ready copy of a flag value (enums by value, sets sorted, records as dicts)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    fields = getattr(type(value), "__struct_fields__", None)  # msgspec.Struct
    if fields is not None:
        return {name: plain(getattr(value, name)) for name in fields}
    return repr(value)
