"""The controller's results store: every run, host, config and measurement, in SQLite, or
on a PostgreSQL server for a `postgresql://` `--db`/$BWTUNE_DB (same schema, migrations
and queries: the one store layer, through the `dialect` seam).

Nodes write one JSON line per config (results_fields.FIELDS declares its fields; the
contract is results_contract); `import_results` loads those lines here. Importing the same
lines twice changes nothing, and lines from several hosts of one run merge into that run.

The package, by job (each module imports only the standard library, the collection's
module_utils and modules of this package; all the SQL of bwtune is in here):

    paths        $BWTUNE_HOME, the database's path or server URL (password masked), a run's folder, `--db`
    errors       the store's one-line errors
    schema       the ordered migrations, the declared columns (from the field table)
    dialect      what PostgreSQL spells otherwise: placeholders, upserts, JSON reads
    postgres     a PostgreSQL connection (psycopg 3) that takes the store's calls as sqlite3's
    connection   opening for writing (migrated) or reading only; check_writable
    lines        a line <-> its rows, derived from the field table
    files        reading a node's results file (the torn-last-line rule, worker processes)
    runs         runs, hosts, stacks: record_run, record_host_facts
    imports      storing lines: import_results, import_results_file
    queries      reading back: get_run, run_results, superseded_results, run_hosts, ...
    overviews    counts and the best config by query: run_overviews, list_runs, report_keys
    views        the `--json` view: build_run_output, nothing_measured
    tags         run tags and named baselines
"""

from __future__ import annotations

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune.store.connection import (
    MIN_FREE_BYTES,
    check_writable,
    connect,
    connect_readonly,
    print_notice,
)
from bwtune.store.errors import (
    DB_INPUT_ERRORS,
    MissingDatabaseError,
    SchemaTooNewError,
    StorageError,
    UnknownRunError,
)
from bwtune.store.files import (
    ResultsFileContent,
    iter_results_file,
    open_results_file,
    read_results_file,
)
from bwtune.store.imports import (
    IMPORT_BATCH,
    ImportSummary,
    Replacement,
    import_results,
    import_results_file,
)
from bwtune.store.overviews import list_runs, report_keys, run_overviews
from bwtune.store.paths import (
    DatabaseURL,
    add_db_argument,
    bwtune_home,
    default_db_path,
    run_dir,
    storage_failure_message,
)
from bwtune.store.queries import (
    RunInfo,
    get_run,
    launched_lines,
    measured_objective,
    resolved_objective,
    result_attempts,
    result_count,
    run_hosts,
    run_results,
    runs_before,
    superseded_results,
)
from bwtune.store.run_records import gpu_facts_summary, record_gathered_facts, record_host_facts, record_run
from bwtune.store.schema import MIGRATIONS, SCHEMA_VERSION, migrate, schema_version
from bwtune.store.tags import get_baseline, list_baselines, run_tags, set_baseline, tag_run, tagged_runs
from bwtune.store.views import build_run_output, nothing_measured

# The contract's, re-exported for the controller's callers (defined once, in results_contract).
RESULTS_SCHEMA = contract.SCHEMA_VERSION
FAILURE_CLASSES = contract.FAILURE_CLASSES
STATUSES = contract.STATUSES
ResultsFormatError = contract.ResultsFormatError
validate_result = contract.validate_line

__all__ = [
    "DB_INPUT_ERRORS",
    "FAILURE_CLASSES",
    "IMPORT_BATCH",
    "MIGRATIONS",
    "MIN_FREE_BYTES",
    "RESULTS_SCHEMA",
    "SCHEMA_VERSION",
    "STATUSES",
    "DatabaseURL",
    "ImportSummary",
    "MissingDatabaseError",
    "Replacement",
    "ResultsFileContent",
    "ResultsFormatError",
    "RunInfo",
    "SchemaTooNewError",
    "StorageError",
    "UnknownRunError",
    "add_db_argument",
    "build_run_output",
    "bwtune_home",
    "check_writable",
    "connect",
    "connect_readonly",
    "default_db_path",
    "get_baseline",
    "get_run",
    "gpu_facts_summary",
    "import_results",
    "import_results_file",
    "iter_results_file",
    "launched_lines",
    "list_baselines",
    "list_runs",
    "measured_objective",
    "migrate",
    "nothing_measured",
    "open_results_file",
    "print_notice",
    "read_results_file",
    "record_gathered_facts",
    "record_host_facts",
    "record_run",
    "report_keys",
    "resolved_objective",
    "result_attempts",
    "result_count",
    "run_dir",
    "run_hosts",
    "run_overviews",
    "run_results",
    "run_tags",
    "runs_before",
    "schema_version",
    "set_baseline",
    "storage_failure_message",
    "superseded_results",
    "tag_run",
    "tagged_runs",
    "validate_result",
]
