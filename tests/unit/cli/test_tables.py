"""Every table the CLI draws keeps the values a user copies whole (issue 20 item 6): at 80
and at 120 columns (a terminal, as rich sees one) no id, host, flag value or number is split
over two lines or cut; a column that does not fit is hidden and said ("N columns hidden
(...): --wide shows them"); --wide shows every column; a pipe gets every column, a row a line.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bwtune import console, results_db
from bwtune.cli import main
from bwtune.commands import _sweep_output as sweep_output
from bwtune.commands import facts
from tests.unit.db.sample_results import sample_results

REPO = Path(__file__).resolve().parents[3]
SM120 = REPO / "examples" / "qwen35-397b-nvfp4-sm120.yml"
RUN_ID = "r20261130-demo"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
HIDDEN = re.compile(r"^(\d+) columns? hidden \((.*)\): --wide shows them$")
WIDTHS = (80, 120)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    conn = results_db.connect(path)
    try:
        lines = sample_results(RUN_ID)
        # A long run id and flag values as a real sweep has them.
        results_db.import_results(conn, lines)
        results_db.set_baseline(conn, "production", RUN_ID, set_by="ops", reason="the release of December")
    finally:
        conn.close()
    return path


@pytest.fixture
def grids(monkeypatch: pytest.MonkeyPatch) -> list[console.Grid]:
    """Every table printed, as the command built it (its columns and rows)."""
    seen: list[console.Grid] = []
    real = console.print_renderable

    def record(renderable: object, stream: object = None) -> None:
        if isinstance(renderable, console.Grid):
            seen.append(renderable)
        real(renderable, stream)  # type: ignore[arg-type]

    monkeypatch.setattr(console, "print_renderable", record)
    return seen


def _terminal(monkeypatch: pytest.MonkeyPatch, width: int | None) -> None:
    """stdout as rich sees a terminal `width` columns wide (None: a pipe)."""
    for name in ("TTY_COMPATIBLE", "COLUMNS", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    if width is None:
        monkeypatch.setenv("TTY_COMPATIBLE", "0")
        return
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", str(width))


def _check(grid: console.Grid, text: str, width: int | None, wide: bool) -> list[str]:
    """Every value of every shown column is on one line, whole; returns the hidden headers."""
    lines = [ANSI.sub("", line) for line in text.splitlines()]
    notes = [m for m in map(HIDDEN.match, lines) if m]
    hidden = notes[0].group(2).split(", ") if notes else []
    assert len(notes) <= 1 and (not notes or int(notes[0].group(1)) == len(hidden))
    if wide or width is None:
        assert hidden == [], "--wide and pipes show every column"
    if width is not None and not wide:
        (rule,) = [line for line in lines if set(line.strip()) == {"─"}]
        assert len(rule.rstrip()) <= width, f"the table is wider than {width}:\n{text}"
    for index, column in enumerate(grid.columns):
        if (column.header or "(label)") in hidden:
            continue
        compact = dict(column.compact)
        for row in grid.rows:
            cell = row[index]
            if width is not None and not wide and cell in compact:
                cell = compact[cell]
            pieces = [cell] if column.whole else cell.split()
            for piece in pieces:
                assert any(piece in line for line in lines), (
                    f"{column.header!r} value {piece!r} is split or cut at width {width}:\n"
                    + "\n".join(lines)
                )
    return hidden


def _draw(
    capsys: pytest.CaptureFixture[str],
    grids: list[console.Grid],
    draw: Callable[[bool], None],
    width: int | None,
    wide: bool,
) -> tuple[console.Grid, str]:
    grids.clear()
    capsys.readouterr()
    draw(wide)
    text = capsys.readouterr().out
    assert len(grids) == 1, "one table drawn"
    return grids[0], text


def _runs(db: Path) -> Callable[[bool], None]:
    return lambda wide: _ok(main(["runs", "--db", str(db), *(["--wide"] if wide else [])]))


def _plan(db: Path) -> Callable[[bool], None]:
    return lambda wide: _ok(main(["plan", str(SM120), "--db", str(db), *(["--wide"] if wide else [])]))


def _baseline(db: Path) -> Callable[[bool], None]:
    return lambda wide: _ok(main(["baseline", "list", "--db", str(db), *(["--wide"] if wide else [])]))


def _sweep(db: Path) -> Callable[[bool], None]:
    def draw(wide: bool) -> None:
        conn = results_db.connect(db, create=False)
        try:
            output = results_db.build_run_output(conn, RUN_ID)
        finally:
            conn.close()
        console.set_wide(wide)
        try:
            sweep_output.print_results_table(output, sys.stdout)
        finally:
            console.set_wide(False)

    return draw


def _facts(_db: Path) -> Callable[[bool], None]:
    rows = [
        facts.host_row(
            f"gpu-node-{n:02d}.example.internal",
            {
                "bwtune_gpu": {
                    "count": 8,
                    "sm": "sm120",
                    "driver_version": "580.95.05",
                    "cuda_version": "13.0",
                },
                "bwtune_stack": {
                    "torch": {"version": "2.10.0.dev20251201+cu130"},
                    "sgl_kernel": {"sm_targets": ["sm100a", "sm120a"]},
                    "sglang": {"version": "0.5.23"},
                    "fingerprint": "sha256:" + "0123456789abcdef" * 4,
                },
            },
            simulated=n == 2,
        )
        for n in (1, 2)
    ]

    def draw(wide: bool) -> None:
        console.set_wide(wide)
        try:
            facts.print_facts(rows, facts.sweep_groups(rows))
        finally:
            console.set_wide(False)

    return draw


def _ok(code: int) -> None:
    assert code == 0


TABLES = {"runs": _runs, "plan": _plan, "baseline": _baseline, "sweep": _sweep, "facts": _facts}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_no_value_is_split_at_80_or_120_columns_and_hidden_columns_are_said(
    table: str,
    db: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    grids: list[console.Grid],
) -> None:
    draw = TABLES[table](db)
    hidden_at = {}
    for width in WIDTHS:
        _terminal(monkeypatch, width)
        grid, text = _draw(capsys, grids, draw, width, wide=False)
        hidden_at[width] = _check(grid, text, width, wide=False)
        # --wide: every column, every value whole, whatever the width.
        grid, text = _draw(capsys, grids, draw, width, wide=True)
        _check(grid, text, width, wide=True)
    assert len(hidden_at[120]) <= len(hidden_at[80])
    _terminal(monkeypatch, None)
    grid, text = _draw(capsys, grids, draw, None, wide=False)
    _check(grid, text, None, wide=False)
    # A pipe: one line per row (grep and cut work).
    body = [line for line in text.splitlines() if any(row[0] in line for row in grid.rows)]
    assert len(body) >= len(grid.rows)


def test_a_runs_row_is_one_line_at_80_columns_with_the_run_id_whole(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _terminal(monkeypatch, 80)
    assert main(["runs", "--db", str(db)]) == 0
    lines = [ANSI.sub("", line) for line in capsys.readouterr().out.splitlines()]
    rows = [line for line in lines if RUN_ID in line]
    assert len(rows) == 1 and rows[0].startswith(RUN_ID)
    assert lines.index(rows[0]) == len(lines) - 2  # the row, then the hidden-columns note
    assert HIDDEN.match(lines[-1]) and "SIMULATED" in rows[0]
