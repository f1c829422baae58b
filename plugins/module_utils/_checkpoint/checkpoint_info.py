# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Checkpoint facts: what a Hugging Face model directory holds and whether it is whole.

Reads config.json, hf_quant_config.json, model.safetensors.index.json and the JSON header
of each safetensors shard (never the tensor data), so a 200 GB checkpoint is checked in
well under a second. Layout: docs/facts.md. Where the checkpoint role fetched it, the
source's manifest (checkpoint_download.MANIFEST) adds each file's size and sha256; a file is
hashed only when it changed since it was last verified.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import struct
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._checkpoint import checkpoint_download

SCHEMA = 1
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
MAX_HEADER = 100 * 1024 * 1024  # safetensors refuses headers above 100 MB too

# ModelOpt quant_algo -> SGLang --quantization
QUANTIZATION_FLAG = {"NVFP4": "modelopt_fp4", "FP8": "modelopt_fp8", "MIXED_PRECISION": "modelopt_mixed"}


class CheckpointError(ValueError):
    """A checkpoint directory that cannot be read at all."""


def _load_json(path: str, problems: list[str]) -> dict | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        problems.append(f"{os.path.basename(path)}: not valid JSON ({exc})")
        return None
    if not isinstance(data, dict):
        problems.append(f"{os.path.basename(path)}: top level is {type(data).__name__}, not an object")
        return None
    return data


