"""report.md: the same report as plain Markdown (tables, code blocks, no charts)."""

from __future__ import annotations

from bwtune.analysis import speculative as spec_view
from bwtune.analysis.capacity import slo_text, value_text
from bwtune.report.launch import recipe_command
from bwtune.report.model import (
    COLD_START_COLUMNS,
    COLD_START_NOTE,
    SIMULATED_LABEL,
    ReportData,
    cold_start_rows,
    failed_counts,
    launches_text,
)

NA = "\u2013"  # en dash: a missing value


def _fmt(value: float | None) -> str:
    if value is None:
        return NA
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.3f}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(data: ReportData) -> str:
    sim = f" — **{SIMULATED_LABEL}**" if data.simulated else ""
    out = [f"# bwtune report `{data.run_id}`{sim}", ""]
    if data.simulated:
        out += [
            f"> **{SIMULATED_LABEL}**: these numbers come from the stand-in server, not from a GPU.",
            "",
        ]
    s = data.summary

    out += [f"## Plan summary{sim}", ""]
    if data.left_out:
        out += [f"> {data.left_out_text}", ""]
    out.append(f"- objective: {data.objective_text}")
    out.append(f"- plan: {data.plan_text}")
    out.append(
        f"- results: {s['results']} ({s['configs']} configs on {len(s['hosts'])} hosts), "
        f"launched {s['launched']}"
    )
    out.append(
        f"- ok: {s['ok']}; failed: {sum(s['failed'].values())}; "
        f"not launched (pruned, duplicate): {sum(s['not_launched'].values())}"
    )
    if s["failed"]:
        out.append("- failures: " + ", ".join(f"{k} {v}" for k, v in s["failed"].items()))
    if data.earlier_failures:
        out.append(
            "- earlier launches that failed (re-measured configs; not in any value): "
            + failed_counts([failed for _row, failed in data.earlier_failures])
        )
    if s["not_launched"]:
        out.append("- not launched: " + ", ".join(f"{k} {v}" for k, v in s["not_launched"].items()))
    if s["screened_out"]:
        out.append(
            f"- screened out: {s['screened_out']} (ok on the short screen, not worth the full workloads)"
        )
    if s["superseded"]:
        out.append(f"- re-measured: {s['superseded']} earlier measurements kept (bwtune export shows them)")
    out.append(f"- workloads: {', '.join(data.workloads) or 'none'}")
    out.append(f"- hosts: {', '.join(s['hosts']) or 'none'}")
    out.append(f"- started: {data.created_at}")
    out.append("")

    out += [f"## Winning config{sim}", ""]
    best = data.best
    if best is None or data.launch_command_multiline is None or data.host_vars is None:
        out += ["No config finished with status ok, so there is no winner.", ""]
    else:
        ci = f" (95% CI {_fmt(best.ci95[0])} \u2013 {_fmt(best.ci95[1])})" if best.ci95 else ""
        launches = f", {launches_text(best, _fmt)}" if best.launches else ""
        out += [
            f"`{best.id}` on `{best.host}`: {data.objective['metric']} **{_fmt(best.objective)}**{ci} "
            f"on {data.objective.get('workload')} ({best.label}){launches}",
            "",
            *(
                [
                    "Tied with the winner (95% CIs overlap, within each other's noise): "
                    + ", ".join(f"`{r.id}` @ {r.host}" for r in data.ties)
                    + ". This run does not tell them apart.",
                    "",
                ]
                if data.ties
                else []
            ),
            "Launch command:",
            "",
            "```sh",
            data.launch_command_multiline,
            "```",
            "",
            "host_vars for the server role:",
            "",
            "```yaml",
            data.host_vars.rstrip("\n"),
            "```",
            "",
            "Share it as a recipe another node verifies: "
            f"`{recipe_command(data.run_id, best.id, best.host)}` (docs/recipes.md).",
            "",
        ]
        if data.resolution:
            out += ["SGLang resolves these arguments itself (the plan's recorded resolution):", ""]
            out += [f"- `{change}`" for change in data.resolution] + [""]

    out += _speculative(data, sim)
    out += _capacity(data, sim)

    out += [f"## Configs{sim}", ""]
    if data.left_out:
        out += [f"> {data.left_out_text}", ""]
    out.append(f"| # | config | host | status | varying flags | {data.objective['metric']} | 95% CI | reps |")
    out.append("|---:|---|---|---|---|---:|---:|---:|")
    for rank, row in enumerate(data.rows, start=1):
        ci = f"{_fmt(row.ci95[0])} \u2013 {_fmt(row.ci95[1])}" if row.ci95 else NA
        star = " ★" if row.is_best else (" ≈ tied" if row.tied_with_best else "")
        value = _fmt(row.objective) + (f" ({row.launches_caption})" if row.launches_caption else "")
        out.append(
            f"| {rank} | `{row.id}`{star} | {_cell(row.host)} | {row.status} | {_cell(row.label)} "
            f"| {value} | {ci} | {row.repetitions} |"
        )
    out.append("")
    remeasured = [row for row in data.rows if row.launches]
    if remeasured:
        out += [
            "Re-measured configs are ranked by the mean over their launches on one host and stack "
            "(the value, CI and reps above are over every launch):",
            "",
            *(f"- `{row.id}` @ {_cell(row.host)}: {launches_text(row, _fmt)}" for row in remeasured),
            "",
        ]

    out += [f"## Per-user speed vs throughput per GPU (Pareto front){sim}", ""]
    if data.pareto:
        out.append(
            "| workload | config | host | tok/s per user | tok/s per GPU | GPUs | output tok/s | Pareto |"
        )
        out.append("|---|---|---|---:|---:|---:|---:|---|")
        for p in sorted(data.pareto, key=lambda p: (p.workload, -p.per_gpu)):
            out.append(
                f"| {p.workload} | `{p.id}` | {_cell(p.host)} | {_fmt(p.decode_rate)} | {_fmt(p.per_gpu)} "
                f"| {p.gpus} | {_fmt(p.throughput)} | {'frontier' if p.on_frontier else ''} |"
            )
    else:
        out.append("No ok config reports throughput and decode rate.")
    out.append("")

    out += _latency_fronts(data, sim)

    out += [f"## Cold start per launch{sim}", ""]
    out += _cold_start(data)

    out += [f"## Failures by class, and configs not launched{sim}", ""]
    if not data.failures and not data.earlier_failures:
        out += ["No launch failed.", ""]
    for klass, rows in data.failures.items():
        out += [f"### {klass} ({len(rows)})", ""]
        for row in rows:
            failure = row.result.get("failure") or {}
            out += [f"- `{row.id}` @ {row.host}: {failure.get('message', '')} ({row.label})", ""]
            tail = failure.get("log_tail") or []
            if tail:
                out += ["  ```text", *[f"  {line}" for line in tail[-20:]], "  ```", ""]

    if data.earlier_failures:
        out += [f"### Earlier launches of re-measured configs that failed ({len(data.earlier_failures)})", ""]
        for row, failed in data.earlier_failures:
            log = f"; log {failed['log_path']}" if failed.get("log_path") else ""
            out += [
                f"- `{row.id}` @ {row.host}, attempt {failed['attempt']}: {failed['status']}: "
                f"{failed['message']} ({row.label}{log})",
                "",
            ]
            if failed["log_tail"]:
                out += ["  ```text", *[f"  {line}" for line in failed["log_tail"][-20:]], "  ```", ""]

    if data.not_launched:
        out += ["### Not launched (the plan decided; not failures)", ""]
        for klass, rows in data.not_launched.items():
            for row in rows:
                message = (row.result.get("failure") or {}).get("message", "")
                out.append(f"- `{row.id}` @ {row.host}: {klass}: {message} ({row.label})")
        out.append("")

    out += [f"## Hosts and stack fingerprint{sim}", ""]
    out.append("| host | GPU | GPU facts | SGLang | stack fingerprint |")
    out.append("|---|---|---|---|---|")
    for host in data.hosts:
        facts = ", ".join(f"{k}: {v}" for k, v in (host.get("gpu_facts") or {}).items()) or NA
        out.append(
            f"| {_cell(host['host'])} | {host.get('gpu') or NA} | {_cell(facts)} | "
            f"{host.get('sglang_version') or NA} | `{host.get('stack_fingerprint') or NA}` |"
        )
    out.append("")
    return "\n".join(out)


