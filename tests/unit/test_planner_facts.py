"""The planner with node facts: `gpu: auto`, `version: auto`, and the node's own SGLang parser.

Facts are what the modules return (docs/facts.md): GPU facts built from the recorded and
written nvidia-smi fixtures, stack facts from the H200 capture and from flag tables turned
into what stack_facts reports (`installed_flags.stack_flags`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import gpu_info
from ansible_collections.bwtune.sglang.plugins.module_utils._plan import planner
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import get_table
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.installed_flags import stack_flags

ROOT = Path(__file__).resolve().parents[2]
GPU_FIXTURES = ROOT / "tests" / "fixtures" / "gpu"
EXAMPLE = ROOT / "examples" / "qwen35-397b-nvfp4-sm120.yml"


def gpu_facts(folder: str, caps_edit: tuple[str, str] | None = None) -> dict[str, Any]:
    """bwtune_gpu from a fixture's nvidia-smi outputs (caps_edit: replace once in the caps text)."""
    here = GPU_FIXTURES / folder

    def text(name: str) -> str | None:
        path = here / name
        return path.read_text(encoding="utf-8") if path.exists() else None

    caps = text("query-gpu-caps.out")
    if caps is not None and caps_edit is not None:
        caps = caps.replace(*caps_edit, 1)
    return gpu_info.build_facts(text("nvidia-smi-q-x.out") or "", caps, text("nvidia-smi-topo-m.out"))


def stack(version: str | None, flags: dict[str, Any] | None = None) -> dict[str, Any]:
    sglang = {"installed": version is not None, "version": version, "flags": flags}
    return {
        "schema": 1,
        "python": "/opt/bwtune/stack/bin/python",
        "fingerprint": "0123456789ab",
        "sglang": sglang,
    }


def matrix(gpu: str = "auto", version: str = "auto") -> dict[str, Any]:
    m = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text(encoding="utf-8")))
    m["hardware"]["gpu"] = gpu
    m["sglang"]["version"] = version
    return m


def error(m: dict[str, Any], facts: dict[str, Any] | None) -> MatrixError:
    with pytest.raises(MatrixError) as caught:
        planner.plan(m, facts=facts)
    assert "\n" not in str(caught.value)
    return caught.value


SGLANG_0523 = stack("0.5.23", stack_flags(get_table("0.5.23")))


@pytest.mark.parametrize(
    ("folder", "sm"),
    [
        ("h200-1gpu/raw", "sm90"),  # real capture, capability from the product name
        ("h200-2gpu/raw", "sm90"),  # real capture, capability from --query-gpu
        ("rtx-pro-6000-8gpu", "sm120"),
        ("b200-8gpu", "sm100"),
    ],
)
def test_gpu_auto_is_the_node_sm_of_each_fixture(folder: str, sm: str) -> None:
    facts = {"gpu": gpu_facts(folder), "stack": SGLANG_0523, "checkpoint": {}}
    plan = planner.plan(matrix(), facts=facts)
    assert (plan.gpu, plan.sglang_version) == (sm, "0.5.23")
    # The rules of that GPU decided: trtllm-gen MoE kernels exist on SM100 only.
    trtllm = [c for c in plan.configs if c.point["moe-runner-backend"] == "flashinfer_trtllm"]
    sm100_only = {r.rule for c in trtllm for r in c.reasons} & {"sm100-only-moe-runner"}
    assert bool(sm100_only) == (sm != "sm100")


def test_gpu_auto_without_any_gpu_is_one_line_naming_why() -> None:
    no_gpu = gpu_info.unavailable(gpu_info.NVIDIA_SMI_MISSING, "nvidia-smi not found on PATH")
    err = error(matrix(), {"gpu": no_gpu, "stack": SGLANG_0523})
    assert err.path == ("hardware", "gpu")
    assert "nvidia-smi not found on PATH" in err.message


def test_gpu_auto_on_mixed_generations_names_them() -> None:
    mixed = gpu_facts("rtx-pro-6000-8gpu", caps_edit=(", 12.0", ", 10.0"))
    assert mixed["sm"] == "mixed"
    err = error(matrix(), {"gpu": mixed, "stack": SGLANG_0523})
    assert err.path == ("hardware", "gpu") and "mixed" in err.message
    assert "sm100" in err.message and "sm120" in err.message


