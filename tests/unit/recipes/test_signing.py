"""Signing a recipe with OpenSSH: a round trip, a tampered file, a wrong signer."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from bwtune import cli, exit_codes
from bwtune.recipes import recipe_file, signing
from tests.unit.recipes.recipe_store import RUN


def _key(folder: Path, name: str) -> Path:
    key = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key


@pytest.fixture
def signed(tmp_path: Path, db: sqlite3.Connection) -> tuple[Path, Path, Path]:
    """(recipe, its signature, an allowed-signers file naming alice), signed by alice."""
    recipe = tmp_path / "recipe.json"
    recipe.write_text(recipe_file.dumps(recipe_file.build(db, RUN)))
    key = _key(tmp_path, "alice")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"alice@example.org {(tmp_path / 'alice.pub').read_text()}")
    return recipe, Path(signing.sign(str(recipe), str(key))), allowed


def test_a_signed_recipe_verifies(signed: tuple[Path, Path, Path]) -> None:
    recipe, sig, allowed = signed
    assert sig == Path(f"{recipe}.sig")
    outcome = signing.verify(str(recipe), str(allowed))
    assert outcome.ok and outcome.identity == "alice@example.org"
    assert signing.verify(str(recipe), str(allowed), "alice@example.org").ok


def test_the_signature_is_ssh_keygens_over_the_manifest(signed: tuple[Path, Path, Path]) -> None:
    """What docs/recipes.md says to run by hand checks the same signature."""
    _recipe, sig, allowed = signed
    manifest, _, armored = sig.read_text().partition("\n")
    assert json.loads(manifest)["fields"].keys() == set(recipe_file.FIELDS)
    bare = sig.parent / "bare.sig"
    bare.write_text(armored)
    result = subprocess.run(
        ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "alice@example.org",
         "-n", signing.NAMESPACE, "-s", str(bare)],
        input=manifest.encode(), capture_output=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_a_tampered_field_fails_and_is_named(signed: tuple[Path, Path, Path]) -> None:
    recipe, _sig, allowed = signed
    data = json.loads(recipe.read_text())
    data["results"]["objective_value"] *= 1.5
    data["simulated"] = False
    recipe.write_text(json.dumps(data, indent=2))
    outcome = signing.verify(str(recipe), str(allowed))
    assert not outcome.ok
    assert outcome.changed == ["results", "simulated"]
    assert "fields results, simulated" in outcome.message


def test_a_file_that_no_longer_parses_fails(signed: tuple[Path, Path, Path]) -> None:
    recipe, _sig, allowed = signed
    recipe.write_text(recipe.read_text()[:-20])
    outcome = signing.verify(str(recipe), str(allowed))
    assert not outcome.ok and "not JSON" in outcome.message


def test_reformatting_alone_is_no_change(signed: tuple[Path, Path, Path]) -> None:
    recipe, _sig, allowed = signed
    recipe.write_text(json.dumps(json.loads(recipe.read_text()), sort_keys=True))
    outcome = signing.verify(str(recipe), str(allowed))
    assert outcome.ok and "reformatted" in outcome.message


def test_a_signer_not_allowed_fails(tmp_path: Path, signed: tuple[Path, Path, Path]) -> None:
    recipe, _sig, _allowed = signed
    _key(tmp_path, "mallory")
    others = tmp_path / "others"
    others.write_text(f"mallory@example.org {(tmp_path / 'mallory.pub').read_text()}")
    outcome = signing.verify(str(recipe), str(others))
    assert not outcome.ok and "not an allowed signer" in outcome.message
    # Naming the identity does not help: the key is not that identity's.
    outcome = signing.verify(str(recipe), str(others), "mallory@example.org")
    assert not outcome.ok and "does not verify" in outcome.message


def test_a_tampered_signature_fails(signed: tuple[Path, Path, Path]) -> None:
    recipe, sig, allowed = signed
    manifest, _, armored = sig.read_text().partition("\n")
    forged = json.loads(manifest)
    forged["sha256"] = "0" * 64
    sig.write_text(json.dumps(forged, sort_keys=True, separators=(",", ":")) + "\n" + armored)
    assert not signing.verify(str(recipe), str(allowed)).ok


def test_the_cli_round_trip_and_exit_codes(
    tmp_path: Path, db: sqlite3.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    key = _key(tmp_path, "bob")
    allowed = tmp_path / "allowed"
    allowed.write_text(f"bob@example.org {(tmp_path / 'bob.pub').read_text()}")
    out = tmp_path / "r.json"
    argv = [
        "recipe",
        "export",
        RUN,
        "-o",
        str(out),
        "--sign-key",
        str(key),
        "--db",
        str(tmp_path / "results.db"),
    ]
    assert cli.main(argv) == exit_codes.OK
    check = ["recipe", "verify-signature", str(out), "--allowed-signers", str(allowed)]
    assert cli.main(check) == exit_codes.OK
    assert "good signature by bob@example.org" in capsys.readouterr().out
    out.write_text(out.read_text().replace('"passed": true', '"passed": false'))
    assert cli.main(check) == exit_codes.NOT_VERIFIED
    err = capsys.readouterr().err
    assert "field gate" in err and len(err.strip().splitlines()) == 1
    assert cli.main([*check[:3], "--allowed-signers", str(tmp_path / "none")]) == exit_codes.BAD_INPUT
    assert cli.main(["recipe", "sign", str(out), "--key", str(tmp_path / "nokey")]) == exit_codes.BAD_INPUT
    assert "--key" in capsys.readouterr().err
