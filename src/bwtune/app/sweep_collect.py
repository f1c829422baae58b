"""Collecting a run: what the nodes returned, imported into the results database, the
reports written, and the exit code decided."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import node_outcome
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import ansible_run, exit_codes, report, store
from bwtune.app.sweep_inputs import SweepOutcome, SweepRequest
from bwtune.fleet import fleet_run
from bwtune.progress import FOLLOW_TASK


def collect(request: SweepRequest, playbook_run: ansible_run.PlaybookRun) -> SweepOutcome:
    """What the nodes returned, checked, stored and reported; the messages and the exit code."""
    messages = [failure.line() for failure in playbook_run.failures.values()]
    if playbook_run.error:
        messages.append(f"the sweep playbook did not run: {playbook_run.error}")
    by_host = node_results(playbook_run)
    lines: list[dict[str, Any]] = []
    bad_lines = 0
    for host, result in sorted(by_host.items()):
        messages, good, bad = host_lines(host, result, messages)
        lines += good
        bad_lines += bad
    gathered = gathered_gpus(playbook_run, by_host)
    lines, dropped = _fleet_merge(request.run_id, lines)
    messages += dropped
    try:
        output, reports, replaced = _store(request, by_host, lines, gathered)
    except (sqlite3.Error, OSError, store.StorageError) as err:
        paths = {host: path for host, path in request.node_results_paths().items() if host in by_host}
        messages.append(store.storage_failure_message(err, request.run_id, paths))
        return SweepOutcome(request.run_id, exit_codes.HOST_FAILED, messages=messages)
    messages += [f"replaced: {replacement.line()}" for replacement in replaced]
    output.update(unlaunched(by_host), prior=_prior_note(request))
    code = _exit_code(playbook_run, by_host, lines)
    if bad_lines:  # a line the node returned that is not a result: never reported as success
        code = exit_codes.HOST_FAILED
    if code != exit_codes.HOST_FAILED and (why := store.nothing_measured(output)):
        # A node's own "nothing measured" failure says the same as this line: keep one.
        messages = [m for m in messages if not m.startswith("host ")] + [why]
        code = exit_codes.NOTHING_MEASURED
    return SweepOutcome(request.run_id, code, output=output, messages=messages, reports=reports)


def _fleet_merge(run_id: str, lines: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """A fleet sweep's lines (attached to, or collected again) with each config's lines from
    one host (fleet_run.merge); any other run's lines as they are."""
    try:
        state = fleet_run.FleetState.load(store.run_dir(run_id))
    except fleet_run.FleetError as err:
        return lines, [f"warning: {err}: its lines are stored as the hosts returned them"]
    if state is None:
        return lines, []
    by_host: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_host.setdefault(str(line["host"]), []).append(line)
    kept, dropped = fleet_run.merge(state, by_host, stored_configs(run_id))
    return [line for host in sorted(kept) for line in kept[host]], dropped


def host_lines(
    host: str, result: Mapping[str, Any], messages: list[str]
) -> tuple[list[str], list[dict[str, Any]], int]:
    """What one node returned: the messages (the node's error replacing its task's failure,
    its warnings), its lines checked (each with the inventory name), and how many are bad."""
    error = node_outcome.error(result)
    if error:  # the node's own words, once: not also as the task that failed the host
        messages = [m for m in messages if not m.startswith(f"host {host} failed")]
        messages.append(f"host {host}: {one_line(error)}")
    # What the node had to repair or skip (a line that is not a result, a results file
    # removed mid-run): said here, not only in the node's result.
    for warning in node_outcome.summary_of(result).get("warnings") or []:
        messages.append(f"warning: host {host}: {one_line(warning)}")
    lines: list[dict[str, Any]] = []
    bad = 0
    for number, line in enumerate(node_outcome.lines(result), start=1):
        # The inventory name, not the node's own hostname: two inventory hosts on one
        # machine stay apart, and the database matches the inventory.
        line = {**line, "host": host} if isinstance(line, dict) else line
        try:
            store.validate_result(line, f"{host} result {number}")
        except store.ResultsFormatError as exc:
            messages.append(f"{exc}: not stored (the run is incomplete)")
            bad += 1
            continue
        lines.append(line)
    return messages, lines, bad


def gathered_gpus(playbook_run: ansible_run.PlaybookRun, hosts: Any) -> dict[str, Any]:
    """What the sweep's facts task gathered about each node's GPUs, for the report."""
    return {
        host: (res.get("ansible_facts") or {}).get("bwtune_gpu")
        for host, res in playbook_run.results("gpu_facts").items()
        if host in hosts
    }


def store_lines(
    request: SweepRequest,
    lines: list[dict[str, Any]],
    gpu_facts: Mapping[str, Any],
    plan_summary: Mapping[str, Any] | None,
) -> tuple[Any, ...]:
    """A fleet round's lines into the results database (no report yet): what it replaced.
    Raises what the store raises (sqlite3.Error, OSError, store.StorageError)."""
    conn = store.connect()
    try:
        store.record_run(
            conn, request.run_id, matrix=request.matrix, plan_summary=dict(plan_summary or {}) or None
        )
        imported = store.import_results(conn, lines, run_id=request.run_id)
        store.record_gathered_facts(conn, request.run_id, gpu_facts)
    finally:
        conn.close()
    return tuple(imported.replaced)


def stored_configs(run_id: str) -> dict[str, set[str]]:
    """host -> the configs the results database keeps a line of for this run ({} for a run
    it does not know yet)."""
    try:
        conn = store.connect()
    except (sqlite3.Error, OSError, store.StorageError):
        return {}
    try:
        rows = store.run_results(conn, run_id)
    except (LookupError, ValueError, sqlite3.Error):
        return {}
    finally:
        conn.close()
    found: dict[str, set[str]] = {}
    for row in rows:
        found.setdefault(str(row.get("host")), set()).add(str(row.get("config_id")))
    return found


