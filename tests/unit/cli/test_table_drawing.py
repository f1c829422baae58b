"""bwtune.console draws a table's rows itself (issue 22): the same characters and escape
codes as rich's Table, on a colour terminal and on a pipe, whatever the cells (wrapped
text, newlines, tabs, wide characters, compact labels, styled rows); and each distinct cell
is rendered once, not every cell of every row."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console
from rich.padding import Padding

from bwtune import console

WORDS = ["hardware:", "hybrid-blackwell-attention", "flag", "x", "日本語", "a\tb", "", "dim", "0.85"]
STYLES = [None, None, None, "dim", "bold red", "on blue", "yellow on grey23"]


def _grid(seed: int, rows: int = 40) -> console.Grid:
    rng = random.Random(seed)
    columns = [
        console.Column("id", keep=console.ALWAYS),
        console.Column("moe-runner-backend", keep=60),
        console.Column("label", compact=(("SIMULATED (bwtune stand-in)", "SIMULATED"),), keep=40),
        console.Column("reason", whole=False, keep=70),
    ]
    grid = console.table(columns, title="t")
    for n in range(rows):
        reason = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 9)))
        if rng.random() < 0.1:
            reason += "\nsecond line"
        label = rng.choice(["SIMULATED (bwtune stand-in)", "", "measured"])
        grid.add_row(
            f"c{n:010x}", rng.choice(["auto", "flashinfer_trtllm"]), label, reason, style=rng.choice(STYLES)
        )
    return grid


def _render(renderable: object, width: int, terminal: bool) -> str:
    out = io.StringIO()
    drawn = Console(
        file=out, width=width, force_terminal=terminal, color_system="truecolor" if terminal else None
    )
    drawn.print(renderable)
    return out.getvalue()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("width", [40, 80, 120, None])
@pytest.mark.parametrize("terminal", [True, False])
def test_rows_are_drawn_exactly_as_richs_table_draws_them(
    seed: int, width: int | None, terminal: bool
) -> None:
    grid = _grid(seed)
    layout = console.fit(grid, width)
    wide = max(layout.width, 1) if width is None else max(width, layout.width)
    expected = _render(console._rich_table(grid, layout), wide, terminal)
    assert _render(console._Drawn(grid, layout), wide, terminal) == expected


def test_an_empty_table_is_its_header_as_before() -> None:
    grid = console.table(["id", console.Column("reason", whole=False)])
    layout = console.fit(grid, 80)
    assert _render(console._Drawn(grid, layout), 80, True) == _render(
        console._rich_table(grid, layout), 80, True
    )


def test_each_distinct_cell_is_rendered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich's Table renders every cell of every row (a 10,000-row plan took 30 s to draw);
    the rows here repeat two long reasons that wrap and a styled value: a few renders only."""
    grid = console.table(["id", "status", console.Column("reason", whole=False)])
    for n in range(300):
        reason = ["hardware: hybrid-blackwell-attention needs a newer build", "flag: not in this release"][
            n % 2
        ]
        grid.add_row(f"c{n:010x}", "pruned", reason, style="dim" if n % 3 == 0 else None)
    calls = []
    real = Console.render_lines

    def counted(self: Console, *args: object, **kwargs: object) -> object:
        if isinstance(args[0], Padding):  # a cell (its Text is rendered inside)
            calls.append(args[0])
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Console, "render_lines", counted)
    layout = console.fit(grid, 50)
    assert layout.hidden == [] and layout.widths[-1] < len("hardware: hybrid-blackwell-attention needs")
    text = _render(console._Drawn(grid, layout), 50, True)
    assert text.count("c0000000001") == 1 and text.count("hybrid-blackwell-attention") == 150
    # The styled ids (100 of them) are each rendered; the rest of the rows, a few cells.
    assert len(calls) < 100 + 20, f"{len(calls)} cells rendered for {len(grid.rows)} rows"