def _cold_start(data: ReportData) -> list[str]:
    rows = cold_start_rows(data)
    if not rows:
        return ["No launch of this run recorded its cold start.", ""]
    note = COLD_START_NOTE
    if data.simulated:
        note += f" **{SIMULATED_LABEL}**: the stand-in's simulated weight load and graph capture."
    out = [note, ""]
    out.append("| config | host | status | reached | " + " | ".join(c for _k, c in COLD_START_COLUMNS) + " |")
    out.append("|---|---|---|---|" + "---:|" * len(COLD_START_COLUMNS))
    for row, cold in rows:
        cells = " | ".join(_fmt(cold.get(key)) for key, _caption in COLD_START_COLUMNS)
        out.append(
            f"| `{row.id}` | {_cell(row.host)} | {row.status} | {_cell(str(cold.get('reached')))} | {cells} |"
        )
    out.append("")
    return out


def _speculative(data: ReportData, sim: str) -> list[str]:
    """A `bwtune speculative` run: per load, speculative decoding off against its best setting."""
    link = data.speculative_link
    if link is None:
        return []
    out = [f"## Speculative decoding{sim}", ""]
    base = link.get("base_config") or {}
    out.append(
        f"The stage on run `{link.get('base_run')}`'s winner `{base.get('id')}` (on {base.get('host')}; "
        f"it ran {base.get('setting')}): its flags held, speculative decoding off and "
        f"{max(0, len(link.get('settings') or {}) - 1)} settings of num-steps / eagle-topk / draft tokens."
    )
    if data.simulated:
        out[-1] += f" **{SIMULATED_LABEL}**: the stand-in's load model."
    out.append("")
    verdict = data.speculative_conclusion
    if verdict is not None:
        out.append(f"**At the target load ({verdict['load']}): {verdict['winner']}.**")
        if verdict["wins"]:
            out.append(f"MTP wins at: {', '.join(verdict['wins'])}.")
        if verdict["loses"]:
            out.append(f"MTP loses at: {', '.join(verdict['loses'])}.")
        out.append("")
    for dropped in link.get("dropped") or []:
        out.append(f"- not planned: {_cell(str(dropped))}")
    if link.get("dropped"):
        out.append("")
    out.append("| workload | load | metric | off | best on | its accept length | verdict | every setting |")
    out.append("|---|---|---|---:|---|---:|---|---|")
    for row in data.speculative:
        off, on = row["off"], row["on"]
        every = "; ".join(
            f"{s['setting']}: {_fmt(s['value'])}"
            + (f" (accept {s['accept_length']:.2f})" if s["accept_length"] is not None else "")
            for s in row["settings"]
        )
        target = " (target)" if row["target"] else ""
        out.append(
            f"| {_cell(row['workload'])}{target} | {_cell(row['load'])} | {row['metric']} "
            f"| {_fmt(off['value']) if off else NA} "
            f"| {_cell(on['setting']) + ': ' + _fmt(on['value']) if on else NA} "
            f"| {_fmt(on['accept_length']) if on else NA} | {_cell(spec_view.verdict_text(row))} "
            f"| {_cell(every)} |"
        )
    out.append("")
    return out


