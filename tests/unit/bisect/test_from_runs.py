"""`bwtune bisect GOOD BAD`: the plan between two stored runs whose stacks differ (issue 28).

Runs are stored as `bwtune regress` stores them (tests/unit/regression/history_lines.py);
the plan names what differs, each component's candidates and the most steps, launches and
builds; bad input is one line and exit 2; a bad run no worse than the good one exits 1.
The step bound is checked against the engine itself on a simulated world.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bwtune import exit_codes, results_db
from bwtune.bisect import from_runs
from bwtune.bisect.bisection import Bisection
from bwtune.cli import main
from tests.unit.bisect.simulated import World
from tests.unit.regression.history_lines import STACK, line, stack, store_run

COMMITS = ["0a1b2c3", *[f"m{i:02d}" for i in range(1, 16)], "9f8e7d6"]  # 17, oldest first
TORCH_BAD = "2.11.0.dev20261201+cu130"
BAD_STACK = stack(torch=TORCH_BAD, sglang="0.5.24", sglang_commit="9f8e7d6", flashinfer="0.6.0")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    conn = results_db.connect(tmp_path / "home" / "results.db")
    levels = {"cprod000001": 1000.0, "calt0000002": 900.0}
    store_run(conn, "good-1", 1, levels, launches=6, seed=1)
    # The bad run: the production config 15% slower, the alternate unchanged (and the worse one).
    store_run(conn, "bad-1", 2, {"cprod000001": 850.0, "calt0000002": 900.0}, launches=6, seed=2,
              stack_components=BAD_STACK)  # fmt: skip
    store_run(conn, "same-1", 3, levels, launches=6, seed=3)  # the good stack again
    store_run(conn, "driver-1", 4, levels, launches=6, seed=4,
              stack_components={**BAD_STACK, "driver": "590.10"})  # fmt: skip
    conn.close()
    return tmp_path / "home"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["bisect", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _candidates(tmp_path: Path, text: str, name: str = "candidates.yml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_the_plan_names_what_differs_and_the_most_steps(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "good-1", "bad-1")
    lines = out.splitlines()
    # The bad run's best is the alternate now (900 > 850), so it is the default config, and
    # that one did not regress: not reproduced (exit 1), the plan still shown.
    assert lines[0] == "bisect plan: run good-1 (good) -> run bad-1 (bad), config calt0000002 (hosts: node1)"
    assert "no change" in lines[1] and code == 1 and err == ""
    # Not the default: the config that regressed, named.
    code, out, err = _run(capsys, "good-1", "bad-1", "--config", "cprod000001")
    assert code == exit_codes.OK, err
    assert "config cprod000001" in out.splitlines()[0]
    assert "(6 ok launches), bad " in out and ": regression (-1" in out
    assert (
        f"  torch: {STACK['torch']} -> {TORCH_BAD}: 2 candidates (its two ends); "
        "nothing between them to bisect" in out
    )
    assert (
        "  SGLang commit: 0a1b2c3 -> 9f8e7d6: 2 candidates (its two ends); nothing between them to bisect"
        in out
    )
    assert "  FlashInfer: 0.5.3 -> 0.6.0: 2 candidates (its two ends); nothing between them to bisect" in out
    assert "  SGLang version: 0.5.23 -> 0.5.24: follows SGLang commit" in out
    # 3 components: both ends 2, each alone 3, nothing to bisect between two ends; pairs 3.
    assert "steps: at most 8 measured: both ends 2, each component alone 3, bisecting 0; if no component " \
        "regresses alone: 3 pair steps and 0 bisecting" in out  # fmt: skip
    assert "launches: 3 per step, 2 more while undecided, up to 9: at most 72 (24 at 3 a step)" in out
    assert "builds: at most 8 stacks" in out
    assert out.rstrip().splitlines()[-1] == from_runs.NOT_BUILT_YET


def test_candidates_from_a_file_set_the_bisection_steps(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _candidates(
        tmp_path,
        "sglang_commit: [" + ", ".join(COMMITS) + "]\n"
        "flashinfer:\n  - '0.5.3'\n  - '0.5.4'\n  - {version: '0.6.0', note: the release}\n",
    )
    code, out, err = _run(
        capsys, "good-1", "bad-1", "--config", "cprod000001", "--candidates", path, "--json"
    )
    assert code == exit_codes.OK, err
    data = json.loads(out)
    assert data["schema"] == 1 and data["reproduced"] is True and data["measured"] is False
    assert data["verdict"]["verdict"] == "regression" and data["verdict"]["launches"] == [6, 6]
    by_key = {c["component"]: c for c in data["components"]}
    assert list(by_key) == ["torch", "sglang_commit", "flashinfer"]
    assert (by_key["sglang_commit"]["candidates"], by_key["sglang_commit"]["bisect_steps"]) == (17, 4)
    assert (by_key["flashinfer"]["candidates"], by_key["flashinfer"]["bisect_steps"]) == (3, 1)
    assert by_key["sglang_commit"]["source"] == f"from {path}"
    assert by_key["torch"]["source"] == "its two ends"
    versions = next(c for c in data["plan"]["components"] if c["key"] == "flashinfer")["versions"]
    assert versions[-1] == ["0.6.0", "the release"]
    # Alone: 2 + 3 + (4 + 1) = 10; pairs: 2 + 3 + 3 + each pair bisected both ways 2 * (0 + 4 + 1).
    steps = data["steps"]
    assert (steps["ends"], steps["alone"], steps["bisect"], steps["pairs"], steps["pairs_bisect"]) == (
        2,
        3,
        5,
        3,
        10,
    )
    assert steps["most"] == 18 and steps["linear"] == 2 + 1 + 16 + 2
    assert data["launches"]["most"] == 18 * 9 and data["builds"]["most"] == 18
    assert [f["component"] for f in data["followers"]] == ["sglang"]


def test_json_candidates_file_and_host(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _candidates(tmp_path, json.dumps({"flashinfer": ["0.5.3", "0.5.9", "0.6.0"]}), "c.json")
    code, out, _err = _run(capsys, "good-1", "bad-1", "--config", "cprod000001", "--host", "node1",
                           "--candidates", path)  # fmt: skip
    assert code == exit_codes.OK
    assert "config cprod000001 on host node1" in out
    assert "  FlashInfer: 0.5.3 -> 0.6.0: 3 candidates (from" in out


@pytest.mark.parametrize(
    ("argv", "candidates", "named"),
    [
        (["nope-1", "bad-1"], None, "no run 'nope-1' in the results database"),
        (
            ["good-1", "bad-1", "--config", "cghost00009"],
            None,
            "--config cghost00009: not in the bad run bad-1",
        ),
        (
            ["good-1", "bad-1", "--host", "node9"],
            None,
            "the bad run bad-1 has no measured config on host node9",
        ),
        (
            ["good-1", "same-1"],
            None,
            "the good and bad stacks are the same (fingerprint fp-aaaa): nothing to bisect",
        ),
        (["good-1", "driver-1"], None, "NVIDIA driver differs (580.95.05 -> 590.10): it is the host's"),
        (
            ["good-1", "bad-1"],
            "flashinfer: [0.5.3, '0.5.4', '0.5.4', '0.6.0']",
            "candidates for flashinfer: 0.5.4 is listed twice",
        ),
        (["good-1", "bad-1"], "flashinfer: [0.5.3, 0.6.0\n", "candidates.yml: not YAML or JSON at line"),
        (["good-1", "bad-1"], "flashinfer: '0.6.0'", "flashinfer: a list of versions"),
        (
            ["good-1", "bad-1"],
            "cuda: ['13.0', '13.1']",
            "candidates for cuda: the good and bad stacks both have 13.0",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], candidates: str | None,
    named: str,
) -> None:  # fmt: skip
    if candidates is not None:
        argv = [*argv, "--candidates", _candidates(tmp_path, candidates)]
    code, out, err = _run(capsys, *argv)
    assert code == exit_codes.BAD_INPUT and out == ""
    assert err.count("\n") == 1 and named in err, err


def test_a_config_of_the_bad_run_missing_in_the_good_one(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = results_db.connect(home / "results.db")
    store_run(conn, "bad-2", 5, {"cnew0000003": 700.0}, launches=3, seed=5, stack_components=BAD_STACK)
    conn.close()
    code, out, err = _run(capsys, "good-1", "bad-2")
    assert code == exit_codes.BAD_INPUT and out == ""
    assert err == (
        "bwtune bisect: config cnew0000003 (the bad run's best; --config names another): "
        "not in the good run good-1\n"
    )


def test_two_stacks_in_one_run_need_host_and_a_line_without_components_is_refused(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = results_db.connect(home / "results.db")
    other = stack(flashinfer="0.5.9")
    results_db.import_results(conn, [line("bad-1", "cprod000001", 2, [840.0, 845.0], host="node2",
                                          stack_components=other)])  # fmt: skip
    bare = line("good-1", "cprod000001", 1, [1000.0, 1001.0], host="node2")
    results_db.import_results(conn, [{**bare, "stack": None}])
    conn.close()
    code, out, err = _run(capsys, "good-1", "bad-1", "--config", "cprod000001")
    assert code == exit_codes.BAD_INPUT and out == ""
    assert err == (
        "bwtune bisect: the bad run bad-1: config cprod000001 ran on 2 stacks (hosts node1, node2): "
        "name one host with --host\n"
    )
    code, out, err = _run(capsys, "good-1", "bad-1", "--config", "cprod000001", "--host", "node3")
    assert code == exit_codes.BAD_INPUT and "the bad run bad-1 has no line of config cprod000001" in err
    code, out, err = _run(capsys, "good-1", "bad-1", "--config", "cprod000001", "--host", "node2")
    assert code == exit_codes.BAD_INPUT and err == (
        "bwtune bisect: the good run good-1: config cprod000001's lines record no stack components "
        "(stack fingerprint fp-aaaa): nothing to bisect from\n"
    )
    assert _run(capsys, "good-1", "bad-1", "--config", "cprod000001", "--host", "node1")[0] == exit_codes.OK


def test_a_missing_candidates_file_is_named(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = _run(capsys, "good-1", "bad-1", "--candidates", str(tmp_path / "none.yml"))
    assert code == exit_codes.BAD_INPUT and err.count("\n") == 1 and "none.yml" in err


def test_not_reproduced_prints_the_plan_and_exits_1(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "good-1", "bad-1", "--config", "calt0000002")
    assert code == 1 and err == ""
    assert "components that differ" in out
    assert "not reproduced: the bad run bad-1 is not measurably worse than the good run good-1 on " \
        "calt0000002 (no change" in out  # fmt: skip
    code, out, err = _run(capsys, "good-1", "bad-1", "--config", "calt0000002", "--json")
    assert code == 1 and json.loads(out)["reproduced"] is False and "not reproduced" in err


def _level_world(slow: dict[str, str], together: bool = False) -> World:
    def level(stack: dict[str, Any]) -> float:
        hit = [stack.get(k) == v for k, v in slow.items()]
        return 850.0 if (all(hit) if together else any(hit)) else 1000.0

    return World(level)


@pytest.mark.parametrize(
    ("slow", "together"),
    [({"sglang_commit": "m07"}, False), ({"torch": TORCH_BAD, "flashinfer": "0.6.0"}, True)],
)
def test_the_step_bound_holds_for_the_engine(
    home: Path, tmp_path: Path, slow: dict[str, str], together: bool
) -> None:
    """The plan's "at most" against the engine itself: a change alone among 17 commits, and
    two components that regress only together (the pairs' path)."""
    conn = results_db.connect_readonly(home / "results.db")
    try:
        planned = from_runs.plan_from_runs(
            conn, "good-1", "bad-1", config_id="cprod000001",
            candidates={"sglang_commit": COMMITS, "flashinfer": ["0.5.3", "0.5.4", "0.6.0"]},
        )  # fmt: skip
    finally:
        conn.close()
    # Later commits keep the planted change (the level is by index past the change).
    world = _level_world(slow, together)
    if not together:
        base = world.level
        world.level = lambda s: 850.0 if COMMITS.index(str(s["sglang_commit"])) >= 7 else base(s)  # type: ignore[method-assign]
    report = Bisection(planned.plan, world.measure, tmp_path / "run", planned.settings).run()
    assert report.outcome in ("found", "needs components together"), report.lines()
    assert report.measured_steps <= planned.budget.most
    assert report.launches <= planned.budget.most * planned.settings.max_launches
    if not together:
        assert report.measured_steps <= planned.budget.alone_path
        (finding,) = [f for f in report.findings if f.first_bad]
        assert finding.first_bad == "m07"
