"""A run's capacity results (issue 26), one row per result and capacity workload, as the
report, its `--json` and `bwtune export` show them.

The node writes each capacity workload's search into the metric block
(`metrics.<workload>.capacity`: value, unit, slo, rounds, last_passing, first_failing,
lower_bound, reason; docs/capacity.md). Only ok results have one worth showing: a launch
that failed has no capacity, whatever rounds it ran before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def capacity_rows(results: Sequence[dict[str, Any]], *, simulated: bool) -> list[dict[str, Any]]:
    """Highest capacity first within each workload. Each row: workload, id, host, value,
    unit, lower_bound, slo, last_passing, first_failing, rounds (how many), reason (or
    null), simulated."""
    rows = []
    for result in results:
        if result.get("status") != "ok":
            continue
        for workload, block in sorted((result.get("metrics") or {}).items()):
            capacity = (block or {}).get("capacity")
            if not isinstance(capacity, dict):
                continue
            rows.append(
                {
                    "workload": workload,
                    "id": result["id"],
                    "host": result["host"],
                    "value": capacity.get("value"),
                    "unit": capacity.get("unit") or "requests/s",
                    "lower_bound": bool(capacity.get("lower_bound")),
                    "slo": dict(capacity.get("slo") or {}),
                    "last_passing": capacity.get("last_passing"),
                    "first_failing": capacity.get("first_failing"),
                    "rounds": len(capacity.get("rounds") or []),
                    "reason": capacity.get("reason"),
                    "simulated": simulated or bool(result.get("simulated")),
                }
            )
    return sorted(rows, key=lambda r: (r["workload"], -float(r["value"] or 0.0), r["host"], r["id"]))


def slo_text(slo: dict[str, Any]) -> str:
    """ "p99_ttft_ms <= 2000, p99_tpot_ms <= 50" """
    return ", ".join(f"{key} <= {value:g}" if isinstance(value, int | float) else f"{key} <= {value}"
                     for key, value in slo.items()) or "none"  # fmt: skip


def value_text(row: dict[str, Any]) -> str:
    """ "at least 64 requests/s" for a search that never failed, else "18.7 requests/s"."""
    value = row["value"]
    if isinstance(value, int | float):
        shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    else:
        shown = str(value)
    return f"{'at least ' if row['lower_bound'] else ''}{shown} {row['unit']}"
