"""How every `bwtune` command prints a table: rich, one style, whole values always.

A value a user copies (a run id, a config id, a host, a flag's value, a number) is never
split over two lines nor cut: its column is as wide as its widest value. Free text (a
reason, a label) wraps between words, never inside one. When a terminal is too narrow for
every column, the columns that matter least are left out and the table says so
("2 columns hidden (STARTED, HOSTS): --wide shows them"), as `kubectl` and `gh` do; with
`--wide` every column is shown whatever the width. Long headers wrap at their `-`/`_`
(or take their short form). A pipe or a file gets every column, each row on one line, so
grep and cut work.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

# A console's width for a pipe or a file when something other than a table is printed.
PIPE_WIDTH = 400
# Never hidden, whatever the width (an id, the simulated label).
ALWAYS = 1000
# What two neighbouring columns are apart (rich: padding collapsed, a blank divider).
GAP = 2
# The narrowest a free-text column gets (unless all its text is shorter); never below its
# longest word.
FREE_MIN = 12

_wide = False


def set_wide(wide: bool) -> None:
    """`--wide`: every column of every table, whatever the terminal's width."""
    global _wide
    _wide = bool(wide)


def console(stream: TextIO | None = None) -> Console:
    """A console on `stream` (stdout by default): a terminal's own width, else PIPE_WIDTH."""
    out = stream if stream is not None else sys.stdout
    terminal = Console(file=out).is_terminal
    return Console(file=out, width=None if terminal else PIPE_WIDTH, soft_wrap=not terminal)


@dataclass(frozen=True)
class Column:
    """A table column: `whole` values are never wrapped (ids, hosts, flag values, numbers);
    the others are text that may wrap between words. Columns with the lowest `keep` are
    hidden first when the terminal is too narrow (ALWAYS: never); `short` is the header
    used when the column is narrower than its header."""

    header: str
    whole: bool = True
    keep: int = 50
    short: str | None = None
    # A label's shorter form where the column is narrower than the label (never for a value
    # a user copies), e.g. {"SIMULATED (bwtune stand-in)": "SIMULATED"}.
    compact: tuple[tuple[str, str], ...] = ()


@dataclass
class Grid:
    """A table to print (print_renderable): its columns, rows and per-row styles."""

    columns: list[Column]
    title: str | None = None
    caption: str | None = None
    rows: list[list[str]] = field(default_factory=list)
    styles: list[str | None] = field(default_factory=list)

    def add_row(self, *cells: Any, style: str | None = None) -> None:
        self.rows.append(["" if cell is None else str(cell) for cell in cells])
        self.styles.append(style)


def table(columns: Sequence[str | Column], title: str | None = None, caption: str | None = None) -> Grid:
    """An empty table in the house style (a header rule, no borders); print it with
    print_renderable. A plain string column is a `whole` one."""
    return Grid([c if isinstance(c, Column) else Column(c) for c in columns], title=title, caption=caption)


def print_table(
    columns: Sequence[str | Column],
    rows: Iterable[Sequence[Any]],
    title: str | None = None,
    caption: str | None = None,
    stream: TextIO | None = None,
) -> None:
    """Print rows (cells are turned into text) under `columns` on `stream`."""
    made = table(columns, title=title, caption=caption)
    for row in rows:
        made.add_row(*row)
    print_renderable(made, stream)


def _pieces(header: str) -> list[str]:
    """A header cut after each `-`, `_` or space: where it may wrap."""
    return [piece for piece in re.findall(r"[^-_ ]*[-_ ]?", header) if piece]


def _wrap_header(header: str, width: int) -> str:
    lines: list[str] = []
    current = ""
    for piece in _pieces(header):
        if current and cell_len((current + piece).rstrip()) > width:
            lines.append(current.rstrip())
            current = ""
        current += piece
    lines.append(current.rstrip())
    return "\n".join(lines)


def _longest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=0)


@dataclass(frozen=True)
class Layout:
    shown: list[int]  # indices of the columns shown, in order
    widths: list[int]  # their widths
    headers: list[str]  # their headers, wrapped or short where narrower than the header
    hidden: list[str]  # the headers of the columns left out

    @property
    def width(self) -> int:
        return sum(self.widths) + GAP * max(len(self.widths) - 1, 0)


