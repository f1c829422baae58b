#!/usr/bin/env bash
# Build build/bench-serving/: a venv where `python -m sglang.bench_serving` runs on a CPU
# machine, so tests can point SGLang's own benchmark client at the stand-in.
# Idempotent: a stamp records what was installed; a second run with the same pins is a no-op.
#
# Why these pins: bench_serving imports transformers and torchvision; PyPI's torchvision
# does not load beside the CPU torch 2.13.0 wheel, torch 2.14.1 + torchvision 0.29.1 does
# (docs/standin.md, notes/sglang.md "SGLang on a CPU machine"). sglang itself goes in
# with --no-deps: its full dependency set is GPU-only; bench_serving needs only the list below.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${BWTUNE_BENCH_VENV:-$ROOT/build/bench-serving}"
PYTHON="${PYTHON:-python3.11}"

PINS=(
  "torch==2.14.1"
  "torchvision==0.29.1"
  "transformers==5.19.0"   # the versions sglang 0.5.23 declares
  "tokenizers==0.23.2"
  "numpy"
  "aiohttp"
  "requests"
  "tqdm"
  "pillow"
  "pybase64"
  "orjson"
  "packaging"
  "psutil"
  "pydantic"
  "msgspec"
  "pyzmq"
  "huggingface_hub"
  "starlette"
  "IPython"
  "datasets"
  # imported by sglang.bench_serving through sglang.srt on 0.5.23
  "apache-tvm-ffi"
  "sentencepiece"
  "compressed-tensors"
  "gguf"
)
SGLANG_PIN="sglang==0.5.23"
STAMP_TEXT="$(printf '%s\n' "${PINS[@]}" "$SGLANG_PIN")"
STAMP="$VENV/.bwtune-bench-stamp"

# One builder at a time (pytest workers may call this together); the others wait, then
# find the stamp.
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9

if [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$STAMP_TEXT" ]] && [[ -x "$VENV/bin/python" ]]; then
  exit 0
fi

# Reuse an existing venv: pip skips what is already satisfied.
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q "${PINS[@]}"
"$VENV/bin/pip" install -q --no-deps "$SGLANG_PIN"
# Fail here, not in a test, if the client cannot start.
HF_HUB_OFFLINE=1 "$VENV/bin/python" -c "import sglang.bench_serving" >/dev/null
printf '%s' "$STAMP_TEXT" >"$STAMP"