@pytest.mark.parametrize(("caps", "tag", "family"), [("10.3", "sm103", "sm100"), ("12.1", "sm121", "sm120")])
def test_gpu_auto_on_an_sm_the_rules_do_not_cover_names_it_and_its_family(
    caps: str, tag: str, family: str
) -> None:
    folder = "b200-8gpu" if family == "sm100" else "rtx-pro-6000-8gpu"
    # Every GPU of the node reports the new capability (B300 is 10.3, GB10 is 12.1).
    caps_text = (GPU_FIXTURES / folder / "query-gpu-caps.out").read_text(encoding="utf-8")
    facts_all = gpu_info.build_facts(
        (GPU_FIXTURES / folder / "nvidia-smi-q-x.out").read_text(encoding="utf-8"),
        caps_text.replace(", 10.0", f", {caps}").replace(", 12.0", f", {caps}"),
        None,
    )
    assert facts_all["sm"] == tag
    err = error(matrix(), {"gpu": facts_all, "stack": SGLANG_0523})
    assert tag in err.message and f"hardware.gpu: {family}" in err.message
    # Choosing the family explicitly is the user's call, and then it plans.
    assert planner.plan(matrix(gpu=family), facts={"gpu": facts_all, "stack": SGLANG_0523}).gpu == family


def test_explicit_gpu_that_is_not_the_nodes_is_refused() -> None:
    err = error(
        matrix(gpu="sm120", version="0.5.23"), {"gpu": gpu_facts("h200-2gpu/raw"), "stack": SGLANG_0523}
    )
    assert err.path == ("hardware", "gpu") and "sm90" in err.message and "H200" in err.message


def test_version_auto_on_the_h200_capture_says_sglang_is_not_installed() -> None:
    captured = json.loads((GPU_FIXTURES / "h200-2gpu" / "stack_facts.json").read_text(encoding="utf-8"))
    facts = {"gpu": gpu_facts("h200-2gpu/raw"), "stack": captured["ansible_facts"]["bwtune_stack"]}
    err = error(matrix(), facts)
    assert err.path == ("sglang", "version")
    assert "no SGLang installed" in err.message and "python3" in err.message


def test_auto_without_facts_still_says_so() -> None:
    assert "is auto but no facts give it" in error(matrix(), None).message
    assert (
        "is auto but no facts give it" in error(matrix(gpu="sm100"), {"gpu": gpu_facts("b200-8gpu")}).message
    )


def test_a_flag_the_installed_sglang_lacks_names_the_installed_version() -> None:
    flags = stack_flags(get_table("0.5.23"))
    del flags["fp4-gemm-backend"]
    facts = {"gpu": gpu_facts("rtx-pro-6000-8gpu"), "stack": stack("0.5.24", flags)}
    err = error(matrix(), facts)
    assert err.path == ("axes", "fp4-gemm-backend")
    assert err.message == (
        "SGLang 0.5.24 (installed on the node) has no flag --fp4-gemm-backend"
        " (releases that have it: 0.5.8 to 0.5.23)"
    )


def test_a_choice_the_installed_sglang_lacks_names_the_installed_version() -> None:
    flags = stack_flags(get_table("0.5.23"))
    flags["moe-runner-backend"]["choices"].remove("marlin")
    facts = {"gpu": gpu_facts("rtx-pro-6000-8gpu"), "stack": stack("0.5.23", flags)}
    err = error(matrix(), facts)
    assert err.path == ("axes", "moe-runner-backend", 3)
    assert "no choice 'marlin'" in err.message and "SGLang 0.5.23 (installed on the node)" in err.message
    # The generated catalog for the same release has it: the node's parser decided.
    assert planner.plan(matrix(gpu="sm120", version="0.5.23")).summary["combinations"] > 0


