"""The recipe export command promote prints (issue 27) is one a user can copy: a PostgreSQL
store's password is never printed, and the masked text is not offered as a --db that works."""

from __future__ import annotations

import argparse
from pathlib import Path

from bwtune import store
from bwtune.commands.promote import export_command

CHOSEN = {"id": "c5d41402abc"}


def _args(db: object) -> argparse.Namespace:
    return argparse.Namespace(run_id="r20261202-ab12cd34", db=db)


def test_a_file_store_is_named_as_given() -> None:
    line = export_command(_args(Path("/srv/bwtune/results.db")), CHOSEN)
    assert line == (
        "bwtune recipe export r20261202-ab12cd34 --config c5d41402abc --db /srv/bwtune/results.db "
        "-o c5d41402abc.recipe.json"
    )


def test_a_store_url_without_a_password_is_named_as_given() -> None:
    line = export_command(_args(store.DatabaseURL("postgresql://bw@db.lan/bwtune")), CHOSEN)
    assert "--db postgresql://bw@db.lan/bwtune -o" in line and "#" not in line


def test_a_store_urls_password_never_shows_and_its_masked_text_is_not_a_db_argument() -> None:
    line = export_command(_args(store.DatabaseURL("postgresql://bw:s3cret@db.lan/bwtune")), CHOSEN)
    assert "s3cret" not in line
    command, _, note = line.partition("  # ")
    assert "--db" not in command and command.endswith("-o c5d41402abc.recipe.json")
    assert note == "with --db postgresql://bw:***@db.lan/bwtune (its password as you gave it)"


def test_no_store_named_is_no_db_argument() -> None:
    assert "--db" not in export_command(_args(None), CHOSEN)
