"""Speculative decoding on and off, per load (issue 26): what the report's section shows.

A run of `bwtune speculative` (bwtune.app.speculative_stage) holds one base config with
speculative decoding off and with a small grid of num-steps / eagle-topk / draft tokens,
each measured at one or more loads (a workload each). Per workload this says which setting
served most, whether speculative decoding won there and by how much, and the accept length
each setting reached. Any run can be read this way: configs that differ in more than the
speculative flags are compared too, each setting taking its best config.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SPEC_FLAGS = (
    "speculative-algorithm",
    "speculative-num-steps",
    "speculative-eagle-topk",
    "speculative-num-draft-tokens",
)
OFF = "off"
# In a stage run's folder: its base run, the base config, the settings and loads.
LINK_FILE = "speculative_stage.json"


def read_link(run_folder: Path) -> dict[str, Any] | None:
    """A stage run's link to its base run (LINK_FILE in its folder), None for another run."""
    try:
        data = json.loads((run_folder / LINK_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def spec_setting(flags: Mapping[str, Any]) -> str:
    """ "off", or "on (NEXTN steps=3, topk=1, draft=4)" (unset values as SGLang's defaults: "auto")."""
    algorithm = flags.get("speculative-algorithm")
    if not algorithm:
        return OFF
    parts = [
        f"steps={_shown(flags.get('speculative-num-steps'))}",
        f"topk={_shown(flags.get('speculative-eagle-topk'))}",
        f"draft={_shown(flags.get('speculative-num-draft-tokens'))}",
    ]
    return f"on ({algorithm} {', '.join(parts)})"


def _shown(value: Any) -> str:
    return "auto" if value is None else str(value)


def load_text(workload: Mapping[str, Any] | None) -> str:
    """The load a workload measured at: "concurrency 8", "4 requests/s", "capacity search"."""
    w = workload or {}
    if w.get("capacity"):
        return "capacity search"
    if w.get("request_rate") is not None:
        rate = f"{w['request_rate']:g} requests/s"
        return f"{rate}, concurrency {w['concurrency']}" if w.get("concurrency") else rate
    if w.get("concurrency") is not None:
        return f"concurrency {w['concurrency']}"
    return "unknown load"


def workload_metric(workload: str, block: Mapping[str, Any], objective: Mapping[str, Any]) -> str:
    """What a workload is compared by: the objective's metric on the objective's workload,
    `capacity` on another capacity workload, else `output_throughput` (total tok/s)."""
    if workload == objective.get("workload") and objective.get("metric"):
        return str(objective["metric"])
    return "capacity" if isinstance(block.get("capacity"), dict) else "output_throughput"


def speculative_rows(output: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per workload where the ok results hold both speculative off and on, in the
    run's workload order (the objective's first): workload, load, metric, goal, target (the
    objective's workload), off {id, value} or None, on {setting, id, value, accept_length}
    (the best setting on), settings [{setting, id, value, accept_length}] best first,
    winner (a setting, possibly "off"), gain (best on / off - 1, None without both), simulated."""
    objective = dict((output.get("summary") or {}).get("objective") or {})
    goal = objective.get("goal") or "max"
    simulated = bool((output.get("summary") or {}).get("simulated"))
    per_workload: dict[str, dict[str, dict[str, Any]]] = {}
    loads: dict[str, str] = {}
    metrics: dict[str, str] = {}
    for result in output.get("results") or []:
        if result.get("status") != "ok":
            continue
        setting = spec_setting(result.get("flags") or {})
        for workload, block in (result.get("metrics") or {}).items():
            if not isinstance(block, Mapping):
                continue
            metric = metrics.setdefault(workload, workload_metric(workload, block, objective))
            values = block.get("values") or {}
            value = values.get(metric)
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue
            loads.setdefault(workload, load_text(block.get("workload")))
            row = {
                "setting": setting,
                "id": result["id"],
                "host": result.get("host"),
                "value": float(value),
                "accept_length": _number(values.get("accept_length")),
            }
            best = per_workload.setdefault(workload, {}).get(setting)
            if best is None or _better(row["value"], best["value"], goal):
                per_workload[workload][setting] = row
    rows = []
    order = sorted(per_workload, key=lambda w: (w != objective.get("workload"), w))
    for workload in order:
        settings = sorted(
            per_workload[workload].values(),
            key=lambda r: (-r["value"] if goal == "max" else r["value"], r["setting"]),
        )
        off = per_workload[workload].get(OFF)
        on = next((r for r in settings if r["setting"] != OFF), None)
        if off is None and on is None:
            continue
        gain = None
        if off is not None and on is not None and off["value"]:
            gain = on["value"] / off["value"] - 1.0 if goal == "max" else off["value"] / on["value"] - 1.0
        rows.append(
            {
                "workload": workload,
                "load": loads.get(workload, "unknown load"),
                "metric": metrics[workload],
                "goal": goal,
                "target": workload == objective.get("workload"),
                "off": off,
                "on": on,
                "settings": settings,
                "winner": settings[0]["setting"],
                "gain": gain,
                "simulated": simulated,
            }
        )
    return rows


def conclusion(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """At the target load (the objective's workload): {workload, load, winner, gain, wins,
    loses} where wins/loses list the other loads where speculative decoding won or lost."""
    target = next((r for r in rows if r["target"]), None)
    if target is None:
        return None
    wins = [r["load"] for r in rows if r["gain"] is not None and r["gain"] > 0]
    loses = [r["load"] for r in rows if r["gain"] is not None and r["gain"] <= 0]
    return {
        "workload": target["workload"],
        "load": target["load"],
        "winner": target["winner"],
        "gain": target["gain"],
        "wins": wins,
        "loses": loses,
    }


def verdict_text(row: Mapping[str, Any]) -> str:
    """ "on (NEXTN steps=3, ...) wins by 54%" / "off wins: MTP loses 12%" / "only off measured"."""
    gain = row.get("gain")
    if gain is None:
        return f"only {row['winner']} measured"
    if row["winner"] == OFF:
        return f"off wins: the best MTP setting loses {abs(gain) * 100:.0f}%"
    return f"{row['winner']} wins by {gain * 100:.0f}%"


def _better(value: float, than: float, goal: str) -> bool:
    return value > than if goal == "max" else value < than


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
