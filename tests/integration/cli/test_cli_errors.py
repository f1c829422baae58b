"""`bwtune` commands given bad input: one clear line on stderr, exit 2, nothing run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import INVENTORIES, LOCAL_INVENTORY, REPO, bwtune_argv

DEMO_MATRIX = REPO / "examples" / "demo.yml"


def bwtune(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        bwtune_argv(*args), capture_output=True, text=True, env=env, timeout=120, check=False
    )


@pytest.mark.parametrize("command", [["sweep", "-m", str(DEMO_MATRIX)], ["facts"], ["provision"]])
def test_a_missing_inventory_is_one_line_and_exit_2(cli_env: dict[str, str], command: list[str]) -> None:
    done = bwtune(cli_env, *command, "-i", "/nonexistent/hosts.yml")
    assert done.returncode == 2
    assert done.stderr == "bwtune: inventory /nonexistent/hosts.yml: no such file or directory\n"
    assert done.stdout == ""


def test_an_unparsable_inventory_names_the_file_and_reason(
    cli_env: dict[str, str], bwtune_home: Path
) -> None:
    done = bwtune(cli_env, "sweep", "-i", str(INVENTORIES / "broken.yml"), "-m", str(DEMO_MATRIX))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(
        f"bwtune: inventory {INVENTORIES / 'broken.yml'}: cannot be parsed as yaml: "
    )
    assert not (bwtune_home / "runs").exists()


def test_a_limit_matching_no_host_is_bad_input(cli_env: dict[str, str]) -> None:
    done = bwtune(cli_env, "sweep", "-i", str(LOCAL_INVENTORY), "-m", str(DEMO_MATRIX), "--limit", "nohost")
    assert done.returncode == 2
    assert done.stderr == f"bwtune: inventory {LOCAL_INVENTORY}: no hosts matching --limit 'nohost'\n"


def test_sweep_needs_a_matrix_or_a_run_to_resume(cli_env: dict[str, str]) -> None:
    done = bwtune(cli_env, "sweep", "-i", str(LOCAL_INVENTORY))
    assert (done.returncode, done.stderr) == (
        2,
        "bwtune: give a matrix with -m MATRIX (or --resume RUN_ID)\n",
    )
    done = bwtune(cli_env, "sweep", "-i", str(LOCAL_INVENTORY), "--resume", "20990101T000000Z-0000")
    assert done.returncode == 2
    assert done.stderr == (
        "bwtune: --resume 20990101T000000Z-0000: no matrix saved for that run; give -m MATRIX\n"
    )


def test_a_matrix_that_is_not_yaml_names_its_line(cli_env: dict[str, str], tmp_path: Path) -> None:
    matrix = tmp_path / "m.yml"
    matrix.write_text("model: {path: /m}\naxes:\n  tp-size: [1, 2\n")
    done = bwtune(cli_env, "sweep", "-i", str(LOCAL_INVENTORY), "-m", str(matrix))
    assert done.returncode == 2
    assert done.stderr.startswith(f"bwtune: {matrix}:")
    assert "not valid YAML" in done.stderr and done.stderr.count("\n") == 1
