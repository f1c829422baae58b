"""gpu_info: parsing of real (H200) and documented-format (RTX PRO 6000, B200) nvidia-smi output."""

from __future__ import annotations

import json

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import gpu_info

from .helpers import GPU_FIXTURES, GPU_SETS, read


def facts_for(name: str) -> dict:
    d = GPU_SETS[name]
    caps = d / "query-gpu-caps.out"
    return gpu_info.build_facts(
        read(d / "nvidia-smi-q-x.out"),
        read(caps) if caps.exists() else None,
        read(d / "nvidia-smi-topo-m.out"),
    )


def test_h200_real_capture_two_gpus_nvlink():
    f = facts_for("h200-2gpu")
    assert f["available"] and f["reason"] is None
    assert f["driver_version"] == "580.159.04" and f["cuda_version"] == "13.0"
    assert f["count"] == 2 and f["sm"] == "sm90" and f["compute_capability"] == "9.0"
    assert f["fp4_native"] is False
    assert f["interconnect"] == "nvlink" and f["pcie_only"] is False and f["min_nvlinks"] == 18
    g = f["gpus"][1]
    assert g["index"] == 1 and g["name"] == "NVIDIA H200"
    assert g["uuid"] == "GPU-e1d53521-9042-c817-e170-4a7a8e83dc5f"
    assert g["compute_capability_source"] == "nvidia-smi"
    assert g["memory_total_mib"] == 143771 and g["power_limit_w"] == 700.0
    assert (g["pcie_gen_max"], g["pcie_width_max"]) == (5, 16)
    assert f["warnings"] == []
    assert gpu_info.node_sm(f) == "sm90"


def test_h200_one_gpu_without_compute_cap_query_falls_back_to_name():
    f = facts_for("h200-1gpu")
    assert f["count"] == 1 and f["sm"] == "sm90" and f["interconnect"] == "none"
    assert f["gpus"][0]["compute_capability_source"] == "product-name"
    assert any("guessed from its name" in w for w in f["warnings"])


def test_h200_processes_holding_memory_are_listed():
    xml = read(GPU_FIXTURES / "h200-1gpu" / "raw" / "nvidia-smi-q-x-held-term1.out")
    g = gpu_info.build_facts(xml)["gpus"][0]
    assert g["memory_used_mib"] == 10859
    assert g["processes"] == [
        {"pid": 437, "type": "C", "name": "/opt/torch/.venv/bin/python3", "used_memory_mib": 10850}
    ]


def test_rtx_pro_6000_is_sm120_pcie_only():
    f = facts_for("rtx-pro-6000-8gpu")
    assert f["count"] == 8 and f["sm"] == "sm120" and f["fp4_native"] is True
    assert f["interconnect"] == "pcie" and f["pcie_only"] is True and f["nvlink_pairs"] == 0
    assert {g["memory_total_mib"] for g in f["gpus"]} == {97887}
    assert [g["index"] for g in f["gpus"]] == list(range(8))
    assert f["topology"]["links"]["GPU0"]["GPU4"] == "SYS"
    assert f["topology"]["numa_affinity"]["GPU7"] == "1"
    assert gpu_info.node_sm(f) == "sm120"


def test_b200_is_sm100_nvlink():
    f = facts_for("b200-8gpu")
    assert f["count"] == 8 and f["sm"] == "sm100" and f["fp4_native"] is True
    assert f["interconnect"] == "nvlink" and f["nvlink_pairs"] == 28 and f["min_nvlinks"] == 18
    assert f["gpus"][3]["power_limit_w"] == 1000.0


def test_device_module_result_matches_local_parse():
    """The facts computed on the H200 machine equal what this machine computes from its raw output."""
    recorded = json.loads(read(GPU_FIXTURES / "h200-2gpu" / "gpu_facts.json"))["ansible_facts"]["bwtune_gpu"]
    local = facts_for("h200-2gpu")
    assert recorded == json.loads(json.dumps(local))


@pytest.mark.parametrize(
    ("rc", "out", "reason"),
    [
        (
            9,
            "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n",
            gpu_info.NVML_INIT_FAILED,
        ),
        (
            9,
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n",
            gpu_info.DRIVER_NOT_LOADED,
        ),
        (6, "No devices were found\n", gpu_info.NO_GPUS),
        (3, "Unknown Error\n", gpu_info.NVIDIA_SMI_FAILED),
    ],
)
def test_failed_nvidia_smi_gives_reason_not_crash(rc, out, reason):
    calls = []

    def run(argv):
        calls.append(argv)
        return rc, out, ""

    f = gpu_info.gather(run, "/usr/bin/nvidia-smi")
    assert f["available"] is False and f["reason"] == reason and f["count"] == 0
    assert f["message"]
    assert calls == [["/usr/bin/nvidia-smi", "-q", "-x"]]
    with pytest.raises(ValueError, match="none usable"):
        gpu_info.node_sm(f)


def test_missing_nvidia_smi():
    f = gpu_info.gather(lambda argv: (0, "", ""), None)
    assert f["reason"] == gpu_info.NVIDIA_SMI_MISSING and "not found" in f["message"]


def test_zero_gpus_in_xml():
    xml = (
        '<?xml version="1.0" ?><nvidia_smi_log><driver_version>580.159.04</driver_version>'
        "<cuda_version>13.0</cuda_version><attached_gpus>0</attached_gpus></nvidia_smi_log>"
    )
    f = gpu_info.build_facts(xml)
    assert f["available"] is False and f["reason"] == gpu_info.NO_GPUS
    assert f["driver_version"] == "580.159.04" and "attached_gpus is 0" in f["message"]


def test_garbage_xml_is_a_parse_error():
    f = gpu_info.build_facts("<nvidia_smi_log><gpu>")
    assert f["available"] is False and f["reason"] == gpu_info.PARSE_ERROR


def test_mixed_generations_are_reported_and_refused_by_node_sm():
    d = GPU_SETS["rtx-pro-6000-8gpu"]
    caps = read(d / "query-gpu-caps.out").splitlines()
    caps[7] = caps[7].rsplit(",", 1)[0] + ", 10.0"
    f = gpu_info.build_facts(
        read(d / "nvidia-smi-q-x.out"), "\n".join(caps), read(d / "nvidia-smi-topo-m.out")
    )
    assert f["sm"] == "mixed" and f["sms"] == ["sm100", "sm120"] and f["compute_capability"] is None
    with pytest.raises(ValueError, match="mixed GPU generations"):
        gpu_info.node_sm(f)


def test_partial_nvlink():
    topo = "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV4\tSYS\nGPU1\tNV4\t X \tSYS\nGPU2\tSYS\tSYS\t X \n"
    link = gpu_info.interconnect(gpu_info.parse_topo_matrix(topo), 3)
    assert link["kind"] == "partial-nvlink" and link["nvlink_pairs"] == 1 and link["pcie_only"] is False


@pytest.mark.parametrize(
    ("cap", "tag"), [("9.0", "sm90"), ("10.0", "sm100"), ("12.0", "sm120"), ("10.3", "sm103"), ("x", None)]
)
def test_sm_tag(cap, tag):
    assert gpu_info.sm_tag(cap) == tag
