"""A run keeps the settings it was started with; resume, attach and cancel reuse them."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path

import pytest

from bwtune import ansible_run, run_settings
from bwtune.cli import build_parser, main
from bwtune.commands import demo
from bwtune.commands import sweep_command as sweep

REPO = Path(__file__).resolve().parents[3]
LOCAL = REPO / "inventory" / "local.yml"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))

    # ansible-inventory itself is tested elsewhere (tests/integration/cli); here only which
    # inventory a resume reads matters.
    def load_inventory(path: str | Path, limit: str | None = None) -> ansible_run.Inventory:
        return ansible_run.Inventory(Path(path).resolve(), {"localhost": {}})

    monkeypatch.setattr(ansible_run, "load_inventory", load_inventory)
    return tmp_path / "home"


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def start(request: sweep.SweepRequest) -> None:
    """What run_sweep keeps before the playbook starts."""
    sweep.ansible_run.private_data_dir(request.run_id)
    (sweep.store.run_dir(request.run_id) / "matrix.json").write_text('{"model": {"path": "/m"}}')
    request.settings().save(request.run_id)


def test_demo_resume_reuses_the_demos_startup_scale_and_says_how(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(demo.SCALE_ENV, raising=False)
    first = demo._fresh(parse("demo"))
    start(first)
    saved = sweep.store.run_dir(first.run_id) / run_settings.FILE_NAME
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600  # -e values may hold secrets
    # The resume is run from a shell that no longer has the scale in its environment.
    again = demo._resume(parse("demo", "--resume", first.run_id))
    assert again.node_env == first.node_env == {demo.SCALE_ENV: demo.DEMO_STARTUP_SCALE}
    assert (again.run_id, again.resumed, again.node_results_dir) == (
        first.run_id,
        True,
        first.node_results_dir,
    )
    # The line printed after Ctrl-C names the command that resumes with these settings.
    assert again.resume_command() == first.resume_command() == f"bwtune demo --resume {first.run_id}"


def test_sweep_resume_needs_no_inventory_and_keeps_settings_but_not_force(tmp_path: Path) -> None:
    (tmp_path / "v.yml").write_text("sweep_port: 31000\n")
    args = parse(
        "sweep", "-i", str(LOCAL), "-m", str(REPO / "examples" / "demo.yml"), "--strategy", "screen",
        "-l", "localhost", "--node-results-dir", str(tmp_path / "node"), "-e", f"@{tmp_path / 'v.yml'}",
        "--force",
    )  # fmt: skip
    first = sweep.request_from_args(args)
    start(first)
    again = sweep.request_from_args(parse("sweep", "--resume", first.run_id))
    assert again.inventory.path == LOCAL.resolve()
    assert (again.strategy, again.limit, again.node_results_dir) == (
        "screen",
        "localhost",
        str(tmp_path / "node"),
    )
    assert again.extra_vars == [f"@{tmp_path / 'v.yml'}"]
    assert (first.force, again.force) == (True, False)
    assert again.resume_command() == f"bwtune sweep --resume {first.run_id}"
    # A flag given again wins over the saved one.
    assert (
        sweep.request_from_args(parse("sweep", "--resume", first.run_id, "--strategy", "grid")).strategy
        == "grid"
    )


def test_a_demo_run_id_given_to_resume_a_sweep_run_is_refused() -> None:
    first = sweep.request_from_args(
        parse("sweep", "-i", str(LOCAL), "-m", str(REPO / "examples" / "demo.yml"))
    )
    start(first)
    with pytest.raises(sweep.BadInput, match="not a demo run"):
        demo._resume(parse("demo", "--resume", first.run_id))


def test_cancel_stops_the_run_where_its_settings_say_and_says_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sweep", "-i", str(LOCAL), "-m", str(REPO / "examples" / "demo.yml")]
    first = sweep.request_from_args(parse(*argv, "--node-results-dir", str(tmp_path / "n")))
    start(first)
    calls = []

    def run_playbook(
        name: str, inventory: ansible_run.Inventory, extravars: dict, **kwargs: object
    ) -> ansible_run.PlaybookRun:
        calls.append((name, inventory.path, extravars))
        done = ansible_run.PlaybookRun(playbook=Path(name), private_data_dir=tmp_path, ident="x")
        done.stats = {"ok": {"localhost": 1}}
        done.rc = 0
        return done

    monkeypatch.setattr(ansible_run, "run_playbook", run_playbook)
    assert main(["cancel", first.run_id]) == 0
    assert calls == [
        (
            "sweep_cancel.yml",
            LOCAL.resolve(),
            {"bwtune_run_id": first.run_id, "sweep_results_dir": str(tmp_path / "n")},
        )
    ]
    assert capsys.readouterr().err == (
        f"bwtune: cancelled run {first.run_id}; stopped on: localhost\n"
        f"resume with: bwtune sweep --resume {first.run_id}\n"
    )
