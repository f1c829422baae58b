"""report.html: one self-contained page (inline CSS, JS and SVG; nothing from the network)."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import __version__
from bwtune.analysis import speculative as spec_view
from bwtune.analysis.capacity import slo_text, value_text
from bwtune.report import svg
from bwtune.report.launch import recipe_command
from bwtune.report.model import (
    COLD_START_COLUMNS,
    COLD_START_NOTE,
    SIMULATED_LABEL,
    ReportData,
    Row,
    cold_start_rows,
    failed_counts,
    launches_text,
)
from bwtune.report.regression_chart import regression_section

_CSS = """
:root { --fg:#111827; --muted:#6b7280; --line:#e5e7eb; --ok:#16a34a; --bad:#b91c1c; --bg:#f8fafc; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
       color:var(--fg); background:var(--bg); }
main { max-width:1180px; margin:0 auto; padding:24px 28px 60px; }
h1 { font-size:24px; margin:0 0 4px; } h2 { font-size:18px; margin:0 0 12px; display:flex; gap:10px;
     align-items:center; }
section { background:white; border:1px solid var(--line); border-radius:10px; padding:18px 20px;
          margin:18px 0; }
.sub { color:var(--muted); margin:0; }
.banner { background:#fef2f2; color:var(--bad); border:2px solid #fca5a5; border-radius:10px;
          padding:10px 16px; font-weight:700; margin:16px 0 0; }
.sim { font-size:11px; font-weight:700; color:var(--bad); border:1px solid #fca5a5; background:#fef2f2;
       border-radius:999px; padding:1px 8px; letter-spacing:.02em; }
.cards { display:grid; grid-template-columns:repeat(auto-fit,minmax(150px,1fr)); gap:12px; }
.card { border:1px solid var(--line); border-radius:8px; padding:10px 12px; }
.card b { display:block; font-size:20px; } .card span { color:var(--muted); font-size:12px; }
table { border-collapse:collapse; width:100%; font-variant-numeric:tabular-nums; }
th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-size:12px; color:var(--muted); font-weight:600; cursor:pointer; user-select:none;
     white-space:nowrap; }
