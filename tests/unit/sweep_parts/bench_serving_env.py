"""SGLang's own benchmark client, `python -m sglang.bench_serving`, for comparisons with ours.

The venv is tests/standin/make_bench_venv.sh's (build/bench-serving: sglang 0.5.23, CPU torch
2.14.1, torchvision 0.29.1; idempotent, minutes the first time). bench_serving also wants a
tokenizer directory; a small byte-level BPE is made next to the venv on first use.
Used by test_agreement_bench_serving.py and benchmarks/bench_client_overhead.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.build_lock import build_lock

REPO = Path(__file__).resolve().parents[3]
BENCH_VENV = REPO / "build" / "bench-serving"
BENCH_PYTHON = BENCH_VENV / "bin" / "python"
TOKENIZER = BENCH_VENV / "tokenizer"

_MAKE_TOKENIZER = """
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=32000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              special_tokens=["<s>", "</s>"])
tok.train_from_iterator((f"tok{i} word{i % 977} x{i % 31}" for i in range(40000)), trainer)
PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>").save_pretrained(sys.argv[1])
"""

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def ensure_bench_serving() -> Path:
    """Build (or find) the venv and the tokenizer; returns the venv's python."""
    subprocess.run(["bash", str(REPO / "tests" / "standin" / "make_bench_venv.sh")], check=True, timeout=3600)
    with build_lock(BENCH_VENV / ".tokenizer.lock"):  # another pytest worker may be making it
        if not (TOKENIZER / "tokenizer.json").exists():
            # Write to a temporary directory, then rename: a killed run leaves no half tokenizer.
            tmp = Path(tempfile.mkdtemp(dir=BENCH_VENV, prefix=".tokenizer-"))
            env = {**os.environ, **OFFLINE}
            make = [str(BENCH_PYTHON), "-c", _MAKE_TOKENIZER, str(tmp)]
            subprocess.run(make, check=True, env=env, timeout=600)
            tmp.rename(TOKENIZER)
    return BENCH_PYTHON


def bench_serving_argv(
    url: str, *, input_len: int, output_len: int, num_prompts: int, concurrency: int, output_file: Path
) -> list[str]:
    """The same workload as our client's: `input_len` token ids per prompt (--tokenize-prompt
    sends input_ids, as ours does, instead of decoded text that a server re-tokenizes to
    another length), exactly `output_len` tokens out, closed loop at `concurrency`, one
    warmup request, native /generate streaming."""
    return [
        str(BENCH_PYTHON), "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", url,
        "--dataset-name", "random-ids", "--tokenize-prompt", "--tokenizer", str(TOKENIZER),
        "--random-input-len", str(input_len), "--random-output-len", str(output_len),
        "--random-range-ratio", "1", "--num-prompts", str(num_prompts),
        "--max-concurrency", str(concurrency), "--request-rate", "inf",
        "--warmup-requests", "1", "--disable-tqdm", "--seed", "1", "--output-file", str(output_file),
    ]  # fmt: skip


def run_bench_serving(url: str, **workload: Any) -> dict[str, Any]:
    """Run bench_serving once; its result line (metric names as in our results file)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.jsonl"
        argv = bench_serving_argv(url, output_file=out, **workload)
        run = subprocess.run(
            argv, env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=600, check=False
        )
        if run.returncode != 0:
            raise RuntimeError(f"sglang.bench_serving exited {run.returncode}:\n{run.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(out.read_text().strip().splitlines()[-1])
        return result
