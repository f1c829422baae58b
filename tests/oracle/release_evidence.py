"""Render the differential suite's findings per rule x release for docs/sglang-rules-evidence.md.

    .venv/bin/python tests/oracle/release_evidence.py RESULTS.json [...] > section.md

RESULTS.json: {"VERSION GPU": {"problems": [...], "counts": {...}}} as written by
`compare()` of tests/unit/test_planner_vs_sglang.py for each release and GPU (the
differential suite; scripts/add-sglang-release.sh prints the same problems for one release).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import releases  # noqa: E402

from ansible_collections.bwtune.sglang.plugins.module_utils import rules  # noqa: E402

_REFUSES = re.compile(
    r"SGLang refuses \((?P<type>\w+): (?P<msg>.*) @ (?P<where>\S+)\) but the plan says (?P<status>\w+)"
)
_RULE_IDS = re.compile(r"([a-z0-9.-]+) \((?:sglang|hardware|adjust)\)")


def main(paths: list[str]) -> int:
    results: dict[str, dict] = {}
    for path in paths:
        results.update(json.loads(Path(path).read_text()))
    versions = [v for v in releases.RELEASES if any(k.startswith(v + " ") for k in results)]
    per_rule: dict[str, Counter[str]] = defaultdict(Counter)
    unmatched: dict[tuple[str, str], set[str]] = defaultdict(set)
    print("| release | GPU | configs | SGLang refuses | pruned by hardware rules only | disagreements |")
    print("|---|---|---|---|---|---|")
    order = list(releases.RELEASES)
    for key, found in sorted(results.items(), key=lambda kv: (order.index(kv[0].split()[0]), kv[0])):
        version, gpu = key.split()
        counts = found["counts"]
        print(
            f"| {version} | {gpu} | {counts.get('compared', '?')} | {counts.get('sglang_refuses', '?')} | "
            f"{counts.get('hardware_only', '?')} | {len(found['problems'])} |"
        )
        for problem in found["problems"]:
            refused = _REFUSES.search(problem)
            if refused and refused["status"] != "pruned":
                unmatched[refused["where"], refused["msg"][:160]].add(version)
                continue
            for rule_id in set(_RULE_IDS.findall(problem)):
                per_rule[rule_id][version] += 1
            if refused:
                unmatched[refused["where"], refused["msg"][:160]].add(version)
    print()
    print("Rule x release (`-`: the rule's range leaves the release out; `ok`: no disagreement;")
    print("`N!`: N configs where the rule's verdict and the release's differ):")
    print()
    print("| rule | kind | " + " | ".join(versions) + " |")
    print("|---|---|" + "---|" * len(versions))
    for r in rules.RULES:
        cells = []
        for version in versions:
            if not any(r.applies(version, gpu) for gpu in rules.GPUS):
                cells.append("-")
            else:
                cells.append(f"{per_rule[r.id][version]}!" if per_rule[r.id][version] else "ok")
        print(f"| `{r.id}` | {r.kind} | " + " | ".join(cells) + " |")
    print()
    print("Refusals no rule predicts (SGLang's message and the source line that raised it):")
    print()
    for (where, message), seen in sorted(unmatched.items(), key=lambda kv: (min(kv[1]), kv[0])):
        ordered = [v for v in versions if v in seen]
        print(f"- {', '.join(ordered)}: `{where}`: {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
