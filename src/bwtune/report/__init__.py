"""Reports of one run: report.md and a self-contained report.html.

`write_report(conn, run_id, html_path=..., md_path=...)` is the entry point; `load_report`
gathers the data, `render_html` and `render_markdown` turn it into text.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from bwtune import store
from bwtune.report.html import render_html
from bwtune.report.markdown import render_markdown
from bwtune.report.model import SIMULATED_LABEL, ReportData, load_report

__all__ = ["SIMULATED_LABEL", "ReportData", "load_report", "render_html", "render_markdown", "write_report"]


def write_report(
    conn: sqlite3.Connection,
    run_id: str,
    *,
    html_path: Path | None = None,
    md_path: Path | None = None,
    regression: dict[str, Any] | None = None,
) -> ReportData:
    """Render the run's report to the given paths (atomically: a reader never sees half a file).

    `regression` (bwtune.regression_history's to_dict) adds the regression section: the
    history per config with its level, change points and baseline."""
    data = load_report(conn, run_id)
    if regression is None:
        regression = _saved_regression(run_id)
    if regression is not None:
        data = replace(data, regression=regression)
    if html_path is not None:
        _write_atomic(html_path, render_html(data))
    if md_path is not None:
        _write_atomic(md_path, render_markdown(data))
    return data


def _saved_regression(run_id: str) -> dict[str, Any] | None:
    """What `bwtune regress` saved for the run (regression.json in its folder), if anything:
    `bwtune report RUN` of a regression run keeps the history section."""
    try:
        saved = json.loads((store.run_dir(run_id) / "regression.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return saved if isinstance(saved, dict) and saved.get("run_id") == run_id and "configs" in saved else None


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