def finish_fleet(
    request: SweepRequest,
    by_host: Mapping[str, Mapping[str, Any]],
    messages: list[str],
    code: int,
    fleet: dict[str, Any],
) -> SweepOutcome:
    """A fleet sweep's end: the output from the database (every round's lines stored), the
    reports, the fleet's per-host progress and reassignments, and the exit code."""
    try:
        conn = store.connect()
        try:
            output = store.build_run_output(conn, request.run_id)
            reports = write_reports(conn, request.run_id)
        finally:
            conn.close()
    except (sqlite3.Error, OSError, store.StorageError, LookupError) as err:
        paths = {host: path for host, path in request.node_results_paths().items() if host in by_host}
        messages.append(store.storage_failure_message(err, request.run_id, paths))
        return SweepOutcome(request.run_id, exit_codes.HOST_FAILED, messages=messages)
    # A lost host's launches another host measured are not "not reached": they are a row.
    measured = {result.get("id") for result in output.get("results") or []}
    left = {key: [e for e in rows if e["id"] not in measured] for key, rows in unlaunched(by_host).items()}
    output.update(left, prior=_prior_note(request), fleet=fleet)
    if code != exit_codes.HOST_FAILED and (why := store.nothing_measured(output)):
        messages = [m for m in messages if not m.startswith("host ")] + [why]
        code = exit_codes.NOTHING_MEASURED
    return SweepOutcome(request.run_id, code, output=output, messages=messages, reports=reports)


def _store(
    request: SweepRequest,
    by_host: Mapping[str, Mapping[str, Any]],
    lines: list[dict[str, Any]],
    gpu_facts: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], list[Path], tuple[Any, ...]]:
    conn = store.connect()
    try:
        store.record_run(
            conn, request.run_id, matrix=request.matrix, plan_summary=_plan_summary(by_host) or None
        )
        imported = store.import_results(conn, lines, run_id=request.run_id)
        store.record_gathered_facts(conn, request.run_id, gpu_facts or {})
        output = store.build_run_output(conn, request.run_id)
        reports = write_reports(conn, request.run_id)
    finally:
        conn.close()
    return output, reports, imported.replaced


def unlaunched(by_host: Mapping[str, Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The plan's configs with no line, per host, from the nodes' summaries: `left_out` (the
    strategy chose not to launch them) and `not_reached` (the sweep stopped before them)."""
    found: dict[str, list[dict[str, Any]]] = {key: [] for key in node_outcome.UNLAUNCHED}
    for host, result in sorted(by_host.items()):
        summary = node_outcome.summary_of(result)
        for key, rows in found.items():
            for entry in summary.get(key) or []:
                if isinstance(entry, Mapping) and isinstance(entry.get("config"), str):
                    rows.append(
                        {"id": entry["config"], "host": host, "point": dict(entry.get("point") or {})}
                    )
    return found


def _prior_note(request: SweepRequest) -> dict[str, Any] | None:
    """Which earlier runs `adaptive` started from (the sweep's `prior`), or None."""
    if not request.prior:
        return None
    return {"runs": list(request.prior_runs), "configs": len(request.prior)}


def _exit_code(
    playbook_run: ansible_run.PlaybookRun,
    by_host: Mapping[str, Mapping[str, Any]],
    lines: list[dict[str, Any]],
) -> int:
    """HOST_FAILED when a host failed for any reason but having measured nothing."""
    measured = {line["host"] for line in lines if line.get("status") == contract.OK}
    for host in playbook_run.failures:
        result = by_host.get(host)
        nothing_measured_only = result is not None and not node_outcome.error(result) and host not in measured
        if not nothing_measured_only:
            return exit_codes.HOST_FAILED
    if playbook_run.error or any(node_outcome.error(result) for result in by_host.values()):
        return exit_codes.HOST_FAILED
    if playbook_run.rc != 0 and not playbook_run.failures:
        return exit_codes.HOST_FAILED
    return exit_codes.OK


def one_line(message: Any) -> str:
    """A node's error as one line: a traceback's last line, any text's lines joined."""
    lines = [line.strip() for line in str(message).strip().splitlines() if line.strip()]
    if not lines:
        return "no message"
    if lines[0].startswith("Traceback"):
        return lines[-1]
    text = " ".join(lines)
    return text if len(text) <= 400 else text[:397] + "..."


def node_results(playbook_run: ansible_run.PlaybookRun) -> dict[str, dict[str, Any]]:
    """host -> what the node's sweep returned: its outcome (module_utils/_contracts/node_outcome: results,
    best, summary, error; a sweep that did not finish: error and what it finished)."""
    found: dict[str, dict[str, Any]] = {}
    stats = playbook_run.artifact_data.get("bwtune_sweep")
    if isinstance(stats, Mapping):
        found.update({str(h): dict(r) for h, r in stats.items() if isinstance(r, Mapping)})
    for host, res in playbook_run.results("sweep_progress", task=FOLLOW_TASK).items():
        if isinstance(res.get("result"), Mapping):
            found[host] = dict(res["result"])
    return found


def _plan_summary(by_host: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    for result in by_host.values():
        summary = node_outcome.summary_of(result)
        if summary:
            return dict(summary)
    return {}


def write_reports(conn: Any, run_id: str) -> list[Path]:
    """report.html and report.md in the run directory."""
    directory = store.run_dir(run_id)
    html, markdown = directory / "report.html", directory / "report.md"
    report.write_report(conn, run_id, html_path=html, md_path=markdown)
    return [html, markdown]
