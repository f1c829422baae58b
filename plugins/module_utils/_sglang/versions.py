# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Order SGLang version strings the way PEP 440 does, for the rules' version ranges.

The subset SGLang's releases and source builds use: a release `N(.N)*`, then optionally
`.postN`, `.devM` and a local label `+gHASH` (`0.5.23.post2.dev45+g1a2b3c4`, what a build
of main reports). Order: `X.devM` < `X` < `X.postN.devM` < `X.postN`; a local label sorts
after the same version without one. Standard library only (runs on the node).
"""

from __future__ import annotations

import re

_VERSION = re.compile(
    r"^v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[.-]?post[.-]?(?P<post>\d+))?"
    r"(?:[.-]?dev[.-]?(?P<dev>\d+))?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[.-][a-z0-9]+)*))?$",
    re.IGNORECASE,
)
_INF = float("inf")


class VersionError(ValueError):
    """Not a version string of the supported form."""


def version_key(version: str) -> tuple[tuple[int, ...], float, float, tuple[tuple[int, int | str], ...]]:
    """A sort key: `sorted(versions, key=version_key)` orders them as PEP 440 does."""
    match = _VERSION.match(version.strip())
    if not match:
        raise VersionError(
            f"not a version number: {version!r} (want e.g. 0.5.23, 0.5.23.post1, 0.5.24.dev3+gabc)"
        )
    release = tuple(int(p) for p in match["release"].split("."))
    while len(release) > 1 and release[-1] == 0:  # 0.5 == 0.5.0
        release = release[:-1]
    post = float(match["post"]) if match["post"] is not None else -1.0
    dev = float(match["dev"]) if match["dev"] is not None else _INF
    # PEP 440: numeric local segments sort after alphanumeric ones; no local sorts first.
    local = tuple(
        (1, int(part)) if part.isdigit() else (0, part.lower())
        for part in re.split(r"[.-]", match["local"] or "")
        if part
    )
    return release, post, dev, local


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as `a` sorts before, equal to or after `b`."""
    ka, kb = version_key(a), version_key(b)
    return (ka > kb) - (ka < kb)


def version_in(version: str, spec: str) -> bool:
    """Whether `version` satisfies `spec`: `*` or comma-joined `>=A`, `>A`, `<=A`, `<A`, `==A`, `!=A`."""
    if spec.strip() in ("", "*"):
        return True
    for clause in spec.split(","):
        clause = clause.strip()
        op = clause[:2] if clause[:2] in (">=", "<=", "==", "!=") else clause[:1]
        if op not in (">=", "<=", "==", "!=", ">", "<"):
            raise VersionError(f"bad version range clause {clause!r} in {spec!r}")
        order = compare(version, clause[len(op) :])
        ok = {
            ">=": order >= 0,
            "<=": order <= 0,
            "==": order == 0,
            "!=": order != 0,
            ">": order > 0,
            "<": order < 0,
        }[op]
        if not ok:
            return False
    return True


def release_at_or_below(version: str, releases: tuple[str, ...] | list[str]) -> str | None:
    """The newest of `releases` that `version` is at or after (whose rules a build follows)."""
    have = version_key(version)
    below = [r for r in releases if version_key(r) <= have]
    return max(below, key=version_key) if below else None


def nearest(version: str, releases: tuple[str, ...] | list[str]) -> list[str]:
    """The known releases on either side of `version` (one or two, oldest first)."""
    ordered = sorted(releases, key=version_key)
    have = version_key(version)
    below = [r for r in ordered if version_key(r) <= have]
    above = [r for r in ordered if version_key(r) > have]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])
