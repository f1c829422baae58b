# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Compact storage of the SGLang flag tables: one base table plus per-release differences.

Consecutive releases share almost every flag, so sglang_flags.py stores the newest
release in full (`BASE_RELEASE`, `BASE_FLAGS`) and every other release as what differs
from the next newer one (`RELEASES[v] = {"source", "removed": [names], "set": {name: spec}}`):
`removed` are flags the newer release has and this one lacks, `set` are flags this one has
with a spec the newer one does not (added or changed). Standard library only, no package
imports: scripts/gen_flag_catalog.py loads this file by path inside an SGLang environment.
"""

from __future__ import annotations

import re
from typing import Any

_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")


def release_key(version: str) -> tuple[int, int, int, int]:
    """Order of published releases (`0.5.10.post1` after `0.5.10`)."""
    match = _RELEASE.match(version)
    if not match:
        raise ValueError(f"not an SGLang release number: {version!r}")
    return tuple(int(p) if p else 0 for p in match.groups())  # type: ignore[return-value]


def compact(tables: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any], dict[str, dict[str, Any]]]:
    """(base release, its flags, {older release: differences from the next newer one})."""
    if not tables:
        raise ValueError("no flag tables to store")
    order = sorted(tables, key=release_key)
    base = order[-1]
    releases: dict[str, dict[str, Any]] = {base: {"source": tables[base]["source"]}}
    for older, newer in zip(reversed(order[:-1]), reversed(order[1:]), strict=True):
        old, new = tables[older]["flags"], tables[newer]["flags"]
        releases[older] = {
            "source": tables[older]["source"],
            "removed": sorted(name for name in new if name not in old),
            "set": {name: spec for name, spec in old.items() if new.get(name) != spec},
        }
    ordered = {v: releases[v] for v in order}
    return base, tables[base]["flags"], ordered


def expand(
    base: str, base_flags: dict[str, Any], releases: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The full tables back: {release: {"source", "flags"}}, oldest first."""
    order = sorted(releases, key=release_key)
    if not order or order[-1] != base:
        raise ValueError(f"the base release {base} must be the newest of {order}")
    tables = {base: {"source": releases[base]["source"], "flags": dict(base_flags)}}
    flags = dict(base_flags)
    for version in reversed(order[:-1]):
        diff = releases[version]
        flags = {n: s for n, s in flags.items() if n not in set(diff.get("removed", ()))}
        flags.update(diff.get("set", {}))
        tables[version] = {"source": diff["source"], "flags": dict(sorted(flags.items()))}
    return {v: tables[v] for v in order}
