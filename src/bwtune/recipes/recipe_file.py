"""A recipe from the results store: the config a run measured, where, on what, and how well.

Only what the run recorded goes in; a part the run did not record is there as null with
`recorded: false`, never guessed. Secrets never do: the launch's environment is names
only, and the value of a secret-looking flag in the argv (`--api-key`, `--token`, ...) is
replaced by REDACTED (the sweep's own `--api-key` is never recorded at all).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import socket
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import __version__, regression, store

SCHEMA = 1
KIND = "bwtune-recipe"
REDACTED = "REDACTED"
# A flag or environment name that holds a secret: its value never reaches a recipe. A whole
# word of the name (`--hf-token`, `HF_TOKEN`, `--api-key`), never a part of one: SGLang's
# `--max-total-tokens` and `--tokenizer-path` are tuning flags, not secrets.
SECRET_NAME = re.compile(
    r"(?:^|[-_])(?:api[-_]?key|apikey|token|secret|password|passwd|credentials?|auth|authorization)(?:$|[-_=])",
    re.IGNORECASE,
)
# A recipe is a few kilobytes; a file far larger is not one (and is not read whole).
MAX_BYTES = 16 * 1024 * 1024
# What the sweep adds to every launch and never records (`--api-key`: a secret).
ADDED_BY_SWEEP = ("--host", "--port", "--api-key")
# The stack components a results line records (`stack`), as regression attribution names them.
COMPONENT_KEYS = tuple(key for key, _words in regression.COMPONENTS)
# The top-level fields of a recipe, in the order a recipe file writes them.
FIELDS = (
    "schema", "kind", "bwtune_version", "simulated", "measured", "hardware", "stack",
    "checkpoint", "launch", "workloads", "objective", "results", "gate",
)  # fmt: skip


class RecipeError(ValueError):
    """One line: what is wrong with the run, config or file, and where."""


def redact_argv(argv: Sequence[str]) -> list[str]:
    """`argv` with the value of every secret-looking flag replaced by REDACTED."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        word = str(word)
        if hide_next and not word.startswith("--"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if word.startswith("--") and SECRET_NAME.search(word):
            name, eq, _value = word.partition("=")
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(word)
                hide_next = True
            continue
        out.append(word)
    return out


def environment_names(environment: Mapping[str, Any] | Sequence[str] | None) -> list[str]:
    """The names of a launch's environment, sorted; never a value."""
    if not environment:
        return []
    names = environment.keys() if isinstance(environment, Mapping) else environment
    return sorted(str(name) for name in names)


def _model_path(argv: Sequence[str], flags: Mapping[str, Any]) -> str | None:
    for n, word in enumerate(argv):
        if word == "--model-path" and n + 1 < len(argv):
            return str(argv[n + 1])
        if str(word).startswith("--model-path="):
            return str(word).split("=", 1)[1]
    value = flags.get("model-path")
    return str(value) if value else None


def choose(output: Mapping[str, Any], config_id: str | None, host: str | None = None) -> Mapping[str, Any]:
    """The run's best (results_contract.pick_best, through the store's view) or `config_id`'s
    ok result (on `host`, when the config was measured on several)."""
    run_id = output["run_id"]
    if config_id is None:
        best = output.get("best")
        if best is None:
            raise RecipeError(f"run {run_id} has no config that measured ok: nothing to export")
        return best
    rows = [r for r in output["results"] if r["id"] == config_id]
    if not rows:
        raise RecipeError(f"--config {config_id}: no such config in run {run_id}")
    if host is not None:
        rows = [r for r in rows if r["host"] == host]
        if not rows:
            raise RecipeError(f"--host {host}: config {config_id} of run {run_id} was not measured there")
    ok = [r for r in rows if r["status"] == contract.OK]
    if not ok:
        raise RecipeError(
            f"--config {config_id}: status {rows[0]['status']} in run {run_id}, not a config that served"
        )
    return ok[0]


def _launches(
    conn: sqlite3.Connection, run_id: str, host: str, config_id: str, objective: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every launch of the config on its host (earlier ones of a re-measure first) with its
    repetition values of the objective and their interval; and the current line."""
    keys = [(host, config_id)]
    current = store.run_results(conn, run_id, keys)
    if not current:
        raise RecipeError(f"run {run_id}: no results line of config {config_id} on {host}")
    lines = [*store.superseded_results(conn, run_id, keys), *current]
    launches = []
    for number, line in enumerate(lines, start=1):
        values = regression.objective_repetitions(line, objective)
        mean, ci95, cv = contract.mean_ci95(values) if values else (None, None, None)
        launches.append(
            {
                "launch": number,
                "status": line.get("status"),
                "started_at": line.get("started_at"),
                "finished_at": line.get("finished_at"),
                "values": values,
                "mean": mean,
                "ci95": list(ci95) if ci95 else None,
                "cv": cv,
            }
        )
    return launches, current[0]


def _hardware(host: Mapping[str, Any] | None, line: Mapping[str, Any]) -> dict[str, Any]:
    facts = (host or {}).get("gpu_facts") or {}
    return {
        "gpu": line.get("gpu"),  # the SM tag the line was measured on: the hardware group's GPU
        "stack_fingerprint": line.get("stack_fingerprint"),
        "model": facts.get("gpus"),
        "count": facts.get("count"),
        "sm": facts.get("sm") or line.get("gpu"),
        "memory_mib": facts.get("memory_mib"),
        "driver": facts.get("driver"),
        "cuda": facts.get("cuda"),
        "interconnect": facts.get("interconnect"),
        "recorded": bool(facts),
    }


def _stack(host: Mapping[str, Any] | None, line: Mapping[str, Any]) -> dict[str, Any]:
    components = line.get("stack") if isinstance(line.get("stack"), Mapping) else None
    details = (host or {}).get("stack") if isinstance((host or {}).get("stack"), Mapping) else None
    chosen = dict(components or details or {})
    chosen.pop("fingerprint", None)
    return {
        "fingerprint": line.get("stack_fingerprint"),
        "sglang_version": line.get("sglang_version"),
        "components": {key: chosen.get(key) for key in COMPONENT_KEYS} if chosen else None,
        "recorded": bool(chosen),
    }


def build(
    conn: sqlite3.Connection,
    run_id: str,
    config_id: str | None = None,
    *,
    host: str | None = None,
    now: str | None = None,
) -> dict[str, Any]:
    """The recipe of `config_id` (default: the run's best) of run `run_id` (measured on `host`)."""
    try:
        output = store.build_run_output(conn, run_id)
    except store.UnknownRunError as exc:
        raise RecipeError(str(exc)) from None
    chosen = choose(output, config_id, host)
    objective = store.resolved_objective(conn, run_id)
    launches, line = _launches(conn, run_id, str(chosen["host"]), str(chosen["id"]), objective)
    hosts = {h["host"]: h for h in store.run_hosts(conn, run_id)}
    host = hosts.get(str(chosen["host"]))
    argv = [str(word) for word in line.get("argv") or []]
    flags = dict(line.get("flags") or {})
    metrics = line.get("metrics") or {}
    # The matrix's workloads (what a verifier runs); a run imported without its matrix: the
    # workloads its line measured.
    matrix = store.get_run(conn, run_id).matrix or {}
    workloads = [dict(w) for w in matrix.get("workloads") or [] if isinstance(w, Mapping)]
    if not workloads:
        workloads = [
            dict(block["workload"]) if isinstance(block.get("workload"), Mapping) else {"name": name}
            for name, block in metrics.items()
        ]
    timings = line.get("timings") or {}
    recipe = {
        "schema": SCHEMA,
        "kind": KIND,
        "bwtune_version": __version__,
        "simulated": bool(line.get("simulated")),
        "measured": {
            "run_id": run_id,
            "config_id": chosen["id"],
            "host": chosen["host"],
            "started_at": line.get("started_at"),
            "finished_at": line.get("finished_at"),
            "exported_at": now or datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "exported_on": socket.gethostname(),
            "by": "bwtune-standin (simulated numbers, not a GPU)" if line.get("simulated") else "SGLang",
        },
        "hardware": _hardware(host, line),
        "stack": _stack(host, line),
        "checkpoint": {
            "path": _model_path(argv, flags),
            "revision": None,
            "shards": None,
            "recorded": False,  # the results store keeps no checkpoint revision or shard hashes yet
        },
        "launch": {
            "command": [str(word) for word in line.get("launch_command") or []],
            "argv": redact_argv(argv),
            "flags": {k: (REDACTED if SECRET_NAME.search(k) else v) for k, v in flags.items()},
            "environment": environment_names(line.get("environment")),
            "added_by_sweep": list(ADDED_BY_SWEEP),
        },
        "workloads": workloads,
        "objective": dict(objective),
        "results": {
            "objective_value": chosen.get("objective"),
            "objective_ci95": chosen.get("objective_ci95"),
            "launches": launches,
            "values": {name: dict(block.get("values") or {}) for name, block in metrics.items()},
        },
        "gate": {
            "passed": line.get("status") == contract.OK,
            "status": line.get("status"),
            "gate_s": timings.get("gate_s"),
        },
    }
    problems = check_shape(recipe)
    if problems:  # a bug here, not the user's: said plainly all the same
        raise RecipeError(f"run {run_id}: the recipe built is not valid: {problems[0]}")
    return recipe


def dumps(recipe: Mapping[str, Any]) -> str:
    """A recipe file's text: the fields in FIELDS' order, indented, one trailing newline."""
    return json.dumps({key: recipe[key] for key in FIELDS if key in recipe}, indent=2, default=str) + "\n"


def canonical(value: Any) -> bytes:
    """The canonical JSON of a value (sorted keys, no spaces): what digests hash."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def check_shape(recipe: Any) -> list[str]:
    """What makes `recipe` not a recipe of this schema (empty: fine). docs/recipe.schema.json
    says the same; a test holds the two together."""
    if not isinstance(recipe, Mapping):
        return ["a recipe is a JSON object"]
    problems = [f"field {key!r} is missing" for key in FIELDS if key not in recipe]
    if problems:
        return problems
    if recipe["kind"] != KIND:
        problems.append(f"kind is {recipe['kind']!r}, not {KIND!r}")
    if recipe["schema"] != SCHEMA:
        problems.append(f"schema {recipe['schema']!r}: this bwtune reads recipe schema {SCHEMA}")
    if not isinstance(recipe["simulated"], bool):
        problems.append("simulated is not true or false")
    # docs/recipe.schema.json's types: what check, apply and verify read, before any host is.
    for key in ("measured", "hardware", "stack", "checkpoint", "launch", "objective", "results", "gate"):
        if not isinstance(recipe[key], Mapping):
            problems.append(f"{key} is not an object")
    if not isinstance(recipe["workloads"], list) or not all(
        isinstance(w, Mapping) for w in recipe["workloads"]
    ):
        problems.append("workloads is not a list of objects")
    if problems:
        return problems
    measured = recipe["measured"]
    for key in ("run_id", "config_id", "host"):
        if not isinstance(measured.get(key), str) or not measured.get(key):
            problems.append(f"measured.{key} is not a string")
    argv = recipe["launch"].get("argv")
    if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv):
        problems.append("launch.argv is not a list of strings")
    else:
        problems += _secrets_in(argv)
    launches = recipe["results"].get("launches")
    if not isinstance(launches, list) or not all(isinstance(one, Mapping) for one in launches):
        problems.append("results.launches is not a list of objects")
    return problems


def _secrets_in(argv: Sequence[str]) -> list[str]:
    """A secret-looking flag of the argv that holds a value other than REDACTED: a recipe never
    holds a secret (`recipe export` redacts them), and none would reach a node or the store."""
    for n, word in enumerate(argv):
        if not word.startswith("--") or not SECRET_NAME.search(word):
            continue
        name, eq, value = word.partition("=")
        if not eq:
            following = argv[n + 1] if n + 1 < len(argv) else "--"
            value = "" if following.startswith("--") else following
        if value and value != REDACTED:
            return [
                f"launch.argv gives {name} a value: a recipe never holds a secret (bwtune recipe "
                f"export writes {REDACTED}); drop it and give it on the hosts (server_env, or -e)"
            ]
    return []


def load(path: str) -> dict[str, Any]:
    """A recipe file, checked; RecipeError naming the file and what is wrong."""
    try:
        with open(path, encoding="utf-8") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_BYTES:
                raise RecipeError(f"{path}: {size} bytes, not a recipe (a recipe is a few kilobytes)")
            recipe = json.load(handle)
    except RecipeError:
        raise
    except OSError as exc:
        raise RecipeError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise RecipeError(f"{path}: not JSON ({exc})") from None
    except RecursionError:
        raise RecipeError(f"{path}: not a bwtune recipe: nested too deep to be one") from None
    problems = check_shape(recipe)
    if problems:
        raise RecipeError(f"{path}: not a bwtune recipe: {problems[0]}")
    return dict(recipe)
