"""checkpoint_info: generated checkpoint directories, whole and broken."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._checkpoint import checkpoint_info

from .helpers import ROOT

QWEN = ROOT / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"


def write_shard(path: Path, tensors: dict[str, int]) -> int:
    """A safetensors file with uint8 tensors of the given byte sizes; returns its size."""
    header, offset = {}, 0
    for name, n in tensors.items():
        header[name] = {"dtype": "U8", "shape": [n], "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    return path.stat().st_size


@pytest.fixture
def ckpt(tmp_path) -> Path:
    d = tmp_path / "qwen35"
    d.mkdir()
    shutil.copy(QWEN / "config.json", d / "config.json")
    shutil.copy(QWEN / "hf_quant_config.json", d / "hf_quant_config.json")
    shards = {
        "model-00001-of-00002.safetensors": {
            "model.language_model.layers.0.mlp.experts.0.gate_proj.weight": 64,
            "model.language_model.layers.0.mlp.experts.0.gate_proj.weight_scale": 8,
        },
        "model-00002-of-00002.safetensors": {
            "mtp.layers.0.mlp.experts.0.gate_proj.weight": 128,
            "mtp.fc.weight": 32,
            "lm_head.weight": 16,
        },
    }
    weight_map, total = {}, 0
    for fn, tensors in shards.items():
        write_shard(d / fn, tensors)
        total += sum(tensors.values())
        weight_map.update(dict.fromkeys(tensors, fn))
    (d / checkpoint_info.INDEX).write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    return d


def test_whole_qwen35_nvfp4(ckpt):
    f = checkpoint_info.gather(str(ckpt))
    assert f["available"] and f["complete"] and f["problems"] == []
    assert f["architectures"] == ["Qwen3_5MoeForConditionalGeneration"]
    t = f["text"]
    assert (t["num_hidden_layers"], t["num_experts"], t["hidden_size"]) == (60, 512, 4096)
    assert t["layer_types"] == {"linear_attention": 45, "full_attention": 15} and t["hybrid_attention"]
    assert f["mtp_num_hidden_layers"] == 1 and f["mtp_tensors"] == 2
    q = f["quantization"]
    assert (q["quant_algo"], q["group_size"], q["kv_cache_quant_algo"]) == ("NVFP4", 16, None)
    assert q["mtp_excluded"] is True and q["mtp_dtype"] == "bf16"
    assert f["implied_flags"] == {"quantization": "modelopt_fp4"}
    assert f["speculative_algorithms"] == ["NEXTN", "EAGLE"]
    assert f["shards"]["count"] == 2 and f["tensors"] == 5
    assert f["total_bytes"] == sum(p.stat().st_size for p in ckpt.glob("*.safetensors"))


def test_missing_shard(ckpt):
    (ckpt / "model-00002-of-00002.safetensors").unlink()
    f = checkpoint_info.gather(str(ckpt))
    assert not f["complete"] and f["shards"]["missing"] == ["model-00002-of-00002.safetensors"]
    assert f["problems"] == ["model-00002-of-00002.safetensors: missing"]


def test_truncated_shard(ckpt):
    p = ckpt / "model-00001-of-00002.safetensors"
    p.write_bytes(p.read_bytes()[:-10])
    f = checkpoint_info.gather(str(ckpt))
    assert f["shards"]["truncated"] == [p.name] and not f["complete"]
    assert "header says" in f["problems"][0]
    # Without reading headers, only existence is checked.
    assert checkpoint_info.gather(str(ckpt), check_shards=False)["complete"] is True


def test_shard_cut_inside_its_header(ckpt):
    p = ckpt / "model-00001-of-00002.safetensors"
    p.write_bytes(p.read_bytes()[:20])
    f = checkpoint_info.gather(str(ckpt))
    assert f["shards"]["truncated"] == [p.name] and "truncated inside its header" in f["problems"][0]


def test_bad_json_config(ckpt):
    (ckpt / "config.json").write_text("{not json")
    f = checkpoint_info.gather(str(ckpt))
    assert not f["available"] and not f["complete"]
    assert f["problems"][0].startswith("config.json: not valid JSON")


def test_tensor_missing_from_its_shard(ckpt):
    index = json.loads((ckpt / checkpoint_info.INDEX).read_text())
    index["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors"
    (ckpt / checkpoint_info.INDEX).write_text(json.dumps(index))
    f = checkpoint_info.gather(str(ckpt))
    assert f["shards"]["tensors_not_in_shard"] == 1 and "model.norm.weight" in f["problems"][0]


def test_quantization_from_hf_quant_config_only(ckpt):
    config = json.loads((ckpt / "config.json").read_text())
    del config["quantization_config"]
    (ckpt / "config.json").write_text(json.dumps(config))
    q = checkpoint_info.gather(str(ckpt))["quantization"]
    assert q["source"] == "hf_quant_config.json" and q["sglang_quantization"] == "modelopt_fp4"
    assert q["mtp_excluded"] is True


def test_not_a_directory(tmp_path):
    f = checkpoint_info.gather(str(tmp_path / "nope"))
    assert f["available"] is False and "not a directory" in f["problems"][0]


def test_corrupt_header(ckpt):
    p = ckpt / "model-00001-of-00002.safetensors"
    p.write_bytes(struct.pack("<Q", 5) + b"{oops" + b"\0" * 10)
    f = checkpoint_info.gather(str(ckpt))
    assert f["shards"]["corrupt"] == [p.name] and "header is not JSON" in f["problems"][0]
