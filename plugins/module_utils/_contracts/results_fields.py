# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The fields of a results line, declared once (issue 22).

Each field of a line the node writes (plugins/module_utils/_sweep/sweep_runner.py) has one entry in
FIELDS: its name, its kind (what the validator checks), whether a line must carry it, its
default, where the controller's database stores it, its name in the `--json` view and one
line of documentation. Everything else is derived from this table: the line builder and
its defaults and the validator (results_contract), the database's columns, its INSERTs and
the line rebuilt from a row (bwtune.store), the `--json` view's keys (bwtune.store.views)
and the results-file table of docs/architecture.md (scripts/gen_results_doc.py).

Add a field here before a node writes it; a field stored in a column of its own also needs
a migration in bwtune/store/schema.py that adds the column (a test compares the migrated
schema with this table). Standard library only: it runs under the node's system Python.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

# A results line's `schema`. Adding an optional field keeps it; changing a field's meaning
# or removing one bumps it (and the controller's validator names the version it reads).
SCHEMA_VERSION = 1

# What the validator checks of a field's value (results_contract.validate_line), and the
# type docs/architecture.md shows for it. "unchecked" kinds are documented, never refused:
# lines of older nodes wrote them without a check.
KINDS: dict[str, str] = {
    "schema": "int: the schema version",
    "run id": "string: a run id",
    "name": "non-empty string",
    "status": "string: a status",
    "object": "object",
    "list": "list",
    "strings": "list of strings",
    "config id": "string: a config id",
    "bool": "true or false",
    "cold start": "object: seconds per phase",
    "objective": "object: workload, metric, goal",
    "metrics": "object keyed by workload",
    "failure": "object: class, message, log_tail",
    "text": "string",
    "number": "number",
    "flag": "true or false",
}
# Kinds the validator never refuses (documented only).
UNCHECKED_KINDS = frozenset(("text", "number", "flag"))

# Where the controller's results database keeps a field (bwtune/store):
#   "results", "configs": a column of that table (COLUMN names it, CODEC says how);
#   "failures": the failures table (class, message, log tail) of a failed result;
#   "workload_values": one row per workload (the values a query ranks by);
#   "line": only in the whole line kept with each result (results.line_json);
#   "constant": not stored (every stored line has the schema the database reads).
STORES = ("results", "configs", "failures", "workload_values", "line", "constant")
# How a column holds a value:
#   "value": as it is; "nonempty": as it is, an empty string as NULL; "bool": 0 or 1;
#   "json": canonical JSON (keys sorted, no spaces); an optional field that is null or
#           missing is stored as its default (NULL when that is null) and read back so.
CODECS = ("value", "nonempty", "bool", "json")


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    required: bool  # a line must have the key (make_line: a value, unless it has a default)
    default: Any
    store: str
    column: str | None  # the column of `store` ("results", "configs"), else None
    sql: str | None  # the column's declaration (the migrations create it so)
    codec: str | None
    json: str | None  # its key in the `--json` view of a result, None when it is not shown
    doc: str

    def new_default(self) -> Any:
        """A fresh copy of the default (a list or object is never shared between lines)."""
        return copy.deepcopy(self.default)


def _field(
    name: str,
    kind: str,
    default: Any = None,
    *,
    required: bool = False,
    store: str = "line",
    column: str | None = None,
    sql: str | None = None,
    codec: str | None = None,
    json: str | None = None,
    doc: str,
) -> Field:
    return Field(name, kind, required, default, store, column, sql, codec, json, doc)


def _column(table: str, column: str, sql: str, codec: str) -> dict[str, Any]:
    return {"store": table, "column": column, "sql": sql, "codec": codec}


