"""The sweep module's options are defined once (module_utils/_contracts/sweep_options.py, issue 22).

The module's argument_spec and SweepOptions' defaults and bounds come from that table; the
module's DOCUMENTATION (a literal YAML string, for ansible-doc and ansible-test) and the sweep
role's ``sweep_<option>`` variables (meta/argument_specs.yml, defaults/main.yml,
tasks/validate.yml) are checked against it here, so none of them can drift from it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract, sweep_options
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_runner
from ansible_collections.bwtune.sglang.plugins.modules import sweep as sweep_module

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "sweep"
TABLE = sweep_options.BY_NAME
# What the role may declare for a module option of each type (a role spec has no `path`, and
# narrows `raw`).
ROLE_TYPES = {"path": {"path", "str"}, "raw": {"raw", "dict", "str", "list"}}


def yaml_file(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def documented_options() -> dict[str, Any]:
    return yaml.safe_load(sweep_module.DOCUMENTATION)["options"]


def role_specs() -> dict[str, Any]:
    return yaml_file(ROLE / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]


def role_pairs() -> list[tuple[str, sweep_options.Option]]:
    """The role variables that carry a module option: sweep_<option>."""
    specs = role_specs()
    return [("sweep_" + o.name, o) for o in sweep_options.OPTIONS if "sweep_" + o.name in specs]


def lines(description: Any) -> list[str]:
    return [
        " ".join(str(d).split()) for d in ([description] if isinstance(description, str) else description)
    ]


def test_the_module_builds_its_argument_spec_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def fake_module(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(sweep_module, "AnsibleModule", fake_module)
    with pytest.raises(Stop):
        sweep_module.main()
    assert seen["argument_spec"] == sweep_options.argument_spec()
    assert seen["supports_check_mode"] is True
    spec = seen["argument_spec"]
    assert spec["strategy"]["default"] == results_contract.DEFAULT_STRATEGY
    assert spec["strategy"]["choices"] == list(results_contract.STRATEGIES)
    assert spec["secret_env"]["no_log"] and spec["api_key"]["no_log"]
    assert spec["prior"]["options"]["score"] == {"type": "float", "required": True}
    # Each call is a fresh copy: a caller that mutates a default does not change the table's.
    spec["env"]["default"]["X"] = "1"
    assert sweep_options.argument_spec()["env"]["default"] == {}


def suboption_table(option: sweep_options.Option) -> dict[str, sweep_options.Option]:
    return {sub.name: sub for sub in option.suboptions}


def check_documented(documented: dict[str, Any], table: dict[str, sweep_options.Option], where: str) -> None:
    assert sorted(documented) == sorted(table), (
        f"{where}: DOCUMENTATION and sweep_options name different options"
    )
    for name, doc in documented.items():
        option = table[name]
        at = f"{where}{name}"
        assert doc.get("type") == option.type, at
        assert bool(doc.get("required", False)) == option.required, at
        assert doc.get("default") == option.default, at
        assert doc.get("choices") == option.choices, at
        assert doc.get("elements") == option.elements, at
        assert lines(doc["description"]) == lines(option.doc), f"{at}: description differs from sweep_options"
        if option.bounds_text():
            assert option.bounds_text() in " ".join(lines(option.doc)), f"{at}: its bounds are not documented"
        check_documented(doc.get("suboptions") or {}, suboption_table(option), at + ".")


def test_the_modules_documentation_agrees_with_the_table() -> None:
    check_documented(documented_options(), TABLE, "sweep: ")


def test_a_drifted_documentation_is_caught() -> None:
    documented = documented_options()
    documented["strategy"]["default"] = "grid"
    with pytest.raises(AssertionError, match="strategy"):
        check_documented(documented, TABLE, "sweep: ")


def test_sweep_options_defaults_are_the_modules(tmp_path: Path) -> None:
    # SweepOptions said strategy "grid" while the module and the role said "adaptive".
    options = sweep_runner.SweepOptions(
        matrix={"axes": {}}, results_path=str(tmp_path / "r1" / "results.jsonl")
    )
    spec = sweep_options.argument_spec()
    for name, attribute in [
        ("strategy", "strategy"),
        ("host", "host"),
        ("port", "port"),
        ("force", "force"),
        ("simulated", "simulated"),
        ("prior", "prior"),
        ("startup_timeout_s", "startup_timeout_s"),
        ("stop_grace_s", "stop_grace_s"),
        ("release_timeout_s", "release_timeout_s"),
    ]:
        assert getattr(options, attribute) == spec[name]["default"], name
    assert options.strategy == "adaptive"
    assert options.launch_command == [spec["python"]["default"], "-m", "sglang.launch_server"]


@pytest.mark.parametrize(
    ("name", "given", "why"),
    [
        ("port", 0, r"is out of range \(1-65535\)"),
        ("port", 65536, r"is out of range \(1-65535\)"),
        ("startup_timeout_s", 0, r"is out of range \(more than 0, at most 604800\)"),
        ("startup_timeout_s", "soon", "is not a number"),
    ],
)
def test_an_option_out_of_its_bounds_is_one_clear_line(
    tmp_path: Path, name: str, given: Any, why: str
) -> None:
    results = tmp_path / "r1" / "results.jsonl"
    with pytest.raises(sweep_runner.BadInput, match=f"^{name}: {re.escape(repr(given))} {why}$"):
        sweep_runner.SweepOptions(matrix={"axes": {}}, results_path=str(results), **{name: given})
    assert not results.parent.exists()


def test_the_roles_variables_agree_with_the_table() -> None:
    specs = role_specs()
    defaults = yaml_file(ROLE / "defaults" / "main.yml")
    pairs = role_pairs()
    assert {name for name, _ in pairs} >= {
        "sweep_strategy",
        "sweep_force",
        "sweep_prior",
        "sweep_port",
        "sweep_startup_timeout_s",
        "sweep_launch_command",
    }
    for name, option in pairs:
        spec = specs[name]
        assert spec["type"] in ROLE_TYPES.get(option.type, {option.type}), name
        assert spec.get("choices") == option.choices, name
        assert spec.get("elements") == option.elements, name
        assert bool(spec.get("no_log", False)) == option.no_log, name
        assert spec.get("default") == option.default, (
            f"{name}: argument_specs default differs from the module's"
        )
        if name in defaults and "{{" not in str(defaults[name]):  # a templated default is the role's own
            assert defaults[name] == option.default, f"{name}: defaults/main.yml differs from the module's"
        if option.bounds_text():
            assert option.bounds_text() in " ".join(lines(spec["description"])), (
                f"{name}: bounds not documented"
            )


def test_the_role_validates_the_modules_bounds() -> None:
    (task,) = yaml_file(ROLE / "tasks" / "validate.yml")
    checks = task["vars"]["__sweep_checks"]
    bounded = [(name, option) for name, option in role_pairs() if option.bounds_text()]
    assert bounded, "the table bounds no option the role has"
    for name, option in bounded:
        (check,) = [c for c in checks if str(c["msg"]).startswith(name + ":")]
        expression = " ".join(str(check["bad"]).split())
        low = ">" if option.exclusive_minimum else ">="
        cast = "int" if option.type == "int" else "float"
        assert f"{name} | {cast} {low} {option.minimum:g}" in expression, (name, expression)
        assert f"{name} | {cast} <= {option.maximum:g}" in expression, (name, expression)
        assert option.bounds_text() in check["msg"], (name, check["msg"])


def test_sweep_force_is_documented_as_what_it_does() -> None:
    # It re-measures configs the results file has (and lets a resumed run with changed workloads
    # go on); it never launches a config the rules pruned (the planner's verdict is final).
    described = " ".join(lines(role_specs()["sweep_force"]["description"]))
    assert " ".join(TABLE["force"].doc) in described
    assert "prune" not in described.lower() or "never launch" in described.lower()
