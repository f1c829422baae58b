"""The results store on a real PostgreSQL server (postgres_server.py): the commands read and
write it through `--db postgresql://...` and $BWTUNE_DB, two controllers import at once and
lose nothing, the password never shows, and the dialect's rewrites of the store's SQL."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bwtune import store
from bwtune.cli import main
from bwtune.store import dialect, schema
from bwtune.store.paths import DatabaseURL, database_target, db_argument, mask_url
from tests.unit.db.sample_results import sample_results, write_jsonl
from tests.unit.store.postgres_server import PASSWORD, PostgresServer

pytestmark = pytest.mark.integration  # a real PostgreSQL server: not the fast loop

ROOT = Path(__file__).resolve().parents[3]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def url(postgres_server: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    return postgres_server.fresh_database()


def test_the_commands_write_and_read_a_postgresql_store_and_never_show_its_password(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = sample_results()
    path = write_jsonl(tmp_path / "r.jsonl", lines)
    code, out, err = _run(capsys, "import", str(path), "--db", url)
    assert (code, err) == (0, "") and f"{len(lines)} added" in out
    code, out, err = _run(capsys, "import", str(path), "--db", url)
    assert code == 0 and f"{len(lines)} unchanged" in out
    monkeypatch.setenv("BWTUNE_DB", url)  # the same store through the environment
    code, out, err = _run(capsys, "runs", "--json")
    assert code == 0, err
    [run] = json.loads(out)["runs"]
    assert run["run_id"] == "r20261130-demo" and run["results"] == len(lines) and run["best"] is not None
    sqlite_home = tmp_path / "sqlite"
    monkeypatch.setenv("BWTUNE_DB", str(sqlite_home / "results.db"))
    assert _run(capsys, "import", str(path))[0] == 0
    sqlite_runs = json.loads(_run(capsys, "runs", "--json")[1])["runs"]
    assert sqlite_runs == [run]  # the same rows, counts and best config on either backend
    monkeypatch.setenv("BWTUNE_DB", url)
    code, out, err = _run(capsys, "export", "r20261130-demo", "--format", "json")
    assert code == 0 and len(json.loads(out)["results"]) == len(lines)
    code, out, err = _run(capsys, "baseline", "set", "production", "r20261130-demo", "--reason", "first")
    assert code == 0, err
    code, out, err = _run(capsys, "baseline", "show", "production")
    assert code == 0 and "r20261130-demo" in out
    html, md = tmp_path / "report.html", tmp_path / "report.md"
    code, out, err = _run(capsys, "report", "r20261130-demo", "--html", str(html), "--md", str(md))
    assert code == 0, err
    assert "r20261130-demo" in md.read_text()
    code, out, err = _run(capsys, "runs")
    assert code == 0 and "r20261130-demo" in out
    code, out, err = _run(capsys, "report", "no-such-run")
    assert code != 0 and "no-such-run" in err
    for text in (out, err, md.read_text(), html.read_text()):
        assert PASSWORD not in text


def test_a_server_that_refuses_says_so_in_one_line_without_the_password(
    postgres_server: PostgresServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = postgres_server.url().replace(PASSWORD, "not-the-password-xyz")
    path = write_jsonl(tmp_path / "r.jsonl", sample_results())
    for argv in (["runs", "--db", wrong], ["import", str(path), "--db", wrong]):
        code, out, err = _run(capsys, *argv)
        assert code == 2 and out == ""
        assert len(err.strip().splitlines()) == 1, err
        assert "not-the-password-xyz" not in err and "***" in err and "authentication failed" in err
    closed = f"postgresql://bwtune:{PASSWORD}@127.0.0.1:1/postgres"
    code, _out, err = _run(capsys, "runs", "--db", closed)
    assert (
        code == 2 and len(err.strip().splitlines()) == 1 and PASSWORD not in err and "cannot connect" in err
    )
    with pytest.raises(store.StorageError) as caught:
        store.check_writable(tmp_path / "home", DatabaseURL(closed))
    assert PASSWORD not in str(caught.value) and "127.0.0.1:1" in str(caught.value)


def test_a_reading_command_on_a_database_bwtune_never_wrote_is_missing(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = _run(capsys, "runs", "--db", url)
    assert code == 2 and "no results store in" in err and PASSWORD not in err
    conn = store.connect(url)  # a writer creates the tables
    conn.close()
    code, out, err = _run(capsys, "runs", "--db", url, "--json")
    assert (code, json.loads(out)["runs"]) == (0, [])


def test_the_migrated_postgresql_schema_is_the_declared_one_and_reading_never_writes(url: str) -> None:
    conn = store.connect(url)
    assert schema.schema_version(conn) == schema.SCHEMA_VERSION
    assert schema.column_problems(conn) == []
    store.import_results(conn, sample_results())
    conn.close()
    reopened = store.connect(url)  # opening again migrates nothing
    assert schema.schema_version(reopened) == schema.SCHEMA_VERSION
    reopened.close()
    reader = store.connect_readonly(url)
    try:
        with pytest.raises(store.DB_INPUT_ERRORS[0], match="read-only"):
            reader.execute("DELETE FROM results")
        assert store.result_count(reader, "r20261130-demo") == len(sample_results())
    finally:
        reader.close()
    store.check_writable(None, DatabaseURL(url))  # reachable and writable: no error


_IMPORTER = textwrap.dedent(
    """
    import sys
    from bwtune import store
    conn = store.connect(sys.argv[1])
    for path in sys.argv[2:]:
        store.import_results_file(conn, path, batch=7)
    conn.close()
    """
)


def test_two_controllers_importing_different_runs_at_once_lose_nothing(url: str, tmp_path: Path) -> None:
    # Each controller imports its runs one file at a time; the runs share their configs
    # (the same flags: the same config ids), so their inserts meet on the configs table.
    files = {
        side: [write_jsonl(tmp_path / f"{side}{n}.jsonl", sample_results(f"{side}-run-{n}", seed=n))
               for n in range(6)]
        for side in ("a", "b")
    }  # fmt: skip
    store.connect(url).close()  # both find the schema in place (migrating at once is tested below)
    procs = [
        subprocess.Popen([sys.executable, "-c", _IMPORTER, url, *map(str, paths)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for paths in files.values()
    ]  # fmt: skip
    for proc in procs:
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    conn = store.connect_readonly(url)
    try:
        runs = {run["run_id"]: run["results"] for run in store.list_runs(conn)}
        expected = {f"{side}-run-{n}": len(sample_results()) for side in files for n in range(6)}
        assert runs == expected
        for run_id in expected:
            stored = store.run_results(conn, run_id)
            wanted = sample_results(run_id, seed=int(run_id[-1]))
            assert sorted((r["host"], r["config_id"], r["metrics"] == w["metrics"]) for r, w in
                          zip(sorted(stored, key=_key), sorted(wanted, key=_key), strict=True)) == sorted(
                (w["host"], w["config_id"], True) for w in wanted)  # fmt: skip
    finally:
        conn.close()


def _key(line: dict) -> tuple[str, str]:
    return line["host"], line["config_id"]


def test_two_controllers_opening_a_new_store_at_once_migrate_it_once(url: str) -> None:
    opener = "import sys\nfrom bwtune import store\nstore.connect(sys.argv[1]).close()\n"
    procs = [
        subprocess.Popen([sys.executable, "-c", opener, url], cwd=ROOT, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    conn = store.connect_readonly(url)
    try:
        assert [row[0] for row in conn.execute("SELECT version FROM bwtune_schema")] == [
            schema.SCHEMA_VERSION
        ]
    finally:
        conn.close()


def test_without_psycopg_a_postgresql_url_says_what_to_install_and_sqlite_still_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(store.DB_INPUT_ERRORS[0]) as caught:
        store.connect(f"postgresql://bwtune:{PASSWORD}@127.0.0.1:5432/x")
    message = str(caught.value)
    assert "pip install 'psycopg[binary]>=3.1'" in message and PASSWORD not in message
    assert len(message.splitlines()) == 1
    conn = store.connect(tmp_path / "results.db")
    store.import_results(conn, sample_results())
    assert store.result_count(conn, "r20261130-demo") == len(sample_results())
    conn.close()


# -- the URL where a path goes, and the dialect's rewrites


def test_a_url_keeps_its_password_only_where_it_connects() -> None:
    url = "postgresql://tuner:p%40ss:w0rd@db.example:5432/bwtune?sslmode=require"
    target = db_argument(url)
    assert isinstance(target, DatabaseURL) and target.url == url
    assert str(target) == f"{target}" == "postgresql://tuner:***@db.example:5432/bwtune?sslmode=require"
    assert "w0rd" not in repr(target)
    # A command that wraps it in a Path (pathlib folds `//`) still reaches the same server.
    assert database_target(Path(target)) == target
    assert database_target(Path("postgresql://h/db")) == DatabaseURL("postgresql://h/db")
    assert mask_url("postgresql://tuner@h/db") == "postgresql://tuner@h/db"
    assert isinstance(db_argument("results.db"), Path)


def test_bwtune_db_names_a_server_or_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BWTUNE_DB", "postgresql://u:pw@h:5/d")
    assert store.default_db_path() == DatabaseURL("postgresql://u:pw@h:5/d")
    monkeypatch.setenv("BWTUNE_DB", str(tmp_path / "x.db"))
    assert store.default_db_path() == tmp_path / "x.db"


@pytest.mark.parametrize(
    ("sqlite", "postgresql"),
    [
        ("SELECT * FROM runs WHERE run_id = ? AND x = '?%'",
         "SELECT * FROM runs WHERE run_id = %s AND x = '?%%'"),
        ("INSERT OR IGNORE INTO runs (run_id) VALUES (?)",
         "INSERT INTO runs (run_id) VALUES (%s) ON CONFLICT DO NOTHING"),
        (
            "INSERT OR REPLACE INTO baselines (name, run_id, reason) VALUES (?, ?, ?)",
            "INSERT INTO baselines (name, run_id, reason) VALUES (%s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET run_id = EXCLUDED.run_id, reason = EXCLUDED.reason",
        ),
        ("ALTER TABLE results ADD COLUMN accept_length REAL",
         "ALTER TABLE results ADD COLUMN accept_length DOUBLE PRECISION"),
        ("SELECT 'REAL' FROM t WHERE real_x = ?", "SELECT 'REAL' FROM t WHERE real_x = %s"),
    ],
)  # fmt: skip
def test_the_dialect_rewrites_sqlite_statements_for_postgresql(sqlite: str, postgresql: str) -> None:
    assert dialect.postgres_statement(sqlite) == postgresql


def test_an_upsert_into_a_table_without_a_known_key_is_refused() -> None:
    with pytest.raises(ValueError, match="no primary key of mystery"):
        dialect.postgres_statement("INSERT OR REPLACE INTO mystery (a) VALUES (?)")


def test_every_table_of_the_schema_has_its_primary_key_in_the_dialect(url: str) -> None:
    conn = store.connect(url)
    try:
        keys: dict[str, list[str]] = {}
        for row in conn.execute(
            """SELECT tc.table_name, kcu.column_name FROM information_schema.table_constraints tc
               JOIN information_schema.key_column_usage kcu USING (constraint_schema, constraint_name)
               WHERE tc.constraint_type = 'PRIMARY KEY' AND tc.table_schema = current_schema()
               ORDER BY tc.table_name, kcu.ordinal_position"""
        ):
            keys.setdefault(row[0], []).append(row[1])
    finally:
        conn.close()
    assert {t: tuple(c) for t, c in keys.items()} == dialect.PRIMARY_KEYS


def test_regress_reads_the_same_history_and_verdicts_from_either_backend(url: str, tmp_path: Path) -> None:
    """What `bwtune regress` computes from the store (its tagged history, baseline and the
    verdicts of regression_history.analyze) is the same on PostgreSQL as on SQLite."""
    from bwtune import regression_history
    from tests.unit.regression.history_lines import store_run

    verdicts = []
    for conn in (store.connect(tmp_path / "results.db"), store.connect(url)):
        try:
            store_run(conn, "night-1", 1, {"c-main": 1000.0, "c-alt": 900.0}, launches=3, seed=1)
            store_run(conn, "night-2", 2, {"c-main": 1005.0, "c-alt": 905.0}, launches=3, seed=2)
            store.set_baseline(conn, "production", "night-1", set_by="test", reason="first")
            store_run(conn, "night-3", 3, {"c-main": 800.0, "c-alt": "oom"}, launches=3, seed=3)
            report = regression_history.analyze(conn, "night-3", baseline="production")
            assert regression_history.history_runs(conn, "night-3") == ["night-1", "night-2"]
            # Everything but when the baseline was set (now, each time).
            verdicts.append(re.sub(r"'set_at': '[^']*'", "'set_at': ...", repr(report)))
        finally:
            conn.close()
    sqlite_report, postgres_report = verdicts
    assert "regress" in sqlite_report.lower()
    assert postgres_report == sqlite_report


def test_ensure_postgres_names_a_folder_with_initdb_and_pg_ctl(postgres_server: PostgresServer) -> None:
    found = subprocess.run(
        ["bash", str(ROOT / "scripts" / "postgres" / "ensure-postgres.sh")], capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr
    folder = Path(found.stdout.strip())
    assert (folder / "initdb").is_file() and (folder / "pg_ctl").is_file()
    assert folder == postgres_server.bindir
