"""Version ordering for the rules' ranges (releases, .postN, .devM, +local), the compact
storage of every release's flag table, and what the planner says about releases it lacks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.bwtune.sglang.plugins.module_utils._plan import planner
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import (
    catalog,
    flag_table_codec,
    rules,
    sglang_flags,
    versions,
)

REPO = Path(__file__).resolve().parents[2]

# Each strictly after the one before it (PEP 440).
ORDERED = [
    "0.5.9.dev3",
    "0.5.9",
    "0.5.9.post1.dev2",
    "0.5.9.post1",
    "0.5.10.dev0",
    "0.5.10.dev0+g1a2b3c4",
    "0.5.10",
    "0.5.10+local.7",
    "0.5.10.post1",
    "0.5.23",
    "0.5.23.post2.dev45+g1a2b3c4",
    "0.5.23.post2",
    "0.5.24.dev1",
    "0.6",
    "1.0.0.post1",
]


def test_versions_order_as_pep_440() -> None:
    keys = [versions.version_key(v) for v in ORDERED]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert versions.compare("0.5", "0.5.0") == 0
    assert versions.compare("0.5.10", "0.5.9") == 1  # numeric, not text, order


@given(st.permutations(ORDERED))
def test_sorting_any_shuffle_gives_the_pep_440_order(shuffled: list[str]) -> None:
    assert sorted(shuffled, key=versions.version_key) == ORDERED


@pytest.mark.parametrize(
    ("version", "spec", "inside"),
    [
        ("0.5.23.post2.dev45+g1a2b3c4", ">=0.5.23", True),
        ("0.5.23.post2.dev45+g1a2b3c4", "<0.5.23.post2", True),
        ("0.5.23.post2.dev45+g1a2b3c4", "<0.5.23", False),
        ("0.5.23.dev4", "<0.5.23", True),  # a build of main before the 0.5.23 release
        ("0.5.23.dev4", ">=0.5.22,<0.5.23", True),
        ("0.5.10.post1", ">0.5.10", True),
        ("0.5.10.post1", "==0.5.10", False),
        ("0.5.10", "!=0.5.10", False),
    ],
)
def test_rule_ranges_place_dev_and_post_builds(version: str, spec: str, inside: bool) -> None:
    assert catalog.version_in(version, spec) is inside


@pytest.mark.parametrize("bad", ["0.5.x", "latest", "0.5.23-rc", "", "0.5.23+"])
def test_not_a_version_is_refused(bad: str) -> None:
    with pytest.raises(catalog.CatalogError, match="version"):
        catalog.parse_version(bad)


def test_a_build_between_releases_follows_the_release_at_or_before_it() -> None:
    known = catalog.supported_versions()
    assert versions.release_at_or_below("0.5.23.post2.dev45+g1a2b3c4", known) == "0.5.23"
    assert versions.release_at_or_below("0.5.16.dev3", known) == "0.5.15.post1"
    assert versions.release_at_or_below("0.5.13.post1", known) == "0.5.13.post1"
    assert versions.release_at_or_below("0.5.6", known) is None
    # and the rules follow its position: 0.5.9's refusal of a trtllm speculative runner
    # applies to a dev build of 0.5.10, not to one after 0.5.23.
    rule = next(r for r in rules.RULES if r.id == "speculative-moe-runner-trtllm")
    assert rule.applies("0.5.10.dev7+gabc", "sm120") is rule.applies("0.5.9", "sm120")
    assert rule.applies("0.5.23.post2.dev45+g1a2b3c4", "sm120") is rule.applies("0.5.23", "sm120")


# ---------------------------------------------------------------- compact storage


def _full_tables() -> dict[str, Any]:
    return catalog.raw_tables()


def test_every_release_from_january_2026_through_0_5_23_has_a_table() -> None:
    known = catalog.supported_versions()
    assert known[0] == "0.5.7" and known[-1] == "0.5.23" and len(known) == 22
    assert {"0.5.8.post1", "0.5.10.post1", "0.5.12.post1", "0.5.13.post1", "0.5.15.post1"} <= set(known)


def test_storage_is_a_base_table_plus_differences() -> None:
    stored = len(sglang_flags.BASE_FLAGS) + sum(
        len(d.get("set", {})) + len(d.get("removed", [])) for d in sglang_flags.RELEASES.values()
    )
    full = sum(len(t["flags"]) for t in _full_tables().values())
    assert sglang_flags.BASE_RELEASE == "0.5.23"
    assert stored * 5 < full, (stored, full)  # far less than a copy per release


def test_every_release_round_trips_through_the_compact_storage() -> None:
    tables = copy.deepcopy(_full_tables())
    assert flag_table_codec.expand(*flag_table_codec.compact(tables)) == tables
    # also any subset of releases (a release added or dropped re-bases the chain)
    names = list(tables)
    for drop in names:
        subset = {v: tables[v] for v in names if v != drop}
        assert flag_table_codec.expand(*flag_table_codec.compact(subset)) == subset


_spec = st.fixed_dictionaries(
    {"type": st.sampled_from(["str", "int"]), "default": st.none() | st.integers(0, 3), "choices": st.none()}
)
_tables = st.dictionaries(
    st.sampled_from(["0.5.7", "0.5.8", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.23"]),
    st.dictionaries(st.sampled_from(list("abcdefgh")), _spec, max_size=6),
    min_size=1,
).map(lambda t: {v: {"source": f"sglang=={v}", "flags": f} for v, f in t.items()})


@given(_tables)
def test_any_tables_round_trip(tables: dict[str, Any]) -> None:
    assert flag_table_codec.expand(*flag_table_codec.compact(tables)) == tables


def test_flag_tables_name_is_the_expanded_tables() -> None:
    from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.sglang_flags import FLAG_TABLES

    assert set(FLAG_TABLES) == set(catalog.supported_versions())
    assert "mamba-scheduler-strategy" in FLAG_TABLES["0.5.9"]["flags"]
    assert "mamba-scheduler-strategy" not in FLAG_TABLES["0.5.23"]["flags"]


# ---------------------------------------------------------------- the planner and releases


def _demo(version: str, **changes: Any) -> dict[str, Any]:
    matrix = yaml.safe_load((REPO / "examples" / "demo.yml").read_text())
    matrix["model"]["path"] = str(REPO / "examples" / "models" / "qwen35-397b-a17b-nvfp4")
    matrix["sglang"]["version"] = version
    matrix["axes"]["moe-runner-backend"] = ["flashinfer_cutlass", "auto"]  # choices every release has
    matrix["bundles"]["speculative"]["mtp3"].pop("mamba-radix-cache-strategy")
    known = version in catalog.supported_versions()
    if known and "fp4-gemm-backend" not in catalog.get_table(version).flags:  # 0.5.7 has none
        del matrix["axes"]["fp4-gemm-backend"]
        matrix["exclude"] = []
    matrix.update(changes)
    return matrix


@pytest.mark.parametrize("version", ["0.5.7", "0.5.8.post1", "0.5.9", "0.5.12", "0.5.16", "0.5.21"])
def test_plan_accepts_each_known_release(version: str) -> None:
    result = planner.plan(_demo(version))
    assert result.sglang_version == version and result.rules_release == version
    if catalog.version_in(version, "<0.5.9"):  # planned, but those releases cannot load Qwen3.5
        assert result.summary["valid"] == 0
        assert all(
            r.rule == "qwen35-needs-0.5.9" for c in result.configs for r in c.reasons if r.kind == "sglang"
        )
    else:
        assert result.summary["valid"] > 0


@pytest.mark.parametrize(
    ("version", "nearest"),
    [
        ("0.5.6.post2", "the nearest is 0.5.7"),
        ("0.5.24", "the nearest is 0.5.23"),
        ("0.5.9.post1", "the nearest are 0.5.9 and 0.5.10"),
    ],
)
def test_a_version_without_a_table_is_refused_naming_the_nearest(version: str, nearest: str) -> None:
    with pytest.raises(MatrixError, match=f"no flag table for SGLang {version}.*{nearest}"):
        planner.plan(_demo(version))


def test_a_flag_the_release_lacks_names_the_releases_that_have_it() -> None:
    matrix = _demo("0.5.23", base={"tp-size": 8, "enable-double-sparsity": True})
    with pytest.raises(MatrixError) as err:
        planner.plan(matrix)
    having = [
        v for v in catalog.supported_versions() if "enable-double-sparsity" in catalog.get_table(v).flags
    ]
    assert having and "0.5.23" not in having
    message = "SGLang 0.5.23 has no flag --enable-double-sparsity"
    assert f"{message} (releases that have it: {having[0]} to {having[-1]})" in str(err.value)


def test_a_flag_no_release_has_says_so_without_a_list() -> None:
    assert (
        catalog.get_table("0.5.23").unknown_flag_message("no-such-flag")
        == "SGLang 0.5.23 has no flag --no-such-flag"
    )


def test_release_ranges_split_where_a_flag_comes_back() -> None:
    assert catalog.release_ranges(["0.5.7", "0.5.8", "0.5.9", "0.5.12"]) == "0.5.7 to 0.5.8, 0.5.9, 0.5.12"


def test_version_auto_on_a_source_build_uses_its_parser_and_names_the_release_whose_rules_apply() -> None:
    from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.installed_flags import stack_flags

    build = "0.5.23.post2.dev45+g1a2b3c4"
    flags = stack_flags(catalog.get_table("0.5.23"))
    flags["enable-brand-new-thing"] = {"dest": "x", "choices": None, "aliases": [], "takes_value": False}
    facts = {"stack": {"sglang": {"installed": True, "version": build, "flags": flags}}}
    matrix = _demo(
        "auto", base={"tp-size": 8, "quantization": "modelopt_fp4", "enable-brand-new-thing": True}
    )
    result = planner.plan(matrix, gpu="sm120", facts=facts)
    assert result.sglang_version == build and result.rules_release == "0.5.23"
    assert result.to_dict()["rules_release"] == "0.5.23"
    # the flag only the build's own parser has is accepted; 0.5.23's rules pruned trtllm MoE
    assert all(c.flags.get("enable-brand-new-thing") for c in result.configs)
    assert result.summary["valid"] > 0
    # the same build planned by the catalog alone has no table, and says which are nearest
    with pytest.raises(MatrixError, match=r"the nearest is 0\.5\.23"):
        planner.plan(_demo(build))
