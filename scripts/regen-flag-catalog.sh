#!/usr/bin/env bash
# Regenerate plugins/module_utils/sglang_flags.py from the parsers of every supported
# SGLang release (each in its own oracle venv, built on first use).
#
#   scripts/regen-flag-catalog.sh [OUTPUT]     (default: plugins/module_utils/sglang_flags.py)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
output="${1:-$root/plugins/module_utils/sglang_flags.py}"
ruff="${RUFF:-$root/.venv/bin/ruff}"
versions=(0.5.23 0.5.9) # keep in step with tests/oracle/sglang_oracle.py VERSIONS

tmp="$(mktemp "${TMPDIR:-/tmp}/sglang_flags.XXXXXX.py")"
trap 'rm -f "$tmp"' EXIT
for version in "${versions[@]}"; do
    bash "$root/tests/oracle/make_venv.sh" "$version"
    # A bare environment: some choices depend on SGLANG_* variables.
    env -i PATH="$PATH" HOME="$HOME" HF_HUB_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1 \
        "$root/build/oracle/sglang-$version/bin/python" "$root/scripts/gen_flag_catalog.py" \
        --ruff "$ruff" "$tmp"
done
cp "$tmp" "$output"