def read_safetensors_header(path: str) -> dict:
    """The JSON header of a safetensors file. Raises CheckpointError on a bad header."""
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise CheckpointError("shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            raise CheckpointError(f"header length {n} is implausible")
        raw = fh.read(n)
    if len(raw) < n:
        raise CheckpointError(f"truncated inside its header ({len(raw)} of {n} bytes)")
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise CheckpointError(f"header is not JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise CheckpointError("header is not a JSON object")
    header["__header_bytes__"] = 8 + n
    return header


def check_shard(path: str) -> dict[str, Any]:
    """{file, bytes, expected_bytes, tensors: set, problem: str|None} for one shard."""
    name = os.path.basename(path)
    try:
        size = os.path.getsize(path)
    except OSError:
        return {"file": name, "bytes": 0, "expected_bytes": None, "tensors": set(), "problem": "missing"}
    try:
        header = read_safetensors_header(path)
    except (CheckpointError, OSError) as exc:
        return {"file": name, "bytes": size, "expected_bytes": None, "tensors": set(), "problem": str(exc)}
    data_end = 0
    tensors = set()
    for key, spec in header.items():
        if key.startswith("__") or key == "__metadata__" or not isinstance(spec, dict):
            continue
        tensors.add(key)
        offsets = spec.get("data_offsets") or [0, 0]
        data_end = max(data_end, int(offsets[1]))
    expected = header["__header_bytes__"] + data_end
    problem = None
    if size < expected:
        problem = f"truncated: {size} bytes, header says {expected}"
    return {"file": name, "bytes": size, "expected_bytes": expected, "tensors": tensors, "problem": problem}


def _text_config(config: dict) -> dict:
    text = config.get("text_config") or config.get("llm_config") or config
    return text if isinstance(text, dict) else config


def _first(d: dict, *keys: str):
    for k in keys:
        if d.get(k) is not None:
            return d[k]
    return None


def summarize_text(config: dict) -> dict:
    text = _text_config(config)
    layer_types = text.get("layer_types") or []
    counts: dict[str, int] = {}
    for t in layer_types:
        counts[str(t)] = counts.get(str(t), 0) + 1
    return {
        "model_type": text.get("model_type"),
        "num_hidden_layers": text.get("num_hidden_layers"),
        "hidden_size": text.get("hidden_size"),
        "num_attention_heads": text.get("num_attention_heads"),
        "num_key_value_heads": text.get("num_key_value_heads"),
        "num_experts": _first(text, "num_experts", "n_routed_experts", "num_local_experts"),
        "num_experts_per_tok": text.get("num_experts_per_tok"),
        "moe_intermediate_size": text.get("moe_intermediate_size"),
        "max_position_embeddings": text.get("max_position_embeddings"),
        "full_attention_interval": text.get("full_attention_interval"),
        "layer_types": counts,
        "hybrid_attention": len(counts) > 1 and "linear_attention" in counts,
    }


def mtp_layers(config: dict) -> int:
    text = _text_config(config)
    n = _first(text, "mtp_num_hidden_layers", "num_nextn_predict_layers")
    return int(n) if isinstance(n, int) else 0


def is_mtp_tensor(name: str, num_hidden_layers: int | None) -> bool:
    """Qwen3.5 puts MTP under `mtp.`; DeepSeek-style checkpoints append layers past the last."""
    if name.startswith("mtp.") or ".mtp." in name:
        return True
    if num_hidden_layers:
        m = re.match(r"^(?:model\.)?(?:language_model\.)?(?:model\.)?layers\.(\d+)\.", name)
        if m and int(m.group(1)) >= num_hidden_layers:
            return True
    return False


def quantization(config: dict, hf_quant: dict | None) -> dict | None:
    """ModelOpt (or other) quantization from config.json, else hf_quant_config.json."""
    qc = config.get("quantization_config")
    source = "config.json"
    if not isinstance(qc, dict) and hf_quant:
        qc = dict(hf_quant.get("quantization") or {})
        qc.setdefault("quant_method", (hf_quant.get("producer") or {}).get("name"))
        source = "hf_quant_config.json"
    if not isinstance(qc, dict):
        return None
    algo = qc.get("quant_algo")
    method = qc.get("quant_method")
    excluded = qc.get("exclude_modules") or qc.get("ignore") or []
    return {
        "source": source,
        "method": method,
        "quant_algo": algo,
        "group_size": qc.get("group_size"),
        "kv_cache_quant_algo": qc.get("kv_cache_quant_algo"),
        "exclude_modules": list(excluded),
        "sglang_quantization": QUANTIZATION_FLAG.get(str(algo)) if method in ("modelopt", None) else None,
    }


def excluded(module: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(module, p) or fnmatch.fnmatchcase(module, p + ".*") for p in patterns)


def gather(path: str, check_shards: bool = True) -> dict:
    """The bwtune_checkpoint facts of a model directory."""
    problems: list[str] = []
    if not os.path.isdir(path):
        return {
            "schema": SCHEMA,
            "path": path,
            "available": False,
            "complete": False,
            "problems": [f"{path}: not a directory"],
        }
    config = _load_json(os.path.join(path, "config.json"), problems)
    if config is None and not problems:
        problems.append("config.json: missing")
    hf_quant = _load_json(os.path.join(path, "hf_quant_config.json"), problems)
    index = _load_json(os.path.join(path, INDEX), problems)

    weight_map: dict[str, str] = {}
    index_total = None
    if index is not None:
        wm = index.get("weight_map")
        if isinstance(wm, dict):
            weight_map = {str(k): str(v) for k, v in wm.items()}
        else:
            problems.append(f"{INDEX}: no weight_map object")
        index_total = (index.get("metadata") or {}).get("total_size")
        shard_files = sorted(set(weight_map.values()))
    elif os.path.exists(os.path.join(path, SINGLE)):
        shard_files = [SINGLE]
    else:
        shard_files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
        if not shard_files and not any(p.startswith(INDEX) for p in problems):
            problems.append("no safetensors weights (no index, no model.safetensors)")

    shards: list[dict[str, Any]] = []
    missing, truncated, corrupt = [], [], []
    for fn in shard_files:
        full = os.path.join(path, fn)
        if not check_shards:
            exists = os.path.isfile(full)
            shards.append(
                {
                    "file": fn,
                    "bytes": os.path.getsize(full) if exists else 0,
                    "expected_bytes": None,
                    "tensors": set(),
                    "problem": None if exists else "missing",
                }
            )
        else:
            shards.append(check_shard(full))
    for s in shards:
        if s["problem"] == "missing":
            missing.append(s["file"])
        elif s["problem"] and s["problem"].startswith("truncated"):
            truncated.append(s["file"])
        elif s["problem"]:
            corrupt.append(s["file"])
        if s["problem"]:
            problems.append(f"{s['file']}: {s['problem']}")
    absent_tensors = []
    if check_shards and weight_map:
        by_file = {s["file"]: s for s in shards}
        for tensor, fn in weight_map.items():
            shard = by_file.get(fn)
            if shard and not shard["problem"] and tensor not in shard["tensors"]:
                absent_tensors.append(tensor)
        if absent_tensors:
            problems.append(
                f"{len(absent_tensors)} tensors of the index are not in their shard, e.g. {absent_tensors[0]}"
            )

    source_check = check_source_manifest(path) if check_shards else None
    if source_check:
        problems.extend(source_check.pop("problems"))

    text = summarize_text(config or {})
    n_mtp = mtp_layers(config or {})
    mtp_tensors = sorted(t for t in weight_map if is_mtp_tensor(t, text["num_hidden_layers"]))
    quant = quantization(config or {}, hf_quant)
    mtp_excluded = None
    if quant is not None and n_mtp:
        sample = mtp_tensors[0].rsplit(".", 1)[0] if mtp_tensors else "mtp.layers.0.mlp.experts.0.gate_proj"
        mtp_excluded = excluded(sample, quant["exclude_modules"])
        quant["mtp_excluded"] = mtp_excluded
        quant["mtp_dtype"] = "bf16" if mtp_excluded else quant["quant_algo"]

    implied: dict[str, object] = {}
    if quant and quant.get("sglang_quantization"):
        implied["quantization"] = quant["sglang_quantization"]
    speculative = []
    if n_mtp and (mtp_tensors or not weight_map):
        speculative = ["NEXTN", "EAGLE"]
    total = sum(s["bytes"] for s in shards)
    complete = config is not None and not problems
    return {
        "schema": SCHEMA,
        "path": path,
        "available": config is not None,
        "complete": complete,
        "problems": problems,
        "architectures": (config or {}).get("architectures") or [],
        "model_type": (config or {}).get("model_type"),
        "text": text,
        "mtp_num_hidden_layers": n_mtp,
        "mtp_tensors": len(mtp_tensors),
        "quantization": quant,
        "shards": {
            "count": len(shard_files),
            "missing": missing,
            "truncated": truncated,
            "corrupt": corrupt,
            "tensors_not_in_shard": len(absent_tensors),
        },
        "tensors": len(weight_map),
        "total_bytes": total,
        "index_total_size": index_total,
        "implied_flags": implied,
        "speculative_algorithms": speculative,
        "source": source_check,
    }


def check_source_manifest(path: str) -> dict | None:
    """What the checkpoint's source promised (checkpoint_download.MANIFEST): every file present, its
    size, and its sha256 where the source gives one (hashed only if changed since last verified)."""
    manifest = checkpoint_download.read_manifest(path)
    if manifest is None:
        return None
    verified = manifest.get("verified") or {}
    problems, _stamps, hashed = checkpoint_download.check_files(path, manifest["files"], verified)
    return {
        "source": manifest.get("source"),
        "commit": manifest.get("commit"),
        "files": len(manifest["files"]),
        "hashed": hashed,
        "problems": problems,
    }
