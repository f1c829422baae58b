"""Every numeric role variable has a range, checked before its role runs (issue 21 #9).

The argument specs check a variable's type; a role's vars/bounds.yml gives each int/float
variable its range, and the role's first task fails with one line per variable outside it
(filter bwtune.sglang.out_of_range). The sweep role checks its own in tasks/validate.yml.
A new numeric variable without a bound fails here.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.bwtune.sglang.plugins.filter.out_of_range import out_of_range

REPO = Path(__file__).resolve().parents[3]
CHECK_TASK = "Check the numeric variables' ranges before anything runs"
PORT = {"min": 1, "max": 65535, "what": "a port"}


def specs(role: str) -> dict[str, Any]:
    path = REPO / "roles" / role / "meta" / "argument_specs.yml"
    return dict((yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("argument_specs") or {})


def numeric(role: str) -> dict[str, dict[str, Any]]:
    """The role's int and float variables, over all its entry points."""
    return {
        name: option
        for spec in specs(role).values()
        for name, option in (spec.get("options") or {}).items()
        if (option or {}).get("type") in ("int", "float")
    }


ROLES = sorted(p.parents[1].name for p in REPO.glob("roles/*/meta/argument_specs.yml"))
BOUNDED = [role for role in ROLES if numeric(role) and role != "sweep"]


def bounds(role: str) -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "roles" / role / "vars" / "bounds.yml").read_text(encoding="utf-8")))


# The filter.


def test_values_inside_their_bounds_give_no_line() -> None:
    table = {"p": PORT, "t": {"above": 0}, "f": {"above": 0, "below": 1}, "n": {"min": 0}}
    assert out_of_range({"p": 1, "t": 0.5, "f": 0.03, "n": 0}, table) == []
    assert out_of_range({"p": 65535, "t": "900", "f": "0.5", "n": " 3 "}, table) == []


def test_each_value_outside_its_bounds_is_one_line_naming_it_the_value_and_the_range() -> None:
    table = {"p": PORT, "t": {"above": 0}, "f": {"above": 0, "below": 1}, "n": {"min": 0}, "m": {"max": 5}}
    assert out_of_range({"p": 70000, "t": 0, "f": 1, "n": -1, "m": 6}, table) == [
        "p: 70000 is out of range (1-65535: a port)",
        "t: 0 is out of range (more than 0)",
        "f: 1 is out of range (more than 0 and less than 1)",
        "n: -1 is out of range (at least 0)",
        "m: 6 is out of range (at most 5)",
    ]
    assert out_of_range({"p": 0, "t": -0.5, "f": 0.0, "n": 0, "m": 5}, table) == [
        "p: 0 is out of range (1-65535: a port)",
        "t: -0.5 is out of range (more than 0)",
        "f: 0.0 is out of range (more than 0 and less than 1)",
    ]


def test_a_number_given_as_a_string_is_that_number_and_is_shown_as_given() -> None:
    # -e server_port=70000 gives the string "70000"; the argument specs let it through as an int.
    assert out_of_range({"p": "70000"}, {"p": PORT}) == ["p: 70000 is out of range (1-65535: a port)"]


@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "true"), ("abc", '"abc"'), (None, "null"), ([1], "[1]"), (math.nan, "NaN"), ("inf", "inf")],
)
def test_what_is_not_a_finite_number_is_a_line_too(value: Any, shown: str) -> None:
    assert out_of_range({"p": value}, {"p": PORT}) == [f"p: {shown} is not a number (1-65535: a port)"]


def test_the_limits_are_shown_as_written() -> None:
    table = {"a": {"min": 1, "max": 31536000}, "b": {"above": 0.5, "below": 2.0}}
    assert out_of_range({"a": 0, "b": 2}, table) == [
        "a: 0 is out of range (1-31536000)",
        "b: 2 is out of range (more than 0.5 and less than 2)",
    ]


def test_unset_lets_a_null_value_through_and_says_so() -> None:
    table = {"s": {"min": 1, "unset": True}}
    assert out_of_range({"s": None}, table) == []
    assert out_of_range({"s": 0}, table) == ["s: 0 is out of range (at least 1, or unset)"]


@pytest.mark.parametrize(
    "table",
    [{}, [], {"p": 1}, {"p": {}}, {"p": {"what": "x"}}, {"p": {"min": 1, "mni": 2}}, {"p": {"min": "1"}}],
)
def test_a_table_that_is_not_one_is_an_error(table: Any) -> None:
    with pytest.raises(AnsibleFilterError, match="out_of_range: "):
        out_of_range({"p": 1}, table)


def test_a_variable_without_a_value_is_an_error() -> None:
    with pytest.raises(AnsibleFilterError, match="no value given for q"):
        out_of_range({"p": 1}, {"p": PORT, "q": PORT})


# The roles.


def test_the_roles_with_numeric_variables_are_the_ones_bounded() -> None:
    assert "sweep" in ROLES and set(BOUNDED) >= {
        "checkpoint",
        "preflight",
        "regress_schedule",
        "server",
        "sgl_kernel",
    }
    for role in set(ROLES) - set(BOUNDED) - {"sweep"}:
        assert not (REPO / "roles" / role / "vars" / "bounds.yml").exists(), role


@pytest.mark.parametrize("role", BOUNDED)
def test_every_int_and_float_variable_of_the_argument_specs_has_a_bound(role: str) -> None:
    table = bounds(role)
    assert sorted(table) == sorted(numeric(role)), (
        f"roles/{role}/vars/bounds.yml and the argument specs differ"
    )
    out_of_range({name: 1 for name in table}, table)  # the table is a valid one


def test_the_sweep_role_checks_each_of_its_numeric_variables_in_validate_yml() -> None:
    checks = yaml.safe_load((REPO / "roles/sweep/tasks/validate.yml").read_text(encoding="utf-8"))
    [task] = [t for t in checks if t.get("ansible.builtin.fail")]
    checked = " ".join(check["bad"] for check in task["vars"]["__sweep_checks"])
    for name in numeric("sweep"):
        assert re.search(rf"\b{name}\b", checked), f"roles/sweep/tasks/validate.yml does not check {name}"


@pytest.mark.parametrize("role", BOUNDED)
def test_the_defaults_are_inside_the_bounds(role: str) -> None:
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text(encoding="utf-8"))
    table = bounds(role)
    assert out_of_range({name: defaults[name] for name in table}, table) == []
    spec_defaults = {name: option["default"] for name, option in numeric(role).items() if "default" in option}
    assert out_of_range({**spec_defaults, **{n: 1 for n in table if n not in spec_defaults}}, table) == []


@pytest.mark.parametrize(
    ("role", "tasks"),
    [(role, entry) for role in BOUNDED for entry in specs(role)],
)
def test_the_check_is_the_first_task_of_every_entry_point(role: str, tasks: str) -> None:
    path = REPO / "roles" / role / "tasks" / f"{tasks}.yml"
    first = yaml.safe_load(path.read_text(encoding="utf-8"))[0]
    assert first["name"] == CHECK_TASK, path
    assert "ansible.builtin.fail" in first and first["when"] == f"__{role}_out_of_range | length > 0"
    assert "'/vars/bounds.yml'" in first["vars"][f"__{role}_bounds"]