def fit(grid: Grid, width: int | None) -> Layout:
    """Which columns to show and how wide: every column at its natural width when `width`
    is None (--wide, a pipe), else what fits `width`, hiding the least kept columns first."""
    columns = grid.columns
    cells = [[row[i] if i < len(row) else "" for row in grid.rows] for i in range(len(columns))]
    widest = [
        max((cell_len(line) for c in col for line in c.splitlines() or [""]), default=0) for col in cells
    ]
    natural = [max(w, cell_len(c.header)) for w, c in zip(widest, columns, strict=True)]
    least = []
    for w, col, column in zip(widest, cells, columns, strict=True):
        header_min = (
            cell_len(column.short) if column.short else max(map(cell_len, _pieces(column.header) or [""]))
        )
        header_min = min(header_min, cell_len(column.header))
        if column.compact:
            short_forms = dict(column.compact)
            w = max((cell_len(short_forms.get(c, c)) for c in col), default=0)
            col = [short_forms.get(c, c) for c in col]
        if column.whole:
            least.append(max(w, header_min))
        else:
            words = max((_longest_word(c) for c in col), default=0)
            least.append(max(words, header_min, min(w, FREE_MIN)))
    shown = list(range(len(columns)))
    if width is None:
        widths = natural
    else:

        def total(indices: list[int]) -> int:
            return sum(least[i] for i in indices) + GAP * max(len(indices) - 1, 0)

        while total(shown) > width:
            droppable = [i for i in shown if columns[i].keep < ALWAYS]
            if not droppable:
                break
            # The least kept goes first; of equals, the rightmost.
            shown.remove(min(droppable, key=lambda i: (columns[i].keep, -i)))
        # A narrow column hidden on the way may fit again once a wide one has gone.
        for i in sorted(set(range(len(columns))) - set(shown), key=lambda i: (-columns[i].keep, i)):
            if total(sorted([*shown, i])) <= width:
                shown = sorted([*shown, i])
        widths = list(least)
        spare = width - total(shown)
        # Spare room: text first (fewer lines per row), then whole columns' full headers.
        for i in sorted(shown, key=lambda i: (columns[i].whole, i)):
            grow = min(max(spare, 0), natural[i] - widths[i])
            widths[i] += grow
            spare -= grow
    headers = []
    for i in shown:
        column, w = columns[i], widths[i]
        if cell_len(column.header) <= w:
            headers.append(column.header)
        elif column.short and cell_len(column.short) <= w:
            headers.append(column.short)
        else:
            headers.append(_wrap_header(column.header, w))
    hidden = [columns[i].header or "(label)" for i in range(len(columns)) if i not in shown]
    return Layout(shown, [widths[i] for i in shown], headers, hidden)


def _rich_table(grid: Grid, layout: Layout, rows: bool = True) -> Table:
    """The table as rich draws it; with `rows` False, its header and rule alone."""
    made = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    for header, w in zip(layout.headers, layout.widths, strict=True):
        made.add_column(Text(header), width=w, min_width=w, max_width=w, overflow="fold")
    if not rows:
        return made
    for row, style in zip(grid.rows, grid.styles, strict=True):
        made.add_row(*(Text(text) for text in _shown_cells(grid, layout, row)), style=style)
    return made


def _shown_cells(grid: Grid, layout: Layout, row: list[str]) -> list[str]:
    """The texts of `row` in the shown columns, a label in its short form where it is wider
    than its column."""
    cells = []
    for i, w in zip(layout.shown, layout.widths, strict=True):
        text = row[i] if i < len(row) else ""
        compact = grid.columns[i].compact
        if compact and cell_len(text) > w:
            text = dict(compact).get(text, text)
        cells.append(text)
    return cells


