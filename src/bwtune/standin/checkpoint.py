"""The model directory, read the way SGLang reads it before loading weights: config.json
(architecture, MTP layers, context length), hf_quant_config.json (ModelOpt quantization),
generation_config.json (end-of-sequence ids). Weights are never read (there are none)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class CheckpointError(ValueError):
    """The model directory cannot be served; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    architecture: str
    model_type: str
    mtp_layers: int
    quantization: str | None  # SGLang's name: modelopt_fp4, modelopt_fp8, fp8, ...
    context_length: int | None
    eos_token_ids: list[int]


# ModelOpt's quant_algo -> SGLang's --quantization name (srt/configs/model_config.py).
_MODELOPT = {"NVFP4": "modelopt_fp4", "FP8": "modelopt_fp8", "MIXED_PRECISION": "modelopt_mixed"}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_checkpoint(model_path: str) -> Checkpoint:
    root = Path(model_path)
    if not root.is_dir():
        raise CheckpointError(
            f"{model_path}: model path is not a directory (the stand-in serves local checkpoints only)"
        )
    config_path = root / "config.json"
    if not config_path.is_file():
        raise CheckpointError(f"{config_path}: missing (a checkpoint directory needs config.json)")
    config = _read_json(config_path)
    architectures = config.get("architectures")
    if not isinstance(architectures, list) or not architectures or not isinstance(architectures[0], str):
        raise CheckpointError(f"{config_path}: 'architectures' must be a non-empty list of names")
    raw_text = config.get("text_config")
    text: dict[str, Any] = raw_text if isinstance(raw_text, dict) else {}
    mtp = text.get(
        "mtp_num_hidden_layers",
        config.get("mtp_num_hidden_layers", config.get("num_nextn_predict_layers", 0)),
    )
    context = text.get("max_position_embeddings", config.get("max_position_embeddings"))
    quantization = _quantization(root, config)
    eos: list[int] = []
    gen_path = root / "generation_config.json"
    if gen_path.is_file():
        raw = _read_json(gen_path).get("eos_token_id")
        eos = [raw] if isinstance(raw, int) else [x for x in raw or [] if isinstance(x, int)]
    return Checkpoint(
        path=root,
        architecture=architectures[0],
        model_type=str(config.get("model_type", "")),
        mtp_layers=int(mtp or 0),
        quantization=quantization,
        context_length=int(context) if isinstance(context, int) else None,
        eos_token_ids=eos,
    )


def _quantization(root: Path, config: dict[str, Any]) -> str | None:
    hf_quant = root / "hf_quant_config.json"
    if hf_quant.is_file():
        data = _read_json(hf_quant)
        algo = (data.get("quantization") or {}).get("quant_algo")
        if algo not in _MODELOPT:
            raise CheckpointError(f"{hf_quant}: quantization.quant_algo {algo!r} is not one SGLang knows")
        return _MODELOPT[algo]
    qc = config.get("quantization_config")
    if isinstance(qc, dict):
        method = qc.get("quant_method")
        if method == "modelopt":
            return _MODELOPT.get(str(qc.get("quant_algo")), "modelopt")
        return str(method) if method else None
    return None
