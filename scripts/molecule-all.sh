#!/usr/bin/env bash
# Run every molecule scenario (make molecule; make test runs it).
#
#   scripts/molecule-all.sh [SCENARIO...]     default: every molecule/*/ with a molecule.yml
#
# `default` (provisioning on localhost) gets its inputs first:
# tests/integration/provision/scenario.py prepares build/molecule/default (fixture SGLang
# checkout, compiler-counting nvcc, wheelhouse, role variables). The scenarios on real
# systemd hosts (server, fleet) boot and take down their own with
# scripts/testhosts/testhosts.sh in create/destroy (molecule/_testhosts/); if one is killed
# half-way, its hosts are taken down here all the same.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
PY=${PYTHON:-$repo/.venv/bin/python}
export PATH="$repo/.venv/bin:$PATH"

scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
    for f in molecule/*/molecule.yml; do scenarios+=("$(basename "$(dirname "$f")")"); done
fi

status=0
for s in "${scenarios[@]}"; do
    base="$repo/build/molecule/$s"
    echo "== molecule scenario $s" >&2
    if grep -q "build/molecule/$s/vars.yml" "molecule/$s/molecule.yml"; then
        "$PY" tests/integration/provision/scenario.py "$base" >/dev/null
    fi
    start=$SECONDS
    if ! molecule test -s "$s"; then
        status=1
    fi
    echo "== molecule scenario $s: $((SECONDS - start)) s" >&2
    if [ -f "$base/testhosts/inventory.yml" ]; then
        echo "== molecule scenario $s left its hosts up: taking them down" >&2
        TESTHOSTS_DIR="$base/testhosts" scripts/testhosts/testhosts.sh down >&2 || status=1
    fi
done
exit $status
