# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A flag table read from the node's own SGLang parser (stack facts), for `sglang.version: auto`.

stack_facts lists every flag of the installed SGLang as `name -> {dest, choices, aliases,
takes_value}` (docs/facts.md). That is what decides which flags and choices exist; the
generated catalog of the nearest release supplies what the parser dump lacks (value type,
default, nargs) for the flags both know. So a node with an SGLang release bwtune has no
generated table for (or a git checkout between releases) is checked against its own parser.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import (
    FlagSpec,
    FlagTable,
    get_table,
    parse_version,
    supported_versions,
)

_TABLES: dict[tuple[str, str], FlagTable] = {}


def installed_sglang(stack: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """`bwtune_stack.sglang`, or {} when the facts have none."""
    found = (stack or {}).get("sglang")
    return found if isinstance(found, Mapping) else {}


def installed_table(stack: Mapping[str, Any] | None) -> FlagTable | None:
    """The installed SGLang's flag table from `bwtune_stack`, or None when the facts carry no flags.

    Raises CatalogError when the installed version is not a release number the rules can place.
    """
    sglang = installed_sglang(stack)
    version, flags = sglang.get("version"), sglang.get("flags")
    if (
        not sglang.get("installed")
        or not isinstance(version, str)
        or not isinstance(flags, Mapping)
        or not flags
    ):
        return None
    parse_version(version)
    digest = str(sglang.get("flags_digest") or _digest(flags))
    table = _TABLES.get((version, digest))
    if table is None:
        reference = reference_table(version)
        specs = {str(name): _spec(str(name), raw, reference) for name, raw in flags.items()}
        source = f"sglang {version} argparse on the node (flags {digest})"
        table = _TABLES[(version, digest)] = FlagTable(version, source, specs, installed=True)
    return table


def reference_table(version: str) -> FlagTable | None:
    """The catalog release nearest `version` from below (else the oldest): types and defaults."""
    known = supported_versions()
    if not known:
        return None
    have = parse_version(version)
    below = [v for v in known if parse_version(v) <= have]
    return get_table(below[-1] if below else known[0])


def _spec(name: str, raw: Any, reference: FlagTable | None) -> FlagSpec:
    raw = raw if isinstance(raw, Mapping) else {}
    takes_value = bool(raw.get("takes_value", True))
    ref = reference.flags.get(name) if reference else None
    if ref is not None and ref.is_switch == (not takes_value):
        kind: dict[str, Any] = {
            "type": ref.type,
            "action": ref.action,
            "default": ref.default,
            "nargs": ref.nargs,
        }
    elif takes_value:
        kind = {"type": "str", "action": "store", "default": None, "nargs": None}
    else:
        kind = {"type": "bool", "action": "store_true", "default": False, "nargs": 0}
    choices = raw.get("choices")
    # `--no-x` of a BooleanOptionalAction is the negation, not an alias of `--x`.
    aliases = tuple(str(a) for a in raw.get("aliases") or () if str(a) != f"no-{name}")
    return FlagSpec(
        name=name,
        dest=str(raw.get("dest") or name.replace("-", "_")),
        choices=None if choices is None else tuple(_typed(c, kind["type"], ref) for c in choices),
        aliases=aliases,
        **kind,
    )


def _typed(choice: Any, type_name: str, ref: FlagSpec | None) -> Any:
    """stack_facts writes choices as strings; give them the values argparse compares against."""
    for known in (ref.choices or ()) if ref else ():
        if str(known) == str(choice):
            return known
    try:
        if type_name == "int":
            return int(choice)
        if type_name == "float":
            return float(choice)
    except (TypeError, ValueError):
        pass
    return choice


def _digest(flags: Mapping[str, Any]) -> str:
    text = json.dumps(flags, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def stack_flags(table: FlagTable) -> dict[str, dict[str, Any]]:
    """What stack_facts reports as `sglang.flags` for a parser with this table's flags.

    The inverse of installed_table, for tests and benchmarks that need a node's view of a
    release without installing it.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, spec in table.flags.items():
        aliases = list(spec.aliases) + ([f"no-{name}"] if spec.is_optional_bool else [])
        out[name] = {
            "dest": spec.dest,
            "choices": None if spec.choices is None else sorted(str(c) for c in spec.choices),
            "aliases": aliases,
            "takes_value": not spec.is_switch,
        }
    return out