# Every field of a results line, in the order make_line writes them.
FIELDS: tuple[Field, ...] = (
    _field("schema", "schema", SCHEMA_VERSION, required=True, store="constant",
           doc="The line's schema version: a field removed or a meaning changed bumps it."),
    _field("run_id", "run id", required=True, **_column("results", "run_id", "TEXT NOT NULL", "value"),
           doc="The run: one path component (a letter or digit, then letters, digits and `. _ - + : @`)."),
    _field("host", "name", required=True, **_column("results", "host", "TEXT NOT NULL", "value"),
           json="host", doc="The inventory name of the node that measured it."),
    _field("config_id", "name", required=True,
           **_column("results", "config_id", "TEXT NOT NULL", "value"), json="id",
           doc="`c` + 10 hex digits of a hash of the normalized flags (`planner.config_id`)."),
    _field("point", "object", {}, **_column("configs", "point_json", "TEXT NOT NULL", "json"),
           json="point", doc="The matrix point (axis: value) the config was planned from."),
    _field("flags", "object", {}, required=True,
           **_column("configs", "flags_json", "TEXT NOT NULL", "json"), json="flags",
           doc="The launch flags as the plan resolved them (SGLang's own changes applied)."),
    _field("argv", "strings", [], **_column("configs", "argv_json", "TEXT NOT NULL", "json"),
           json="argv",
           doc="What follows the launch command (`--model-path ...` first); the sweep adds `--host`, "
           "`--port` and `--api-key` (never recorded)."),
    _field("launch_command", "strings", [],
           **_column("results", "launch_command_json", "TEXT", "json"), json="launch_command",
           doc="The command that started the server, e.g. `python -m sglang.launch_server`."),
    _field("status", "status", required=True, **_column("results", "status", "TEXT NOT NULL", "value"),
           json="status",
           doc="`ok` or a failure class; `pruned` and `duplicate` are not launched, never failures."),
    _field("simulated", "flag", False, **_column("results", "simulated", "INTEGER NOT NULL", "bool"),
           json="simulated", doc="Measured on bwtune-standin, not SGLang: labelled simulated where shown."),
    _field("stack_fingerprint", "text", **_column("results", "stack_fingerprint", "TEXT", "nonempty"),
           json="stack_fingerprint", doc="The fingerprint of the software stack it ran on."),
    _field("stack", "object",
           doc="The stack's components (torch, CUDA, SGLang and its commit, sgl-kernel and its build, "
           "FlashInfer, driver) that regression attribution reads; older lines lack it."),
    _field("gpu", "text", **_column("results", "gpu", "TEXT", "value"), json="gpu",
           doc="The GPUs' SM tag, e.g. `sm120` (the whole hardware group: `hardware`)."),
    _field("hardware", "object", json="hardware",
           doc="The hardware group it was measured on, from the node's GPU facts: `gpu_model` (the GPUs' "
           "name, null for several kinds), `gpu_count`, `sm` (as `gpu`) and `interconnect` (`nvlink`, "
           "`partial-nvlink`, `pcie`, `none`, `unknown`), each null where unknown; older lines lack it."),
    _field("sglang_version", "text", **_column("results", "sglang_version", "TEXT", "value"),
           json="sglang_version", doc="The SGLang release of the plan, e.g. `0.5.23`."),
    _field("started_at", "text", **_column("results", "started_at", "TEXT", "value"), json="started_at",
           doc="When the launch started (ISO-8601)."),
    _field("finished_at", "text", **_column("results", "finished_at", "TEXT", "value"),
           json="finished_at", doc="When the line was written (ISO-8601)."),
    _field("timings", "object", {}, **_column("results", "timings_json", "TEXT NOT NULL", "json"),
           json="timings", doc="Seconds per phase: `startup_s`, `gate_s`, `bench_s`, `stop_s`."),
    _field("release", "object", **_column("results", "release_json", "TEXT", "json"), json="release",
           doc="How the server's GPU memory was released at its stop (`forced`, `gpu`)."),
    _field("cold_start", "cold start", json="cold_start",
           doc="Seconds from the server process's start to each phase (`COLD_START_SECONDS`) and the "
           "last phase `reached`; older lines lack it."),
    _field("metrics", "metrics", {}, required=True, store="workload_values", json="metrics",
           doc="Per workload: `n`, `values`, `ci95`, `cv`, `repetitions`, `workload`; a capacity "
           "workload's block also `capacity` (the search: value, unit, slo, rounds, last_passing, "
           "first_failing, lower_bound, reason; docs/capacity.md), and `values.capacity`."),
    _field("accept_length", "number", **_column("results", "accept_length", "REAL", "value"),
           json="accept_length",
           doc="Speculative decoding's accept length, when the benchmark reported one."),
    _field("screened_out", "bool", False,
           **_column("results", "screened_out", "INTEGER NOT NULL DEFAULT 0", "bool"), json="screened_out",
           doc="The `screen` or `adaptive` strategy measured it on its screening workload only."),
    _field("duplicate_of", "config id", **_column("results", "duplicate_of", "TEXT", "value"),
           json="duplicate_of", doc="A `duplicate` line: the config whose launch it would repeat."),
    _field("failure", "failure", store="failures", json="failure",
           doc="For every status but `ok`: `class` (the status), `message`, `log_tail` (last 50 lines), "
           "`log_path`."),
    _field("reasons", "list", [], **_column("results", "reasons_json", "TEXT NOT NULL", "json"),
           json="reasons", doc="The planner's reasons (`rule`, `kind`, `message`, `source`) for the config."),
    _field("objective", "objective",
           doc="What it was measured for (`workload`, `metric`, `goal`): `bwtune import` without "
           "`--matrix` ranks by it; older lines lack it."),
)  # fmt: skip

BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
# The keys a line must carry, in field order.
REQUIRED = tuple(f.name for f in FIELDS if f.required)
# What make_line needs a value for: the required fields without a default.
REQUIRED_VALUES = tuple(f.name for f in FIELDS if f.required and f.default is None)

# --------------------------------------------------------------------------- the --json view

# Keys of a `--json` result that no line field holds: the store computes them.
VIEW_COMPUTED: dict[str, str] = {
    "objective": "the value the result is ranked by (a re-measured config: the mean of its launches)",
    "objective_ci95": "its 95% confidence interval, [low, high] or null",
    "objective_launches": "a re-measured config's launches oldest first (attempt, finished_at, value, "
    "ci95, repetitions), else null",
    "attempt": "1, or the launch's number for a re-measured config",
}
# The `--json` view of a result, key by key in its order: a line field's `json` name or a
# computed key (VIEW_COMPUTED).
VIEW_ORDER = (
    "id", "host", "status", "flags", "failure", "metrics", "accept_length", "argv", "launch_command", "point",
    "simulated", "objective", "objective_ci95", "objective_launches", "reasons", "timings",
    "release", "cold_start", "screened_out", "duplicate_of", "attempt", "started_at",
    "finished_at", "gpu", "hardware", "sglang_version", "stack_fingerprint",
)  # fmt: skip


def view_fields() -> tuple[tuple[str, str | None], ...]:
    """(`--json` key, the line field it shows or None for a computed key), in the view's order."""
    by_json = {f.json: f.name for f in FIELDS if f.json is not None}
    return tuple((key, by_json.get(key)) for key in VIEW_ORDER)


# --------------------------------------------------------------------------- stored columns


def columns(table: str) -> tuple[Field, ...]:
    """The fields stored in a column of `table` ("results" or "configs"), in field order."""
    return tuple(f for f in FIELDS if f.store == table and f.column is not None)


def problems() -> list[str]:
    """What is inconsistent in the table itself (a test asserts there is nothing)."""
    found = []
    names = [f.name for f in FIELDS]
    if len(set(names)) != len(names):
        found.append("a field name is declared twice")
    for f in FIELDS:
        if f.kind not in KINDS:
            found.append("%s: unknown kind %r" % (f.name, f.kind))
        if f.store not in STORES:
            found.append("%s: unknown store %r" % (f.name, f.store))
        has_column = f.store in ("results", "configs")
        if has_column != (f.column is not None and f.sql is not None and f.codec in CODECS):
            found.append(
                "%s: a column of results or configs needs column, sql and codec (only those)" % f.name
            )
    json_names = [f.json for f in FIELDS if f.json is not None]
    if sorted(json_names + list(VIEW_COMPUTED)) != sorted(VIEW_ORDER):
        found.append("VIEW_ORDER is not every field's json name and every computed key, once each")
    return found
