"""`bwtune promote` end to end on an unknown run: one line, exit 2 (ansible-inventory reads the
inventory; the rest of the command's input checks are in tests/unit/serving/test_promote_cli.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from bwtune import cli, exit_codes
from tests.unit.serving.test_promote_cli import db  # noqa: F401  (the fixture)


@pytest.mark.integration  # the CLI end to end (ansible-inventory reads the inventory)
def test_unknown_run_is_one_line_and_exit_2(
    db: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    inventory = tmp_path / "inventory.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"node": local}}}))
    code = cli.main(["promote", "no-such-run", "-i", str(inventory), "--db", str(db)])
    assert code == exit_codes.BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bwtune: no run 'no-such-run' in the results database"]
