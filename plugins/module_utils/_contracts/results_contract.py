# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The results contract: what a line of a node's results file means, owned once.

The node writes results lines (plugins/module_utils/_sweep/sweep_runner.py) and the controller reads them
(bwtune import, the results database, reports). Both import every rule from here: the
schema version, the statuses and which of them are failures, the line builder and
validator, the JSONL reader with its one torn-last-line rule, the default objective and
best selection, the 95% interval, the strategy names and the run-id rule. A line's fields
are declared once, in results_fields.FIELDS: the builder's defaults and the validator's
checks are derived from that table. Standard library only: it runs under the node's
system Python (>= 3.10). See docs/architecture.md ("Results file") for a line's shape.

The code lives in results_vocab (versions, statuses, strategies, run ids, the objective),
results_line (build and check a line), results_jsonl (read a file) and results_ranking
(values, intervals, the best); this module is their one name, re-exporting each.
"""

from __future__ import annotations

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_jsonl import (
    complete_json_object,
    parse_jsonl,
    read_jsonl,
    skipped_line_warning,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_line import (
    COLD_START_PHASES,
    COLD_START_SECONDS,
    LINE_DEFAULTS,
    ResultsFormatError,
    is_number_or_null,
    make_failure,
    make_line,
    validate_line,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_ranking import (
    better,
    eligible_value,
    intervals_overlap,
    launch_key,
    mean_ci95,
    metric_ci95,
    metric_repetitions,
    metric_value,
    pick_best,
    pooled_launches,
    workload_signature,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_vocab import (
    AUTH_FAILED,
    CRASHED,
    DEFAULT_GOAL,
    DEFAULT_METRIC,
    DEFAULT_STRATEGY,
    DUPLICATE,
    FAILURE_CLASSES,
    GOALS,
    INVALID_ARGS,
    LAUNCH_FAILURES,
    NOT_LAUNCHED,
    OK,
    OOM,
    OUTPUT_SCHEMA_VERSION,
    PRUNED,
    RUN_ID_MAX_LENGTH,
    SCHEMA_VERSION,
    SCREEN_WORKLOAD,
    STARTUP_FAILURES,
    STARTUP_TIMEOUT,
    STATUSES,
    STRATEGIES,
    UNSUPPORTED_HARDWARE,
    WRONG_OUTPUT,
    check_run_id,
    is_failed,
    is_launched,
    normalize_objective,
    objective_of,
    outcome_counts,
    run_id_problem,
    versioned,
)

__all__ = [
    "AUTH_FAILED",
    "COLD_START_PHASES",
    "COLD_START_SECONDS",
    "CRASHED",
    "DEFAULT_GOAL",
    "DEFAULT_METRIC",
    "DEFAULT_STRATEGY",
    "DUPLICATE",
    "FAILURE_CLASSES",
    "GOALS",
    "INVALID_ARGS",
    "LAUNCH_FAILURES",
    "LINE_DEFAULTS",
    "NOT_LAUNCHED",
    "OK",
    "OOM",
    "OUTPUT_SCHEMA_VERSION",
    "PRUNED",
    "RUN_ID_MAX_LENGTH",
    "SCHEMA_VERSION",
    "SCREEN_WORKLOAD",
    "STARTUP_FAILURES",
    "STARTUP_TIMEOUT",
    "STATUSES",
    "STRATEGIES",
    "UNSUPPORTED_HARDWARE",
    "WRONG_OUTPUT",
    "ResultsFormatError",
    "better",
    "check_run_id",
    "complete_json_object",
    "eligible_value",
    "intervals_overlap",
    "is_failed",
    "is_launched",
    "is_number_or_null",
    "launch_key",
    "make_failure",
    "make_line",
    "mean_ci95",
    "metric_ci95",
    "metric_repetitions",
    "metric_value",
    "normalize_objective",
    "objective_of",
    "outcome_counts",
    "parse_jsonl",
    "pick_best",
    "pooled_launches",
    "read_jsonl",
    "run_id_problem",
    "skipped_line_warning",
    "validate_line",
    "versioned",
    "workload_signature",
]
