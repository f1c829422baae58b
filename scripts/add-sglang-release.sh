#!/usr/bin/env bash
# Support a new SGLang release the day it comes out:
#   1. install it --no-deps beside the others and add its flag table to
#      plugins/module_utils/_sglang/sglang_flags.py (stored as differences; tests/oracle/releases.py),
#   2. run the differential suite for it (the example matrices and the rule probes of
#      tests/oracle/rules_evidence.py on sm120, sm100, sm90, every config through the
#      release's own argument processing, in-process: well under a minute),
#   3. print each disagreement between bwtune's rules and the real release, with SGLang's
#      own message and the source line that raised it.
#
#   scripts/add-sglang-release.sh 0.5.24
#
# Exit 0 when the rules agree with the release, 1 when something disagrees, 2 on bad use.
# Then add the version to RELEASES in tests/oracle/releases.py (with its wheel's date).
set -euo pipefail

version="${1:-}"
if [[ ! "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(\.post[0-9]+)?$ ]]; then
    echo "usage: $0 VERSION (a published release like 0.5.24 or 0.5.24.post1; got '${version}')" >&2
    exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"

bash "$root/scripts/regen-flag-catalog.sh" "$root/plugins/module_utils/_sglang/sglang_flags.py" "$version"
cd "$root"
exec nice -n 10 "$python" - "$version" <<'PY'
import sys

sys.path[:0] = ["."]  # the repository root: tests/oracle/ is imported as the package tests.oracle
from tests.oracle import test_planner_vs_sglang as differential

version = sys.argv[1]
disagreements = 0
for gpu in differential.GPUS:
    problems, counts = differential.compare(version, gpu)
    print(f"sglang {version} on {gpu}: {counts}")
    for problem in problems:
        print(f"  DISAGREES {gpu}: {problem}")
    disagreements += len(problems)
print(f"sglang {version}: {disagreements} disagreement(s) between bwtune's rules and the release")
sys.exit(1 if disagreements else 0)
PY
