#!/usr/bin/env bash
# Run every molecule scenario (make molecule; make test runs it).
#
#   scripts/molecule-all.sh [SCENARIO...]     default: every directory under molecule/
#
# Each scenario gets its inputs first: tests/integration/provision/scenario.py prepares
# build/molecule/<scenario> (fixture SGLang checkout, compiler-counting nvcc, wheelhouse,
# role variables). Scenarios whose molecule.yml says `testhosts: N` get N systemd-nspawn
# hosts (scripts/testhosts/testhosts.sh), taken down afterwards whatever the outcome.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
PY=${PYTHON:-$repo/.venv/bin/python}
export PATH="$repo/.venv/bin:$PATH"

scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
    for d in molecule/*/; do scenarios+=("$(basename "$d")"); done
fi

status=0
for s in "${scenarios[@]}"; do
    base="$repo/build/molecule/$s"
    echo "== molecule scenario $s" >&2
    "$PY" tests/integration/provision/scenario.py "$base" >/dev/null
    hosts=$(sed -n 's/^# testhosts: *\([0-9]*\).*/\1/p' "molecule/$s/molecule.yml")
    if [ -n "$hosts" ]; then
        export TESTHOSTS_DIR="$base/testhosts"
        # shellcheck disable=SC2064
        trap "scripts/testhosts/testhosts.sh down >/dev/null 2>&1 || true" EXIT
        scripts/testhosts/testhosts.sh up "$hosts" --bind-ro /usr/local/cuda-13.0 --bind-ro "$repo/build/provision-wheelhouse" >&2
    fi
    start=$SECONDS
    if ! molecule test -s "$s"; then
        status=1
    fi
    echo "== molecule scenario $s: $((SECONDS - start)) s" >&2
    if [ -n "$hosts" ]; then
        scripts/testhosts/testhosts.sh down >&2 || status=1
        trap - EXIT
        unset TESTHOSTS_DIR
    fi
done
exit $status
