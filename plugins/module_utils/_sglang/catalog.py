# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The SGLang flag catalog: every flag of each supported release, read from generated tables.

The tables themselves (sglang_flags.py, stored as a base table plus per-release
differences: flag_table_codec.py) are generated from each release's own argparse parser;
this module gives them a typed face: look a flag up by name or alias, coerce a value the
way argparse would, render argv, and say what a renamed flag is called in another release
and which releases have a flag.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import versions

# Flags renamed between releases: old CLI name -> new CLI name. A table lacking a name
# follows this chain (either direction) to tell the user what its release calls it.
RENAMES: dict[str, str] = {
    "mamba-scheduler-strategy": "mamba-radix-cache-strategy",
    "cuda-graph-max-bs": "cuda-graph-max-bs-decode",
}


class CatalogError(ValueError):
    """A flag, value or release the catalog does not know."""


def parse_version(version: str) -> tuple[Any, ...]:
    """A sort key for an SGLang version: releases, .postN, .devM and +local (versions.py)."""
    try:
        return versions.version_key(version)
    except versions.VersionError as err:
        raise CatalogError(f"not an SGLang version number: {version!r}") from err


def version_in(version: str, spec: str) -> bool:
    """Whether `version` satisfies `spec`: `*` or comma-joined `>=A`, `>A`, `<=A`, `<A`, `==A`."""
    try:
        return versions.version_in(version, spec)
    except versions.VersionError as err:
        raise CatalogError(str(err)) from err


@dataclass(frozen=True)
class FlagSpec:
    """One SGLang command-line flag as that release's argparse parser defines it."""

    name: str
    dest: str
    type: str
    action: str
    choices: tuple[Any, ...] | None
    default: Any
    nargs: Any
    aliases: tuple[str, ...] = ()

    @property
    def is_switch(self) -> bool:
        """A flag that takes no value (`--enable-metrics`, or `--x` / `--no-x`)."""
        return self.nargs == 0 or self.is_optional_bool or self.action in ("store_true", "store_false")

    @property
    def is_optional_bool(self) -> bool:
        """argparse.BooleanOptionalAction: `--x` sets true, `--no-x` sets false."""
        return self.action == "BooleanOptionalAction"

    @property
    def _sets_false(self) -> bool:
        return "false" in self.action.lower()

    @property
    def is_list(self) -> bool:
        return self.nargs in ("+", "*") or (isinstance(self.nargs, int) and self.nargs > 1)

    def coerce(self, value: Any) -> Any:
        """The value argparse would store for `value` (as written in YAML or on a CLI).

        Raises CatalogError with a message that names the flag and the bad value.
        """
        if self.is_switch:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise CatalogError(f"--{self.name} is a switch: use true or false, not {value!r}")
        if self.is_list:
            items = value if isinstance(value, list) else [value]
            return [self._coerce_one(item) for item in items]
        if isinstance(value, list):
            raise CatalogError(f"--{self.name} takes one value, not a list")
        return self._coerce_one(value)

    def _coerce_one(self, value: Any) -> Any:
        if value is None:
            raise CatalogError(f"--{self.name} needs a value")
        expects_text = self.type not in ("int", "float", "bool", "json") or bool(self.choices)
        if isinstance(value, bool) and expects_text and not _bool_is_choice(self.choices):
            word = "true/yes/on" if value else "false/no/off"
            raise CatalogError(
                f"--{self.name}: YAML read a bare {word} as the boolean {str(value).lower()}; "
                f"quote it if you mean the string"
            )
        coerced: Any
        try:
            if self.type == "int":
                if isinstance(value, float) and not value.is_integer():
                    raise ValueError
                coerced = int(value)
            elif self.type == "float":
                coerced = float(value)
            elif self.type == "bool":
                coerced = _to_bool(value)
            elif self.type == "json":
                coerced = json.loads(value) if isinstance(value, str) else value
            elif self.type == "upper":
                coerced = str(value).upper()
            elif self.type == "lower":
                coerced = str(value).lower()
            else:
                coerced = value if isinstance(value, (int, float)) and not self.choices else str(value)
        except (TypeError, ValueError):
            raise CatalogError(f"--{self.name} expects {self.type}, not {value!r}") from None
        if self.choices is not None and coerced not in self.choices:
            raise CatalogError(
                f"--{self.name} has no choice {value!r} (choices: {', '.join(map(str, self.choices))})"
            )
        return coerced

    def argv(self, value: Any) -> list[str]:
        """The command-line words for this flag set to `value` (already coerced)."""
        if self.is_optional_bool:
            return [f"--{self.name}" if value else f"--no-{self.name}"]
        if self.is_switch:
            wanted = not value if self._sets_false else value
            return [f"--{self.name}"] if wanted else []
        values = value if isinstance(value, list) else [value]
        return [f"--{self.name}", *(_word(v) for v in values)]