def _capacity(data: ReportData, sim: str) -> list[str]:
    """The capacity workloads' searches (none: no section)."""
    if not data.capacity:
        return []
    out = [f"## Capacity under the latency SLO{sim}", ""]
    note = (
        "The highest request rate at which every request succeeded and each SLO percentile held "
        "(docs/capacity.md). Capacity 0: no rate tried met the SLO; at least: every rate tried met it."
    )
    if data.simulated:
        note += f" **{SIMULATED_LABEL}**: measured on the stand-in's load model."
    out += [note, ""]
    out.append("| workload | config | host | capacity | SLO | last passing | first failing | rounds | note |")
    out.append("|---|---|---|---:|---|---:|---:|---:|---|")
    best = (data.best.host, data.best.id) if data.best else None
    for row in data.capacity:
        star = " ★" if (row["host"], row["id"]) == best else ""
        out.append(
            f"| {_cell(row['workload'])} | `{row['id']}`{star} | {_cell(row['host'])} | {value_text(row)} "
            f"| {_cell(slo_text(row['slo']))} | {_fmt(row['last_passing'])} | {_fmt(row['first_failing'])} "
            f"| {row['rounds']} | {_cell(row['reason'] or '')} |"
        )
    out.append("")
    return out


def _latency_fronts(data: ReportData, sim: str) -> list[str]:
    """Per workload and latency percentile, the configs on the throughput/latency front."""
    if not data.latency_fronts:
        return []
    out = [f"## Throughput vs latency percentile (Pareto front){sim}", ""]
    note = (
        "Each ok config on each workload is a point; higher throughput and lower latency are better. "
        "Listed: the configs on the front (no other ok config has at least their throughput and at "
        "most their latency, better on one) and the winner (★). Failed and not-launched configs are "
        "never on a front."
    )
    if data.simulated:
        note += f" **{SIMULATED_LABEL}**: stand-in numbers."
    out += [note, ""]
    for front in data.latency_fronts:
        latency, slo = front["latency_metric"], front["slo"]
        points = front["points"]
        on = sum(p["on_front"] for p in points)
        slo_note = f"; SLO {latency} <= {_fmt(slo)}" if slo is not None else ""
        out += [
            f"### {front['workload']}: {front['throughput_metric']} vs {latency}",
            "",
            f"{on} on the front, {len(points) - on} dominated{slo_note}.",
            "",
            f"| config | host | {front['throughput_metric']} | {latency} | on the front |",
            "|---|---|---:|---:|---|",
        ]
        for p in points:
            if not (p["on_front"] or p["is_best"]):
                continue
            over = ", over the SLO" if slo is not None and p["latency"] > slo else ""
            out.append(
                f"| `{p['id']}`{' ★' if p['is_best'] else ''} | {_cell(p['host'])} | {_fmt(p['throughput'])} "
                f"| {_fmt(p['latency'])} | {'front' if p['on_front'] else 'dominated'}{over} |"
            )
        out.append("")
    return out