def test_a_flag_only_the_installed_sglang_has_is_accepted_and_launched() -> None:
    flags = stack_flags(get_table("0.5.23"))
    flags["moe-a2a-new-backend"] = {
        "dest": "moe_a2a_new_backend",
        "choices": ["x", "y"],
        "aliases": [],
        "takes_value": True,
    }
    flags["enable-new-thing"] = {
        "dest": "enable_new_thing",
        "choices": None,
        "aliases": [],
        "takes_value": False,
    }
    m = matrix()
    m["base"]["moe-a2a-new-backend"] = "y"
    m["base"]["enable-new-thing"] = True
    plan = planner.plan(m, facts={"gpu": gpu_facts("rtx-pro-6000-8gpu"), "stack": stack("0.5.24", flags)})
    argv = plan.valid()[0].argv
    assert argv[argv.index("--moe-a2a-new-backend") + 1] == "y" and "--enable-new-thing" in argv
    with pytest.raises(MatrixError, match=r"has no choice 'z'"):
        m["base"]["moe-a2a-new-backend"] = "z"
        planner.plan(m, facts={"gpu": gpu_facts("rtx-pro-6000-8gpu"), "stack": stack("0.5.24", flags)})


def test_rules_apply_to_an_uncatalogued_release_by_version_range() -> None:
    """0.5.10 has no generated table; its own flags (0.5.9's here) and the `<0.5.23` rules apply."""
    m = matrix()
    m["axes"] = {"speculative-moe-runner-backend": ["flashinfer_trtllm"]}
    m["exclude"], m["bundles"] = [], {}
    b200 = gpu_facts("b200-8gpu")
    old = planner.plan(m, facts={"gpu": b200, "stack": stack("0.5.10", stack_flags(get_table("0.5.9")))})
    new = planner.plan(m, facts={"gpu": b200, "stack": stack("0.5.24", stack_flags(get_table("0.5.9")))})
    assert old.sglang_version == "0.5.10"
    assert "speculative-moe-runner-trtllm" in {r.rule for r in old.configs[0].reasons}
    assert "speculative-moe-runner-trtllm" not in {r.rule for r in new.configs[0].reasons}


def test_node_parser_plans_like_the_catalog_for_the_same_flags() -> None:
    facts = {"gpu": gpu_facts("rtx-pro-6000-8gpu"), "stack": SGLANG_0523}
    with_facts = planner.plan(matrix(), facts=facts).to_dict()
    from_catalog = planner.plan(matrix(gpu="sm120", version="0.5.23")).to_dict()
    assert with_facts == from_catalog


def test_an_installed_release_without_flags_or_table_says_what_to_gather() -> None:
    facts = {"gpu": gpu_facts("rtx-pro-6000-8gpu"), "stack": stack("0.5.24", None)}
    err = error(matrix(), facts)
    assert "0.5.24" in err.message and "include_flags" in err.message
    # Without flags, a catalogued release is checked against its generated table.
    m = matrix()
    m["axes"], m["bundles"], m["exclude"] = {"moe-runner-backend": ["flashinfer_cutlass"]}, {}, []
    plan = planner.plan(m, facts={"gpu": gpu_facts("rtx-pro-6000-8gpu"), "stack": stack("0.5.9", None)})
    assert plan.sglang_version == "0.5.9"


def test_explicit_version_that_is_not_the_installed_one_is_refused() -> None:
    err = error(
        matrix(gpu="sm120", version="0.5.9"), {"gpu": gpu_facts("rtx-pro-6000-8gpu"), "stack": SGLANG_0523}
    )
    assert err.path == ("sglang", "version")
    assert "0.5.9" in err.message and "0.5.23 installed" in err.message


def test_checkpoint_facts_give_architecture_and_quantization() -> None:
    m = matrix(gpu="sm120", version="0.5.23")
    del m["model"]["architecture"], m["model"]["quantization"]
    m["base"].pop("quantization")
    m["axes"] = {"moe-runner-backend": ["auto"]}
    m["exclude"], m["bundles"] = [], {}
    checkpoint = {
        "available": True,
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "quantization": {"sglang_quantization": "modelopt_fp4", "quant_algo": "NVFP4"},
    }
    parsed = planner.matrix_mod.parse(m, get_table)
    info = planner.model_info(parsed, {"checkpoint": checkpoint})
    assert (info.architecture, info.quantization) == ("Qwen3_5MoeForConditionalGeneration", "modelopt_fp4")
    assert info.hybrid
    # Facts of a checkpoint that is not there say nothing; the matrix's own keys win.
    assert planner.model_info(parsed, {"checkpoint": {"available": False}}).architecture is None
    m["model"]["architecture"] = "Qwen3MoeForCausalLM"
    info = planner.model_info(planner.matrix_mod.parse(m, get_table), {"checkpoint": checkpoint})
    assert info.architecture == "Qwen3MoeForCausalLM"