def _to_bool(value: Any) -> bool:
    """argparse `type=str2bool` as SGLang defines it."""
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in ("true", "1", "yes", "y", "on"):
        return True
    if text in ("false", "0", "no", "n", "off"):
        return False
    raise ValueError(text)


def _bool_is_choice(choices: tuple[Any, ...] | None) -> bool:
    return bool(choices) and any(isinstance(c, bool) for c in choices or ())


def _word(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return str(value)


@dataclass
class FlagTable:
    """All flags of one SGLang release."""

    version: str
    source: str
    flags: dict[str, FlagSpec]
    # True for a table read from a node's own SGLang parser (installed_flags.py), not generated.
    installed: bool = False
    _alias_to_name: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for spec in self.flags.values():
            for alias in spec.aliases:
                self._alias_to_name.setdefault(alias, spec.name)

    @property
    def release(self) -> str:
        """How messages name the release: `SGLang 0.5.23`, `SGLang 0.5.24 (installed on the node)`."""
        return f"SGLang {self.version}" + (" (installed on the node)" if self.installed else "")

    @property
    def key(self) -> str:
        """Tells tables apart in caches: a node's parser may differ from the release's table."""
        return f"{self.version}|{self.source}" if self.installed else self.version

    def canonical(self, name: str) -> str | None:
        """The flag's CLI name in this release (resolving aliases like tp -> tp-size), or None."""
        name = name.lstrip("-")
        if name in self.flags:
            return name
        return self._alias_to_name.get(name)

    def lookup(self, name: str) -> FlagSpec | None:
        canonical = self.canonical(name)
        return self.flags[canonical] if canonical else None

    def successor(self, name: str) -> str | None:
        """What this release calls a flag it lacks under `name` (renamed later or earlier)."""
        name = name.lstrip("-")
        for step in (RENAMES, {new: old for old, new in RENAMES.items()}):
            seen, current = {name}, name
            while current in step and step[current] not in seen:
                current = step[current]
                seen.add(current)
                if current in self.flags:
                    return current
        return None

    def default(self, name: str) -> Any:
        spec = self.flags.get(name)
        return spec.default if spec else None

    def unknown_flag_message(self, name: str) -> str:
        renamed = self.successor(name)
        if renamed:
            return f"{self.release} has no --{name.lstrip('-')}; it calls it --{renamed}"
        having = release_ranges(releases_with_flag(name))
        where = f" (releases that have it: {having})" if having else ""
        return f"{self.release} has no flag --{name.lstrip('-')}{where}"

    def coerce(self, name: str, value: Any) -> tuple[str, Any]:
        """(canonical name, argparse value) for a flag as written, or CatalogError."""
        spec = self.lookup(name)
        if spec is None:
            raise CatalogError(self.unknown_flag_message(name))
        try:
            return spec.name, spec.coerce(value)
        except CatalogError as err:
            raise CatalogError(f"{err} in {self.release}") from None

    def parse_argv(self, argv: list[str]) -> dict[str, Any]:
        """Flags from the words after `python -m sglang.launch_server` (argparse's reading).

        Raises CatalogError the way argparse would exit: unknown flag, bad choice, missing value.
        """
        flags: dict[str, Any] = {}
        i = 0
        while i < len(argv):
            word = argv[i]
            if not word.startswith("--"):
                raise CatalogError(f"unexpected argument {word!r}")
            name, eq, inline = word[2:].partition("=")
            spec = self.lookup(name)
            negated = spec is None and name.startswith("no-")
            if negated:
                spec = self.lookup(name[3:])
                if spec is not None and not spec.is_optional_bool:
                    spec = None
            if spec is None:
                raise CatalogError(self.unknown_flag_message(name))
            i += 1
            if spec.is_switch:
                flags[spec.name] = not negated and not spec._sets_false
                continue
            values = [inline] if eq else []
            while not eq and i < len(argv) and not argv[i].startswith("--"):
                values.append(argv[i])
                i += 1
                if not spec.is_list:
                    break
            if not values:
                raise CatalogError(f"--{spec.name} expects a value")
            flags[spec.name] = spec.coerce(values if spec.is_list else values[0])
        return flags


def _spec_from_table(name: str, raw: dict[str, Any]) -> FlagSpec:
    choices = raw.get("choices")
    return FlagSpec(
        name=name,
        dest=raw.get("dest") or name.replace("-", "_"),
        type=str(raw.get("type") or "str"),
        action=str(raw.get("action") or "store"),
        choices=tuple(choices) if choices is not None else None,
        default=raw.get("default"),
        nargs=raw.get("nargs"),
        aliases=tuple(a.lstrip("-") for a in raw.get("aliases") or ()),
    )


_TABLES: dict[str, FlagTable] = {}


def raw_tables() -> dict[str, dict[str, Any]]:
    """Every release's table in full ({release: {"source", "flags"}}): sglang_flags.FLAG_TABLES,
    expanded once from its compact storage (a base table plus per-release differences)."""
    # 10,000 generated lines: read when a table is first asked for, not at import.
    from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import sglang_flags

    tables: dict[str, dict[str, Any]] = sglang_flags.FLAG_TABLES
    return tables


def supported_versions() -> tuple[str, ...]:
    """The SGLang releases that have a generated flag table, oldest first."""
    return tuple(sorted(raw_tables(), key=parse_version))


def unknown_release_message(version: str) -> str:
    """Why `version` has no table, naming the nearest known releases."""
    known = supported_versions()
    parse_version(version)
    near = versions.nearest(version, known)
    return (
        f"no flag table for SGLang {version}: bwtune knows the {len(known)} releases {known[0]} to "
        f"{known[-1]}; the nearest {'are' if len(near) > 1 else 'is'} {' and '.join(near)}"
    )


def releases_with_flag(name: str) -> list[str]:
    """The known releases whose parser has `name` (a CLI name or alias), oldest first."""
    found = []
    for version in supported_versions():
        if get_table(version).canonical(name) is not None:
            found.append(version)
    return found


def release_runs(found: Sequence[str], known: Sequence[str]) -> list[list[str]]:
    """`found` (in `known`'s order) split into runs of releases consecutive in `known`."""
    runs: list[list[str]] = []
    for version in found:
        if runs and known.index(version) == known.index(runs[-1][-1]) + 1:
            runs[-1].append(version)
        else:
            runs.append([version])
    return runs


def release_ranges(found: list[str]) -> str:
    """`0.5.7 to 0.5.19, 0.5.22`: runs of consecutive known releases, for messages."""
    runs = release_runs(found, supported_versions())
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]} to {run[-1]}" for run in runs)


def get_table(version: str) -> FlagTable:
    table = _TABLES.get(version)
    if table is None:
        raw = raw_tables().get(version)
        if raw is None:
            raise CatalogError(unknown_release_message(version))
        flags = {name: _spec_from_table(name, spec) for name, spec in raw["flags"].items()}
        table = _TABLES[version] = FlagTable(version, str(raw.get("source", "")), flags)
    return table
