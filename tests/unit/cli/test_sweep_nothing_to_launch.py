"""A matrix whose every config is pruned is refused on the controller, before any playbook
runs (issue 20 item 26): one line, exit 3, nothing started, no run recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from bwtune import ansible_run, exit_codes
from bwtune.cli import main

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "examples" / "demo.yml"


def test_a_matrix_with_every_config_pruned_runs_nothing_and_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("BWTUNE_HOME", str(home))
    monkeypatch.setattr(
        ansible_run,
        "load_inventory",
        lambda path, limit=None: ansible_run.Inventory(Path(path), {"localhost": {}}),
    )

    def run_playbook(*args: object, **kwargs: object) -> ansible_run.PlaybookRun:
        raise AssertionError("a playbook ran for a matrix with nothing to launch")

    monkeypatch.setattr(ansible_run, "run_playbook", run_playbook)
    # SM120 cannot run the trtllm-gen MoE runner: with it alone, every config is pruned.
    text = DEMO.read_text().replace(
        "moe-runner-backend: [flashinfer_cutlass, auto, flashinfer_trtllm, marlin]",
        "moe-runner-backend: [flashinfer_trtllm]",
    )
    assert "[flashinfer_trtllm]" in text
    matrix = tmp_path / "pruned.yml"
    matrix.write_text(text)
    (tmp_path / "models").mkdir()  # the demo's model path is relative to the matrix
    (tmp_path / "models" / "qwen35-397b-a17b-nvfp4").symlink_to(
        REPO / "examples" / "models" / "qwen35-397b-a17b-nvfp4"
    )
    code = main(["sweep", "-i", str(REPO / "inventory" / "local.yml"), "-m", str(matrix)])
    err = capsys.readouterr().err
    assert code == exit_codes.NOTHING_MEASURED == 3
    assert err.count("\n") == 1 and "nothing to launch: all 3 configs are pruned (3)" in err, err
    assert "nothing was run" in err
    assert not (home / "runs").exists()
