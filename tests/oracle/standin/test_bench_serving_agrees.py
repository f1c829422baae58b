"""SGLang's own client, `python -m sglang.bench_serving --backend sglang`, runs against the
stand-in, and its output throughput is what the profile predicts within the profile's noise.

Needs build/bench-serving (tests/standin/make_bench_venv.sh: torch 2.14.1 + torchvision 0.29.1
+ sglang 0.5.23, a few minutes the first time, then cached).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bwtune.standin.batch import predict_output_throughput
from bwtune.standin.performance import ConfigPerformance
from bwtune.standin.profile import load_profile

REPO = Path(__file__).resolve().parents[3]
MAKE_VENV = REPO / "tests" / "standin" / "make_bench_venv.sh"
BENCH_PY = REPO / "build" / "bench-serving" / "bin" / "python"

# A byte-level BPE small enough to train in a second; bench_serving only needs a vocabulary
# to draw random ids from and to decode them.
MAKE_TOKENIZER = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
from transformers import PreTrainedTokenizerFast
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
text = ["the stand-in streams simulated tokens to sglang bench serving"] * 200
tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"]))
PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(sys.argv[1])
"""

INPUT_LEN, OUTPUT_LEN, PROMPTS, CONCURRENCY = 64, 160, 48, 8


@pytest.fixture(scope="module")
def bench_python() -> Path:
    subprocess.run(["bash", str(MAKE_VENV)], check=True, timeout=1800, capture_output=True)
    return BENCH_PY


# oracle: needs real SGLang (its bench_serving) in build/bench-serving.
@pytest.mark.oracle
@pytest.mark.slow
def test_bench_serving_output_throughput_matches_profile(bench_python, healthy, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    tokenizer = tmp_path / "tokenizer"
    subprocess.run(
        [str(bench_python), "-c", MAKE_TOKENIZER, str(tokenizer)], check=True, env=env, timeout=300
    )
    server = healthy()
    out = tmp_path / "bench.jsonl"
    argv = [
        str(bench_python), "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", server.url,
        "--model", "standin", "--tokenizer", str(tokenizer), "--dataset-name", "random-ids",
        "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN),
        "--random-range-ratio", "1",
        "--num-prompts", str(PROMPTS), "--max-concurrency", str(CONCURRENCY), "--request-rate", "inf",
        "--output-file", str(out), "--seed", "1",
    ]  # fmt: skip
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text().splitlines()[-1])
    assert result["completed"] == PROMPTS
    assert result["total_output_tokens"] == PROMPTS * OUTPUT_LEN

    profile = load_profile()
    flags = {"quantization": "modelopt_fp4", "moe-runner-backend": "flashinfer_cutlass",
             "fp4-gemm-backend": "flashinfer_cudnn", "tp-size": 8}  # fmt: skip
    perf = ConfigPerformance.for_flags(profile, flags)
    predicted = predict_output_throughput(perf, CONCURRENCY, INPUT_LEN, OUTPUT_LEN, PROMPTS)
    measured = result["output_throughput"]
    # Within the profile's launch-to-launch noise (3 sigma) plus the client's own ~2% shortfall
    # (notes: bench_serving reports 98-99% of the ideal).
    tolerance = 3 * profile.cv + 0.03
    assert abs(measured / predicted - 1) <= tolerance, (measured, predicted)
    info = json.loads(server.get("/server_info")[1])
    # The launch's own speed factor explains the rest: without it the error is the client's only.
    factor = info["standin"]["launch_speed_factor"]
    assert abs(measured * factor / predicted - 1) <= 0.03, (measured, predicted, factor)
