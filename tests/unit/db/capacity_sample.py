"""The sample run (sample_results) with a capacity workload on each measured config
(docs/capacity.md, "Results"): one config finds no rate that meets the SLO (capacity 0),
one meets it at every rate tried ("at least"), the others a bracketed capacity. The
wrong-output launch carries a capacity block too: it must never be shown."""

from __future__ import annotations

import copy
from typing import Any

from tests.unit.db.sample_results import sample_results

RUN_ID = "r20261202-capacity"
WORKLOAD = "capacity"
OBJECTIVE = {"workload": WORKLOAD, "metric": "capacity", "goal": "max"}
SLO = {"p99_ttft_ms": 2000.0, "p99_tpot_ms": 50.0}


def _block(value: float, *, lower_bound: bool = False, tput: float, tpot: float) -> dict[str, Any]:
    rounds = [{"load": 4.0, "p99_ttft_ms": 900.0, "p99_tpot_ms": tpot, "passed": value >= 4.0}]
    last = value if value else None
    first = None if lower_bound else (value * 1.1 if value else 4.0)
    capacity: dict[str, Any] = {"value": value, "unit": "requests/s", "slo": dict(SLO), "rounds": rounds,
                                "last_passing": last, "first_failing": first,
                                "lower_bound": lower_bound}  # fmt: skip
    if not value:
        capacity["reason"] = (
            "the SLO failed at every rate tried, down to 0.0625 requests/s (p99_ttft_ms 2210.3 > 2000)"
        )
    elif lower_bound:
        capacity["reason"] = f"the SLO held at every rate tried: capacity at least {value:g} requests/s"
    values = {"capacity": value, "output_throughput": tput, "p99_tpot_ms": tpot, "p99_ttft_ms": 1500.0}
    return {"n": 1, "values": values, "ci95": {}, "cv": {}, "repetitions": [{"capacity": value}],
            "capacity": capacity}  # fmt: skip


def capacity_results(run_id: str = RUN_ID, *, simulated: bool = True) -> list[dict[str, Any]]:
    lines = copy.deepcopy(sample_results(run_id, simulated=simulated))
    measured = [line for line in lines if line["metrics"]]
    for n, line in enumerate(measured):
        value = [12.5, 0.0, 64.0, 20.0, 9.0, 31.0, 7.0, 15.0][n % 8]
        line["metrics"][WORKLOAD] = _block(
            value, lower_bound=value == 64.0, tput=1000.0 + 100 * n, tpot=20.0 + 5 * (n % 4)
        )
    for line in lines:
        line["objective"] = dict(OBJECTIVE)
    return lines