class _Drawn:
    """A Grid's table, exactly as rich's Table draws `_rich_table(grid, layout)`, fast for
    many rows. rich measures and renders every cell of every row through several layers (a
    10,000-row plan took over 30 s to draw); here rich draws the header and its rule, and
    the rows are put together line by line as its Table does (SIMPLE_HEAD, padding (0, 1)
    collapsed, no edge: each cell padded to its column's width plus one space, the last one
    to its width; a one-space divider), each distinct cell rendered once: a cell of plain
    printable text that fits its column, in a row without a style, is the text and spaces;
    any other (wrapped text, a newline, a styled row) is rendered by rich as its Table
    renders it, once per (text, width, style). tests/unit/cli/test_tables.py checks the two
    draw the same characters.
    """

    def __init__(self, grid: Grid, layout: Layout) -> None:
        self.grid = grid
        self.layout = layout

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        widths = self.layout.widths
        if not widths:  # nothing to put together
            yield from console.render(_rich_table(self.grid, self.layout), options)
            return
        yield from console.render(_rich_table(self.grid, self.layout, rows=False), options)
        last = len(widths) - 1
        # Each cell's width with its right padding.
        outer = [w + (0 if index == last else 1) for index, w in enumerate(widths)]
        new_line = Segment.line()
        rendered: dict[tuple[str, int, str | None], list[list[Segment]]] = {}
        for row, style_name in zip(self.grid.rows, self.grid.styles, strict=True):
            row_style = console.get_style(style_name) if style_name is not None else Style.null()
            cells: list[list[list[Segment]]] = []
            for text, w, width in zip(_shown_cells(self.grid, self.layout, row), widths, outer, strict=True):
                key = (text, width, style_name)
                lines = rendered.get(key)
                if lines is None:
                    lines = rendered[key] = _cell(console, options, text, w, width, style_name, row_style)
                cells.append(lines)
            height = max(len(lines) for lines in cells)
            if height > 1:
                cells = [
                    Segment.set_shape(Segment.align_top(lines, width, height, row_style), width, height)
                    for lines, width in zip(cells, outer, strict=True)
                ]
            # As rich's Table: a whitespace divider takes the row's background.
            divider = Segment(" ", row_style.background_style + Style.null())
            for line_no in range(height):
                for index, lines in enumerate(cells):
                    yield from lines[line_no]
                    if index != last:
                        yield divider
                yield new_line


def _cell(
    console: Console,
    options: ConsoleOptions,
    text: str,
    w: int,
    width: int,
    style_name: str | None,
    row_style: Style,
) -> list[list[Segment]]:
    """One cell's lines, each `width` wide (`w` and the cell's right padding)."""
    if style_name is None and text.isprintable() and cell_len(text) <= w:
        return [[Segment(text + " " * (width - cell_len(text)))]]
    # As rich's Table renders a cell (its column: justify left, fold, no highlight).
    render_options = options.update(
        width=width, justify="left", no_wrap=False, overflow="fold", height=None, highlight=False
    )
    lines = console.render_lines(Padding(Text(text), (0, width - w, 0, 0)), render_options, style=row_style)
    return Segment.set_shape(Segment.align_top(lines, width, len(lines), row_style), width, len(lines))


def hidden_note(hidden: Sequence[str]) -> str:
    """The line under a table some columns of which did not fit."""
    count = len(hidden)
    return f"{count} column{'s' if count > 1 else ''} hidden ({', '.join(hidden)}): --wide shows them"


def print_renderable(renderable: Any, stream: TextIO | None = None) -> None:
    """Print a table (or any rich renderable): styled on a terminal, plain text otherwise.

    Plain text has no trailing padding, so `row.endswith(...)`, `cut` and `awk` see cells.
    """
    out = stream if stream is not None else sys.stdout
    shown = console(out)
    if not isinstance(renderable, Grid):
        _emit(shown, out, lambda c: c.print(renderable))
        return
    terminal = shown.is_terminal
    layout = fit(renderable, shown.width if terminal and not _wide else None)
    # The table gets a console exactly as wide as it needs when it may be wider than the
    # terminal (--wide, a pipe): rich then never squeezes a column.
    drawn = (
        shown
        if layout.width <= shown.width and terminal
        else Console(file=out, width=max(layout.width, 1), force_terminal=terminal or None, soft_wrap=False)
    )

    def draw(c: Console) -> None:
        if renderable.title:
            shown_title = Text(renderable.title)
            c.print(shown_title, soft_wrap=True)  # a path in a title is never split
        c.print(_Drawn(renderable, layout))
        if layout.hidden:
            c.print(Text(hidden_note(layout.hidden)), soft_wrap=True)
        if renderable.caption:
            # Prose: wrapped between words on a terminal; one line per line on a pipe.
            c.print(Text(renderable.caption), soft_wrap=not terminal, width=shown.width if terminal else None)

    _emit(drawn, out, draw)


def _emit(shown: Console, out: TextIO, draw: Any) -> None:
    if shown.is_terminal:
        draw(shown)
        return
    with shown.capture() as captured:
        draw(shown)
    out.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
