"""How every `bwtune` command prints a table: rich, one style, whole rows when piped."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table

# A pipe or a file gets every row on one line (no folding at 80 columns): grep and cut work.
PIPE_WIDTH = 400


def console(stream: TextIO | None = None) -> Console:
    """A console on `stream` (stdout by default): a terminal's own width, else PIPE_WIDTH."""
    out = stream if stream is not None else sys.stdout
    terminal = Console(file=out).is_terminal
    return Console(file=out, width=None if terminal else PIPE_WIDTH, soft_wrap=not terminal)


def table(columns: Sequence[str], title: str | None = None, caption: str | None = None) -> Table:
    """An empty table in the house style: a header rule, no borders, no edge padding."""
    made = Table(
        title=title,
        title_justify="left",
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
    )
    for column in columns:
        made.add_column(column, overflow="fold")
    return made


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    title: str | None = None,
    caption: str | None = None,
    stream: TextIO | None = None,
) -> None:
    """Print rows (cells are turned into text) under `columns` on `stream`."""
    made = table(columns, title=title, caption=caption)
    for row in rows:
        made.add_row(*(str(cell) for cell in row))
    print_renderable(made, stream)


def print_renderable(renderable: Any, stream: TextIO | None = None) -> None:
    """Print a table (or any rich renderable): styled on a terminal, plain text otherwise.

    Plain text has no trailing padding, so `row.endswith(...)`, `cut` and `awk` see cells.
    """
    out = stream if stream is not None else sys.stdout
    shown = console(out)
    if shown.is_terminal:
        shown.print(renderable)
        return
    with shown.capture() as captured:
        shown.print(renderable)
    out.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
