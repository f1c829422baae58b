# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lines naming each role variable whose value is outside its bounds (a role's vars/bounds.yml).

The argument specs check a variable's type; its range they cannot say. Each role with numeric
variables keeps a bounds table beside it and fails its first task with these lines, joined,
before anything runs (issue 21 #9).
"""

from __future__ import annotations

import json
import math
from typing import Any

from ansible.errors import AnsibleFilterError

KEYS = {"min", "max", "above", "below", "unset", "what"}


def _shown(value: Any) -> str:
    """The value as given: a number (also one given as a string) as it is, anything else as JSON."""
    if isinstance(value, str) and _number(value) is not None:
        return value.strip()
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _number(value: Any) -> float | None:
    """The value as a number (the argument specs let "8" through as an int), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _limit(value: float) -> str:
    """31536000 as it is, 0.5 as 0.5 (not 3.1536e+07)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _range(bound: dict[str, Any]) -> str:
    """The range in words: 1-65535, at least 0, more than 0 and less than 1."""
    if "min" in bound and "max" in bound:
        return f"{_limit(bound['min'])}-{_limit(bound['max'])}"
    parts = []
    for key, words in (
        ("min", "at least"),
        ("above", "more than"),
        ("max", "at most"),
        ("below", "less than"),
    ):
        if key in bound:
            parts.append(f"{words} {_limit(bound[key])}")
    return " and ".join(parts)


def _check_bounds(bounds: Any) -> None:
    if not isinstance(bounds, dict) or not bounds:
        raise AnsibleFilterError(
            f"out_of_range: the bounds must be a table of variables, got {_shown(bounds)}"
        )
    for name, bound in bounds.items():
        if not isinstance(bound, dict):
            raise AnsibleFilterError(
                f"out_of_range: the bound of {name} must be a table, got {_shown(bound)}"
            )
        unknown = set(bound) - KEYS
        limits = [key for key in ("min", "max", "above", "below") if key in bound]
        if unknown or not limits:
            raise AnsibleFilterError(
                f"out_of_range: the bound of {name} needs min, max, above or below (and only "
                f"{', '.join(sorted(KEYS))}), got {_shown(bound)}"
            )
        for key in limits:
            if _number(bound[key]) is None or isinstance(bound[key], str):
                raise AnsibleFilterError(
                    f"out_of_range: {name}'s {key} must be a number, got {_shown(bound[key])}"
                )


def out_of_range(values: Any, bounds: Any) -> list[str]:
    """One line per variable of `bounds` whose value in `values` is not a number inside them."""
    _check_bounds(bounds)
    if not isinstance(values, dict):
        raise AnsibleFilterError(
            f"out_of_range: the values must be a table of variables, got {_shown(values)}"
        )
    lines = []
    for name, bound in bounds.items():
        if name not in values:
            raise AnsibleFilterError(f"out_of_range: no value given for {name}")
        value = values[name]
        if value is None and bound.get("unset"):
            continue
        number = _number(value)
        where = _range(bound) + (", or unset" if bound.get("unset") else "")
        what = f": {bound['what']}" if bound.get("what") else ""
        if number is None or not math.isfinite(number):
            lines.append(f"{name}: {_shown(value)} is not a number ({where}{what})")
        elif (
            ("min" in bound and number < bound["min"])
            or ("max" in bound and number > bound["max"])
            or ("above" in bound and number <= bound["above"])
            or ("below" in bound and number >= bound["below"])
        ):
            lines.append(f"{name}: {_shown(value)} is out of range ({where}{what})")
    return lines


class FilterModule:
    def filters(self):
        return {"out_of_range": out_of_range}
