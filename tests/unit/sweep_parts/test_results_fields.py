"""The results line's field table (plugins/module_utils/_contracts/results_fields.py) is the one
declaration of a line: the builder's defaults, the validator's checks and the `--json` view
are what it says, field by field."""

from __future__ import annotations

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as rc
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_fields as rf

# A value each checked kind refuses (unchecked kinds refuse nothing).
_WRONG = {
    "schema": 2,
    "run id": "../x",
    "name": "",
    "status": "port-conflict",
    "object": [],
    "list": "x",
    "strings": [1],
    "config id": 3,
    "bool": "yes",
    "cold start": {"reached": "nowhere"},
    "objective": {"goal": "most"},
    "metrics": [],
    "failure": {"class": "oom"},
}


def _line() -> dict:
    return rc.make_line(run_id="r1", host="h", config_id="c1", status="ok")


def test_the_table_is_consistent() -> None:
    assert rf.problems() == []
    assert set(_WRONG) | rf.UNCHECKED_KINDS == set(rf.KINDS)


def test_make_line_writes_every_field_in_table_order_with_its_default() -> None:
    line = _line()
    assert list(line) == [f.name for f in rf.FIELDS] == list(rc.LINE_DEFAULTS)
    given = {"run_id", "host", "config_id", "status"}
    assert {f.name: line[f.name] for f in rf.FIELDS if f.name not in given} == {
        f.name: f.default for f in rf.FIELDS if f.name not in given
    }
    assert set(rf.REQUIRED_VALUES) == given  # the required fields without a default
    one, two = _line(), _line()
    one["flags"]["x"] = 1
    assert two["flags"] == {}  # defaults are copied, never shared


@pytest.mark.parametrize("name", rf.REQUIRED_VALUES)
def test_make_line_needs_each_required_value(name: str) -> None:
    fields = {"run_id": "r1", "host": "h", "config_id": "c1", "status": "ok"}
    del fields[name]
    with pytest.raises(TypeError, match=name):
        rc.make_line(**fields)


@pytest.mark.parametrize("name", rf.REQUIRED)
def test_the_validator_needs_each_required_key(name: str) -> None:
    line = _line()
    del line[name]
    with pytest.raises(rc.ResultsFormatError, match=f"missing key '{name}'"):
        rc.validate_line(line, "r.jsonl:1")


@pytest.mark.parametrize(
    "field", [f for f in rf.FIELDS if f.kind in _WRONG], ids=lambda f: f"{f.name}-{f.kind}"
)
def test_the_validator_checks_each_field_by_its_kind(field: rf.Field) -> None:
    line = _line()
    line[field.name] = _WRONG[field.kind]
    with pytest.raises(rc.ResultsFormatError, match=field.name if field.kind != "failure" else "failure"):
        rc.validate_line(line, "r.jsonl:1")


@pytest.mark.parametrize("field", [f for f in rf.FIELDS if f.kind in rf.UNCHECKED_KINDS], ids=str)
def test_an_unchecked_field_is_never_refused(field: rf.Field) -> None:
    line = _line()
    line[field.name] = {"anything": ["at", "all"]}
    rc.validate_line(line)


@pytest.mark.parametrize(
    "field", [f for f in rf.FIELDS if not f.required and f.kind != "failure"], ids=lambda f: f.name
)
def test_an_optional_field_may_be_missing_or_null(field: rf.Field) -> None:
    line = _line()
    del line[field.name]
    rc.validate_line(line)
    if field.kind != "bool":  # screened_out: true or false when present
        line[field.name] = None
        rc.validate_line(line)


def test_the_json_view_shows_each_field_under_its_json_name_once() -> None:
    view = rf.view_fields()
    assert [key for key, _name in view] == list(rf.VIEW_ORDER)
    shown = {name: key for key, name in view if name is not None}
    assert shown == {f.name: f.json for f in rf.FIELDS if f.json is not None}
    assert shown["config_id"] == "id"  # the one rename: `--json` results call the config id `id`
    assert {key for key, name in view if name is None} == set(rf.VIEW_COMPUTED)
