#!/usr/bin/env bash
# Make (once) a CPU-only virtual environment holding a real SGLang release, so tests
# and the flag-catalog generator can run SGLang's own argument parsing and checks.
#
#   tests/oracle/make_venv.sh 0.5.23      -> build/oracle/sglang-0.5.23/bin/python
#
# Idempotent: a stamp file records what was installed; a second run with the same
# inputs does nothing. Only the packages that SGLang's argument processing imports are
# installed (sglang itself with --no-deps); sgl_kernel (a CUDA extension) and
# torchvision (PyPI's wheel does not load beside the CPU torch), which are imported
# there but never called, are replaced by a stub package (import_stub.py).
set -euo pipefail

version="${1:?usage: make_venv.sh SGLANG_VERSION}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$root/build/oracle/sglang-$version"
python="${ORACLE_BASE_PYTHON:-python3.11}"

# Versions each SGLang release pins in its wheel metadata (0.5.9 leaves
# compressed-tensors open: 0.13.0 was current when it came out).
case "$version" in
0.5.23) flashinfer="0.7.2" transformers="5.19.0" compressed_tensors="0.18.0" ;;
0.5.9) flashinfer="0.6.3" transformers="4.57.1" compressed_tensors="0.13.0" ;;
*)
    echo "make_venv.sh: no FlashInfer pin known for sglang $version (add it to $0)" >&2
    exit 2
    ;;
esac

# torch 2.13.0 is the CPU wheel on this machine's disk; anything newer is a CUDA build.
deps=(
    "torch==2.13.0"
    "transformers==$transformers"
    "triton==3.9.0"
    "compressed-tensors==$compressed_tensors"
    numpy orjson psutil pybase64 requests packaging pillow starlette msgspec pydantic
    pyzmq tqdm IPython aiohttp huggingface_hub nvidia-ml-py einops apache-tvm-ffi
    sentencepiece setproctitle uvloop fastapi uvicorn python-multipart
    partial_json_parser interegular openai prometheus-client dill gguf
)
stub="$here/import_stub.py"
want="sglang==$version flashinfer=$flashinfer deps=${deps[*]} stub=$(sha256sum "$stub" | cut -c1-16)"
stamp="$venv/.bwtune-oracle-stamp"

# One builder per venv at a time: parallel test sessions call this script too.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$venv/bin/python" ]]; then
    exit 0
fi

echo "make_venv.sh: building $venv" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
log="$venv/.bwtune-oracle-pip.log"
pip_install() {
    # pip's output goes to a log (this machine's pip config adds noisy index warnings);
    # on failure the tail of it explains why.
    if ! "$venv/bin/python" -m pip --disable-pip-version-check -q install "$@" >>"$log" 2>&1; then
        grep -v '^WARNING: Location' "$log" | tail -20 >&2
        echo "make_venv.sh: pip install failed for sglang $version (log: $log)" >&2
        exit 1
    fi
}
pip_install "${deps[@]}"
# --no-deps: their full dependency sets are GPU kernels and several GB; argument
# processing needs only the packages above.
pip_install --no-deps "sglang==$version" "flashinfer-python==$flashinfer"

site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
for package in sgl_kernel torchvision; do
    mkdir -p "$site/$package"
    cp "$stub" "$site/$package/__init__.py"
done

"$venv/bin/python" -c 'import sglang.srt.server_args' >/dev/null
printf '%s' "$want" >"$stamp"
echo "make_venv.sh: ready: $venv/bin/python" >&2
