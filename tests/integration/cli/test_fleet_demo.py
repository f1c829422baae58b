"""`bwtune demo --hosts 2` (issue 25): the demo as a simulated fleet of two local stand-in
hosts, each with its own node folder and ports; the grid's launches are shared between
them, each launched once, and the output says each host's part."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.cli.conftest import bwtune_argv, run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_demo_hosts_2_shares_the_grid_between_two_stand_in_hosts(
    cli_env: dict[str, str], bwtune_home: Path
) -> None:
    env = {k: v for k, v in cli_env.items() if k != "BWTUNE_STANDIN_PROFILE"}  # the shipped profile
    proc = run(bwtune_argv("demo", "--hosts", "2", "--json", "--quiet"), env, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    output = json.loads(proc.stdout)
    run_id = output["run_id"]
    launched = [r for r in output["results"] if r["status"] not in ("pruned", "duplicate")]
    assert len(launched) == 6  # the demo's 6 launches (README), each once
    assert set(Counter(r["id"] for r in output["results"]).values()) == {1}
    assert {r["host"] for r in launched} == {"standin-1", "standin-2"}
    rows = {row["host"]: row for row in output["fleet"]["hosts"]}
    assert sorted(rows) == ["standin-1", "standin-2"]
    assert sum(row["done"] for row in rows.values()) == 6 and all(row["queued"] == 0 for row in rows.values())
    # Each host kept its results in its own folder: its node lock, its files.
    for host in rows:
        lines = (bwtune_home / "sweeps" / host / run_id / "results.jsonl").read_text().splitlines()
        ids = [json.loads(raw)["config_id"] for raw in lines if raw.strip()]
        mine = {r["id"] for r in launched if r["host"] == host}
        assert mine <= set(ids) and len(ids) == len(mine) + 6  # its launches, and the 6 unlaunched configs


def test_demo_hosts_out_of_range_is_one_line(cli_env: dict[str, str], bwtune_home: Path) -> None:
    proc = run(bwtune_argv("demo", "--hosts", "0"), cli_env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "bwtune: demo: --hosts 0: give 1 to 16 stand-in hosts"