th.num, td.num { text-align:right; white-space:nowrap; }
td.id { white-space:nowrap; }
tr.best td { background:#f0fdf4; font-weight:600; }
.status { font-size:12px; border-radius:4px; padding:1px 6px; white-space:nowrap; }
.status.ok { background:#dcfce7; color:#166534; } .status.bad { background:#fee2e2; color:#991b1b; }
.status.plan { background:#f1f5f9; color:#475569; }
code, pre { font:12.5px/1.45 ui-monospace,"DejaVu Sans Mono",Menlo,monospace; }
pre { background:#0f172a; color:#e2e8f0; border-radius:8px; padding:12px 14px; overflow:auto; margin:8px 0; }
pre.log { max-height:260px; background:#1e293b; }
.flags { color:var(--muted); font-size:12px; }
.chart { width:100%; height:auto; display:block; }
details { border:1px solid var(--line); border-radius:8px; padding:8px 12px; margin:8px 0; }
summary { cursor:pointer; font-weight:600; }
table.facts { margin-top:12px; } table.facts th { width:110px; cursor:default; }
.grid2 { display:grid; grid-template-columns:minmax(0,1fr) minmax(0,1fr); gap:16px; }
.grid2 > div { min-width:0; } .grid2 pre { max-width:100%; }
@media (max-width: 900px) { table.facts { margin-top:12px; } table.facts th { width:110px; cursor:default; }
.grid2 { grid-template-columns:minmax(0,1fr); } }
button.copy { float:right; font-size:12px; border:1px solid var(--line); background:white;
              border-radius:6px; padding:2px 8px; cursor:pointer; }
footer { color:var(--muted); font-size:12px; text-align:center; }
.left-out { background:#fffbeb; border:1px solid #fcd34d; border-radius:8px; padding:8px 12px; }
.tie { color:#92400e; } span.tie { font-size:12px; white-space:nowrap; }
span.launches { display:block; color:var(--muted); font-size:11px; font-weight:400; cursor:help; }
"""

# Sortable tables, copy buttons; errors are recorded on <body> so a headless test can see them.
_JS = """
(function () {
  var body = document.body;
  window.addEventListener('error', function (e) {
    body.dataset.errors = (body.dataset.errors || '') + e.message;
  });
  function cellValue(td) { var v = td.getAttribute('data-sort'); return v === null ? td.textContent : v; }
  document.querySelectorAll('table.sortable th').forEach(function (th, index) {
    th.addEventListener('click', function () {
      var tbody = th.closest('table').tBodies[0];
      var rows = Array.prototype.slice.call(tbody.rows);
      var dir = th.dataset.dir === 'asc' ? -1 : 1;
      th.dataset.dir = dir === 1 ? 'asc' : 'desc';
      rows.sort(function (a, b) {
        var x = cellValue(a.cells[index]), y = cellValue(b.cells[index]);
        var nx = parseFloat(x), ny = parseFloat(y);
        if (!isNaN(nx) && !isNaN(ny)) { return (nx - ny) * dir; }
        return x.localeCompare(y) * dir;
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
    });
  });
  document.querySelectorAll('button.copy').forEach(function (button) {
    button.addEventListener('click', function () {
      var text = document.getElementById(button.dataset.target).textContent;
      if (navigator.clipboard) { navigator.clipboard.writeText(text); button.textContent = 'copied'; }
    });
  });
  body.dataset.charts = String(document.querySelectorAll('svg.chart').length);
  body.dataset.ready = '1';
})();
"""

NA = "\u2013"  # en dash: a missing value


def _fmt(value: float | None) -> str:
    if value is None:
        return NA
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.3f}"


def _sim(data: ReportData) -> str:
    return f'<span class="sim">{escape(SIMULATED_LABEL)}</span>' if data.simulated else ""


def _section(data: ReportData, ident: str, title: str, body: str) -> str:
    return f'<section id="{ident}"><h2>{escape(title)} {_sim(data)}</h2>{body}</section>'


def _card(value: Any, caption: str) -> str:
    return f'<div class="card"><b>{escape(str(value))}</b><span>{escape(caption)}</span></div>'


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def _summary(data: ReportData) -> str:
    s = data.summary
    cards = [
        _card(s["results"], f"results ({s['configs']} configs)"),
        _card(s["launched"], "launched"),
        _card(s["ok"], "ok"),
        _card(sum(s["failed"].values()), "failed"),
        _card(sum(s["not_launched"].values()), "not launched (pruned, duplicate)"),
        _card(len(s["hosts"]), "hosts"),
        _card(len(s["workloads"]), "workloads"),
    ]
    facts = [
        ("plan", data.plan_text),
        ("objective", data.objective_text),
        ("workloads", ", ".join(data.workloads) or "none"),
        ("hosts", ", ".join(s["hosts"]) or "none"),
        ("failures", _counts(s["failed"]) or "none"),
        ("earlier launches failed", failed_counts([f for _row, f in data.earlier_failures])
         + " (re-measured configs; not in any value)" if data.earlier_failures else ""),
        ("not launched", _counts(s["not_launched"]) or "none"),
        ("screened out", f"{s['screened_out']} (ok on the short screen, not worth the full workloads)"
         if s["screened_out"] else ""),
        ("re-measured", f"{s['superseded']} earlier measurements kept (bwtune export shows them)"
         if s["superseded"] else ""),
        ("started", data.created_at),
    ]  # fmt: skip
    facts = [(k, v) for k, v in facts if v]
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    return f'<div class="cards">{"".join(cards)}</div>{_left_out(data)}<table class="facts">{rows}</table>'


def _left_out(data: ReportData) -> str:
    """A paged report (a big run) says what it shows and where the rest is."""
    return f'<p class="left-out">{escape(data.left_out_text)}</p>' if data.left_out else ""


def _ties(data: ReportData) -> str:
    ties = data.ties
    if not ties:
        return ""
    names = ", ".join(f"{row.id} @ {row.host}" for row in ties)
    return (
        f'<p class="tie">Tied with the winner (95% CIs overlap, within each other\'s noise): '
        f"{escape(names)}. This run does not tell them apart; more repetitions might.</p>"
    )


def _resolution(data: ReportData) -> str:
    if not data.resolution:
        return ""
    items = "".join(f"<li><code>{escape(change)}</code></li>" for change in data.resolution)
    return (
        '<p class="sub">SGLang resolves these arguments itself (the plan\'s recorded resolution); '
        f"the command and the host_vars are what was measured:</p><ul>{items}</ul>"
    )


def _winner(data: ReportData) -> str:
    best = data.best
    if best is None or data.launch_command_multiline is None or data.host_vars is None:
        return '<p class="sub">No config finished with status ok, so there is no winner.</p>'
    ci = f" (95% CI {_fmt(best.ci95[0])} \u2013 {_fmt(best.ci95[1])})" if best.ci95 else ""
    launches = f", {launches_text(best, _fmt)}" if best.launches else ""
    return (
        f"<p><b>{escape(best.id)}</b> on <b>{escape(best.host)}</b>: {escape(data.objective['metric'])} "
        f"<b>{_fmt(best.objective)}</b>{escape(ci)} on {escape(str(data.objective.get('workload')))}"
        f"{escape(launches)}"
        f' <span class="flags">{escape(best.label)}</span></p>{_ties(data)}'
        '<div class="grid2"><div><button class="copy" data-target="launch-cmd">copy</button>'
        "<b>Launch command</b>"
        f'<pre id="launch-cmd">{escape(data.launch_command_multiline)}</pre></div>'
        '<div><button class="copy" data-target="host-vars">copy</button><b>host_vars for the server role</b>'
        f'<pre id="host-vars">{escape(data.host_vars)}</pre></div></div>'
        '<p class="sub">Share it as a recipe another node verifies: '
        f"<code>{escape(recipe_command(data.run_id, best.id, best.host))}</code> (docs/recipes.md)</p>"
        f"{_resolution(data)}"
    )


def _status(row: Row) -> str:
    # Red is for launches that failed; pruned and duplicate are the plan's decisions (grey).
    kind = "ok" if row.status == "ok" else ("bad" if contract.is_launched(row.status) else "plan")
    return f'<span class="status {kind}">{escape(row.status)}</span>'


def _marks(row: Row) -> str:
    if row.is_best:
        return " ★"
    if row.tied_with_best:
        return ' <span class="tie" title="95% CI overlaps the winner\'s: tied">≈ tied</span>'
    return ""


def _launches(row: Row) -> str:
    """Under a re-measured config's value: "mean of N launches", each launch in its tooltip."""
    if not row.launches_caption:
        return ""
    tooltip = escape(launches_text(row, _fmt) or row.launches_caption)
    return f'<span class="launches" title="{tooltip}">{escape(row.launches_caption)}</span>'


def _table(data: ReportData) -> str:
    metric = escape(data.objective["metric"])
    head = (
        "<tr><th>#</th><th>config</th><th>host</th><th>status</th><th>varying flags</th>"
        f'<th class="num">{metric}</th><th class="num">95% CI</th><th class="num">reps</th></tr>'
    )
    body = []
    for rank, row in enumerate(data.rows, start=1):
        ci = f"{_fmt(row.ci95[0])} \u2013 {_fmt(row.ci95[1])}" if row.ci95 else NA
        sort_value = "" if row.objective is None else f"{row.objective:.6f}"
        body.append(
            f'<tr class="{"best" if row.is_best else ""}"><td class="num">{rank}</td>'
            f'<td class="id"><code>{escape(row.id)}</code>{_marks(row)}</td>'
            f'<td class="id">{escape(row.host)}</td>'
            f'<td data-sort="{escape(row.status)}">{_status(row)}</td>'
            f'<td class="flags">{escape(row.label)}</td>'
            f'<td class="num" data-sort="{sort_value}">{_fmt(row.objective)}{_launches(row)}</td>'
            f'<td class="num">{escape(ci)}</td><td class="num">{row.repetitions}</td></tr>'
        )
    table = f'<table class="sortable"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'
    return _left_out(data) + table


def _bars(data: ReportData) -> str:
    bars = [
        svg.Bar(
            label=f"{row.id} @ {row.host}" + (" ≈" if row.tied_with_best and not row.is_best else ""),
            detail=row.short_label,
            value=row.objective,
            ci95=row.ci95,
            kind="best" if row.is_best else ("ok" if row.status == "ok" else row.status),
            tooltip=f"{row.id} @ {row.host}: {_fmt(row.objective)} ({row.status}) {row.label}"
            + (f"; {launches_text(row, _fmt)}" if row.launches else ""),
        )
        for row in data.rows
        if row.objective is not None
    ]
    if not bars:
        return '<p class="sub">No config has a value for the objective.</p>'
    o = data.objective
    title = f"{o['metric']} on {o.get('workload')} ({o['goal']} is better), mean with 95% CI"
    axes = " · ".join(data.label_axes) or "the flags that vary"
    note = (
        '<p class="sub">Green: the winner. ≈: tied with the winner (95% CIs overlap). Grey dashed: '
        f"measured but failed (e.g. wrong-output), never eligible to win. Under each id: {escape(axes)}.</p>"
    )
    return svg.bar_chart(bars, title=title, unit=o["metric"], simulated=data.simulated) + note


def _pareto(data: ReportData) -> str:
    if not data.pareto:
        return '<p class="sub">No ok config reports throughput and decode rate.</p>'
    return svg.pareto_chart(data.pareto, simulated=data.simulated) + (
        '<p class="sub">Each point is one ok config on one workload: per-user speed (output tok/s per '
        "request) across, output tok/s per GPU up (the server's output throughput over the GPUs it uses: "
        "tp-size x pp-size, x dp-size without DP attention). Outlined points are on that workload's Pareto "
        "frontier: no other config is both at least as fast per user and at least as high per GPU, better "
        "on one. Failed and not-launched configs are never points.</p>"
    )


def _speculative(data: ReportData) -> str:
    """A `bwtune speculative` run: per load, speculative decoding off against each setting."""
    link = data.speculative_link or {}
    base = link.get("base_config") or {}
    sim = f" {SIMULATED_LABEL}: the stand-in's load model." if data.simulated else ""
    note = (
        f"The stage on run {link.get('base_run')}'s winner {base.get('id')} (on {base.get('host')}; it ran "
        f"{base.get('setting')}): its flags held, speculative decoding off and "
        f"{max(0, len(link.get('settings') or {}) - 1)} settings of num-steps / eagle-topk / draft tokens, "
        "each measured at every load. Accept length: tokens per verify step (SGLang's "
        "completion_tokens / spec_verify_ct)." + sim
    )
    parts = [f'<p class="sub">{escape(note)}</p>']
    verdict = data.speculative_conclusion
    if verdict is not None:
        lines = [f"At the target load ({verdict['load']}): {verdict['winner']}."]
        if verdict["wins"]:
            lines.append(f"MTP wins at: {', '.join(verdict['wins'])}.")
        if verdict["loses"]:
            lines.append(f"MTP loses at: {', '.join(verdict['loses'])}.")
        parts.append(f'<p class="verdict"><b>{escape(lines[0])}</b> {escape(" ".join(lines[1:]))}</p>')
    if link.get("dropped"):
        items = "".join(f"<li>not planned: {escape(str(d))}</li>" for d in link["dropped"])
        parts.append(f"<ul>{items}</ul>")
    head = (
        "<tr><th>workload</th><th>load</th><th>metric</th><th>setting</th>"
        '<th class="num">value</th><th class="num">accept length</th><th>verdict</th></tr>'
    )
    body = []
    for row in data.speculative:
        target = " (target)" if row["target"] else ""
        for i, setting in enumerate(row["settings"]):
            mark = " ★" if setting["setting"] == row["winner"] else ""
            accept = setting["accept_length"]
            first = i == 0
            body.append(
                f"<tr><td>{escape(row['workload'] + target) if first else ''}</td>"
                f"<td>{escape(row['load']) if first else ''}</td>"
                f"<td>{escape(row['metric']) if first else ''}</td>"
                f"<td><code>{escape(setting['setting'])}</code>{mark}</td>"
                f'<td class="num">{_fmt(setting["value"])}</td>'
                f'<td class="num">{"" if accept is None else f"{accept:.2f}"}</td>'
                f"<td>{escape(spec_view.verdict_text(row)) if first else ''}</td></tr>"
            )
    parts.append(f'<table class="speculative"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>')
    return "".join(parts)


def _capacity(data: ReportData) -> str:
    """Each capacity workload's search per config: the highest rate that met the SLO."""
    head = (
        "<tr><th>workload</th><th>config</th><th>host</th>"
        '<th class="num">capacity</th><th>SLO</th><th class="num">last passing</th>'
        '<th class="num">first failing</th><th class="num">rounds</th><th>note</th></tr>'
    )
    best = (data.best.host, data.best.id) if data.best else None
    body = []
    for row in data.capacity:
        mark = " ★" if (row["host"], row["id"]) == best else ""
        body.append(
            f"<tr><td>{escape(row['workload'])}</td>"
            f'<td class="id"><code>{escape(row["id"])}</code>{mark}</td>'
            f'<td class="id">{escape(row["host"])}</td>'
            f'<td class="num" data-sort="{escape(str(row["value"]))}">{escape(value_text(row))}</td>'
            f'<td class="flags">{escape(slo_text(row["slo"]))}</td>'
            f'<td class="num">{_fmt(row["last_passing"])}</td>'
            f'<td class="num">{_fmt(row["first_failing"])}</td>'
            f'<td class="num">{row["rounds"]}</td><td class="flags">{escape(row["reason"] or "")}</td></tr>'
        )
    sim = f" {SIMULATED_LABEL}: measured on the stand-in's load model." if data.simulated else ""
    note = (
        "The highest request rate (requests/s) at which every request succeeded and each SLO "
        "percentile held, found by bracketing and bisection on the warm server (docs/capacity.md). "
        "Capacity 0: no rate tried met the SLO; at least: every rate tried met it." + sim
    )
    return (
        f'<p class="sub">{escape(note)}</p>'
        f'<table class="sortable capacity"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'
    )


def _latency_fronts(data: ReportData) -> str:
    """Per workload and latency percentile: the configs no other ok config beats on both
    throughput and that latency, the winner marked wherever it lies."""
    blocks = []
    for front in data.latency_fronts:
        latency, slo = front["latency_metric"], front["slo"]
        shown = [p for p in front["points"] if p["on_front"] or p["is_best"]]
        dominated = len(front["points"]) - sum(p["on_front"] for p in front["points"])
        rows = []
        for p in shown:
            over = slo is not None and p["latency"] > slo
            flags = ("front" if p["on_front"] else "dominated") + (", over the SLO" if over else "")
            rows.append(
                f'<tr class="{"best" if p["is_best"] else ""}"><td class="id"><code>{escape(p["id"])}</code>'
                f'{" ★" if p["is_best"] else ""}</td><td class="id">{escape(p["host"])}</td>'
                f'<td class="num">{_fmt(p["throughput"])}</td><td class="num">{_fmt(p["latency"])}</td>'
                f"<td>{escape(flags)}</td></tr>"
            )
        slo_note = f"; SLO {escape(latency)} &lt;= {_fmt(slo)}" if slo is not None else ""
        blocks.append(
            f'<h3 class="front" data-workload="{escape(front["workload"])}" data-latency="{escape(latency)}">'
            f"{escape(front['workload'])}: {escape(front['throughput_metric'])} vs {escape(latency)}</h3>"
            f'<p class="sub">{len(front["points"]) - dominated} on the front; {dominated} ok configs '
            "dominated (another has at least their throughput and at most their latency, and is better "
            f"on one){slo_note}.</p>"
            f'<table class="sortable"><thead><tr><th>config</th><th>host</th>'
            f'<th class="num">{escape(front["throughput_metric"])}</th><th class="num">{escape(latency)}</th>'
            f"<th>on the front</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    sim = f" {SIMULATED_LABEL}: stand-in numbers." if data.simulated else ""
    note = (
        "Each ok config on each workload is a point: higher throughput and lower latency are better. "
        "Failed and not-launched configs are never on a front. ★: the winner by the objective." + sim
    )
    # One chart: the objective's workload at the first percentile it has (the tables have all).
    workload = data.objective.get("workload")
    drawn = next((f for f in data.latency_fronts if f["workload"] == workload), data.latency_fronts[0])
    chart = svg.latency_front_chart(drawn, simulated=data.simulated)
    return f'{chart}<p class="sub">{escape(note)}</p>{"".join(blocks)}'


def _cold_start(data: ReportData) -> str:
    rows = cold_start_rows(data)
    if not rows:
        return '<p class="sub">No launch of this run recorded its cold start.</p>'
    sim = (
        f" {SIMULATED_LABEL}: the stand-in's simulated weight load and graph capture."
        if data.simulated
        else ""
    )
    head = "<tr><th>config</th><th>host</th><th>status</th><th>reached</th>" + "".join(
        f'<th class="num">{escape(caption)}</th>' for _key, caption in COLD_START_COLUMNS
    )
    body = []
    for row, cold in rows:
        cells = "".join(
            f'<td class="num" data-sort="{escape(str(cold.get(key) if cold.get(key) is not None else ""))}">'
            f"{_fmt(cold.get(key))}</td>"
            for key, _caption in COLD_START_COLUMNS
        )
        body.append(
            f'<tr><td class="id"><code>{escape(row.id)}</code></td><td class="id">{escape(row.host)}</td>'
            f'<td data-sort="{escape(row.status)}">{_status(row)}</td>'
            f"<td>{escape(str(cold.get('reached')))}</td>{cells}</tr>"
        )
    return (
        f'<p class="sub">{escape(COLD_START_NOTE + sim)}</p>'
        f'<table class="sortable"><thead>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def _failures(data: ReportData) -> str:
    none = not data.failures and not data.earlier_failures
    blocks = ['<p class="sub">No launch failed.</p>'] if none else []
    for klass, rows in data.failures.items():
        items = []
        for row in rows:
            failure = row.result.get("failure") or {}
            tail = "\n".join(failure.get("log_tail") or [])
            items.append(
                f"<details><summary><code>{escape(row.id)}</code> @ {escape(row.host)}: "
                f"{escape(str(failure.get('message', '')))}</summary>"
                f'<p class="flags">{escape(row.label)}</p><pre class="log">{escape(tail)}</pre></details>'
            )
        blocks.append(f'<h3>{escape(klass)} <span class="flags">({len(rows)})</span></h3>{"".join(items)}')
    if data.earlier_failures:
        items = [
            f"<details><summary><code>{escape(row.id)}</code> @ {escape(row.host)}, attempt "
            f"{escape(str(failed['attempt']))}: {escape(failed['status'])}: {escape(failed['message'])}"
            f'</summary><p class="flags">{escape(row.label)}'
            + (f" (log {escape(str(failed['log_path']))})" if failed.get("log_path") else "")
            + f'</p><pre class="log">{escape(chr(10).join(failed["log_tail"]))}</pre></details>'
            for row, failed in data.earlier_failures
        ]
        blocks.append(
            "<h3>Earlier launches of re-measured configs that failed "
            f'<span class="flags">({len(data.earlier_failures)})</span></h3>{"".join(items)}'
        )
    if data.not_launched:
        items = []
        for klass, rows in data.not_launched.items():
            for row in rows:
                message = (row.result.get("failure") or {}).get("message", "")
                items.append(
                    f"<li><code>{escape(row.id)}</code> @ {escape(row.host)}: {escape(klass)}: "
                    f'{escape(str(message))} <span class="flags">{escape(row.label)}</span></li>'
                )
        blocks.append(
            '<h3>Not launched <span class="flags">(the plan decided; not failures)</span></h3>'
            f'<ul class="not-launched">{"".join(items)}</ul>'
        )
    return "".join(blocks)


def _stack(data: ReportData) -> str:
    head = "<tr><th>host</th><th>GPU</th><th>GPU facts</th><th>SGLang</th><th>stack fingerprint</th></tr>"
    rows = []
    for host in data.hosts:
        facts = host.get("gpu_facts") or {}
        facts_text = ", ".join(f"{k}: {v}" for k, v in facts.items()) or NA
        rows.append(
            f"<tr><td>{escape(host['host'])}</td><td>{escape(str(host.get('gpu') or NA))}</td>"
            f'<td class="flags">{escape(facts_text)}</td>'
            f"<td>{escape(str(host.get('sglang_version') or NA))}</td>"
            f"<td><code>{escape(str(host.get('stack_fingerprint') or NA))}</code></td></tr>"
        )
    details = [
        f"<details><summary>{escape(h['host'])} stack details</summary>"
        f"<pre>{escape(json.dumps(h['stack'], indent=2, sort_keys=True))}</pre></details>"
        for h in data.hosts
        if h.get("stack")
    ]
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>{''.join(details)}"


def render_html(data: ReportData) -> str:
    title = f"bwtune report {data.run_id}" + (f" ({SIMULATED_LABEL})" if data.simulated else "")
    banner = (
        f'<p class="banner" id="simulated-banner">{escape(SIMULATED_LABEL)}: these numbers come from the '
        "stand-in server, not from a GPU. They exercise the pipeline; do not use them for decisions.</p>"
        if data.simulated
        else ""
    )
    sections = [
        _section(data, "summary", "Plan summary", _summary(data)),
        _section(data, "winner", "Winning config", _winner(data)),
        _section(data, "objective", "Objective per config", _bars(data)),
        *(
            [_section(data, "speculative", "Speculative decoding", _speculative(data))]
            if data.speculative_link is not None
            else []
        ),
        *(
            [_section(data, "capacity", "Capacity under the latency SLO", _capacity(data))]
            if data.capacity
            else []
        ),
        _section(data, "pareto", "Per-user speed vs throughput per GPU (Pareto front)", _pareto(data)),
        *(
            [
                _section(
                    data, "latency", "Throughput vs latency percentile (Pareto front)", _latency_fronts(data)
                )
            ]
            if data.latency_fronts
            else []
        ),
        _section(data, "configs", "Configs", _table(data)),
        _section(data, "cold-start", "Cold start per launch", _cold_start(data)),
        _section(data, "failures", "Failures by class, and configs not launched", _failures(data)),
        _section(data, "stack", "Hosts and stack fingerprint", _stack(data)),
    ]
    if data.regression is not None:  # a `bwtune regress` run: its history per config, first
        body = regression_section(data.regression)
        sections.insert(0, _section(data, "regression", "Regression against history", body))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body><main>"
        f"<h1>bwtune report <code>{escape(data.run_id)}</code> {_sim(data)}</h1>"
        f'<p class="sub">Objective: {escape(data.objective_text)}.</p>{banner}'
        f"{''.join(sections)}"
        f"<footer>bwtune {escape(__version__)} · run {escape(data.run_id)}"
        f"{' · ' + escape(SIMULATED_LABEL) if data.simulated else ''}</footer>"
        f"</main><script>{_JS}</script></body></html>\n"
    )
