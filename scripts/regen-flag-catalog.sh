#!/usr/bin/env bash
# Regenerate plugins/module_utils/_sglang/sglang_flags.py from the parsers of every known SGLang
# release (tests/oracle/releases.py RELEASES), or of the releases named after OUTPUT
# (those are merged into what OUTPUT already holds).
#
#   scripts/regen-flag-catalog.sh [OUTPUT [VERSION...]]   (default: plugins/module_utils/_sglang/sglang_flags.py)
#
# Each release is installed --no-deps into build/sglang-releases/V and read by the shared
# environment's python (releases.py); two parsers are read at a time.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
output="${1:-$root/plugins/module_utils/_sglang/sglang_flags.py}"
shift || true
ruff="${RUFF:-$root/.venv/bin/ruff}"
releases="$root/tests/oracle/releases.py"
python="${PYTHON:-$root/.venv/bin/python}"
if (($#)); then
    versions=("$@")
else
    mapfile -t versions < <("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import releases; print("\n".join(releases.RELEASES))' "$root/tests/oracle")
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/sglang_flags.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
"$python" "$releases" ensure "${versions[@]}"
shared="$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import releases; print(releases.shared_python())' "$root/tests/oracle")"
# A dump depends only on the release (immutable) and the generator's code: cache it.
key="$(cat "$root/scripts/gen_flag_catalog.py" "$root/tests/oracle/sglang_parser.py" | sha256sum | cut -c1-12)"
cache="$root/build/sglang-releases/_dumps/$key"
mkdir -p "$cache"
dump() {
    if [[ -f "$cache/$1.json" ]]; then cp "$cache/$1.json" "$tmp/$1.json"; return 0; fi
    # A bare environment: some choices depend on SGLANG_* variables.
    env -i PATH="$PATH" HOME="$HOME" HF_HUB_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1 \
        PYTHONPATH="$("$python" "$releases" pythonpath "$1")" \
        "$shared" "$root/scripts/gen_flag_catalog.py" dump "$tmp/$1.json" 2>"$tmp/$1.err" ||
        { tail -20 "$tmp/$1.err" >&2; return 1; }
    cp "$tmp/$1.json" "$cache/$1.json"
}
export -f dump
export tmp root python releases shared cache
printf '%s\n' "${versions[@]}" | xargs -P 2 -I{} bash -c 'dump {}'
if [[ -f "$output" && $# -gt 0 ]]; then cp "$output" "$tmp/out.py"; fi
"$python" "$root/scripts/gen_flag_catalog.py" write --ruff "$ruff" "$tmp/out.py" "$tmp"/*.json
cp "$tmp/out.py" "$output"
