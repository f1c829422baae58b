"""Render the differential suite's findings per rule x release for docs/sglang-rules-evidence.md.

    BWTUNE_ORACLE_RESULTS=tests/oracle/release_findings.json \\
        .venv/bin/pytest -m oracle tests/oracle/test_planner_vs_sglang.py   # refresh the data
    .venv/bin/python tests/oracle/release_evidence.py            # print the section
    .venv/bin/python tests/oracle/release_evidence.py --write    # put it into the doc

The data, tests/oracle/release_findings.json, is what `compare()` of
tests/oracle/test_planner_vs_sglang.py found per "VERSION GPU": counts, disagreements, and per
rule what SGLang did with the configs the rule prunes (or, for an `sglang` rule whose version
range leaves the release out, the configs it would refuse): how many it accepted and the
source lines that refused the others. The doc holds the rendering between the two markers
below; tests/unit/test_oracle_evidence_doc.py fails when it differs from this output.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# Imported as tests.oracle.* (pytest): siblings from the package, one copy each; run as a
# script or imported by its bare name (scripts/): siblings by their bare names too.
if __package__:
    from tests.oracle import releases
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import releases

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import catalog, rules  # noqa: E402

FINDINGS = Path(__file__).resolve().parent / "release_findings.json"
DOC = REPO / "docs" / "sglang-rules-evidence.md"
BEGIN = "<!-- release-evidence:begin (tests/oracle/release_evidence.py --write) -->"
END = "<!-- release-evidence:end -->"
_REFUSES = re.compile(
    r"SGLang refuses \((?P<type>\w+): (?P<msg>.*) @ (?P<where>\S+)\) but the plan says (?P<status>\w+)"
)


def _short(where: str) -> str:
    return where.removeprefix("sglang/srt/")


def _state(rule: rules.Rule, version: str, found: dict[str, dict[str, Any]]) -> tuple[str, Counter[str]]:
    """What `version` does with the configs `rule` is about, over the GPUs run: a word and,
    for refusals, the source lines that raised (with how many configs each)."""
    runs = {key.split()[1]: f for key, f in found.items() if key.split()[0] == version}
    if not runs:
        return "not run", Counter()
    applies = any(rule.applies(version, gpu) for gpu in runs)
    if rule.kind == "adjust":
        return ("adjusts" if applies else "does not adjust"), Counter()
    accepts = sum(f["rules"].get(rule.id, {}).get("accepts", 0) for f in runs.values())
    wheres: Counter[str] = Counter()
    for f in runs.values():
        wheres.update(f["rules"].get(rule.id, {}).get("refuses", {}))
    if rule.kind == "hardware":  # refusals of these configs have another cause
        return ("accepts" if accepts else "no config"), Counter()
    if wheres and accepts:
        return "refuses some", wheres
    if wheres:
        return "refuses", wheres
    return ("accepts" if accepts else "no config"), Counter()


def segments(rule: rules.Rule, versions: list[str], found: dict[str, dict[str, Any]]) -> str:
    """Run-length form, with the source line that refused at the first release of a run and,
    where it moved, at the last: `0.5.9-0.5.18: refuses (server_args.py:1900 ... :6017 in 0.5.18)`."""
    runs: list[tuple[str, list[str], list[str]]] = []  # state, releases, line per release
    for version in versions:
        state, wheres = _state(rule, version, found)
        line = _short(wheres.most_common(1)[0][0]) if wheres else ""
        if not runs or runs[-1][0] != state:
            runs.append((state, [], []))
        runs[-1][1].append(version)
        runs[-1][2].append(line)
    return "; ".join(_segment(*run) for run in runs)


def _segment(state: str, versions: list[str], lines: list[str]) -> str:
    span = versions[0] if len(versions) == 1 else f"{versions[0]}-{versions[-1]}"
    notes = []
    if lines[0]:
        notes.append(f"`{lines[0]}`")
    if lines[-1] and lines[-1] != lines[0]:
        notes.append(f"`{lines[-1]}` in {versions[-1]}")
    return f"{span}: {state}" + (f" ({' ... '.join(notes)})" if notes else "")


def render(found: dict[str, dict[str, Any]]) -> str:
    order = list(releases.RELEASES)
    versions = [v for v in order if any(k.split()[0] == v for k in found)]
    out: list[str] = []
    out.append("| release | GPU | configs | SGLang refuses | pruned by hardware rules only | disagreements |")
    out.append("|---|---|---|---|---|---|")
    for key in sorted(found, key=lambda k: (order.index(k.split()[0]), k)):
        version, gpu = key.split()
        counts = found[key]["counts"]
        out.append(
            f"| {version} | {gpu} | {counts['compared']} | {counts['sglang_refuses']} | "
            f"{counts['hardware_only']} | {len(found[key]['problems'])} |"
        )
    out += [
        "",
        "Rule x release: what each release's own argument processing does with the configs the",
        "rule is about (`sglang` rules: the configs it prunes, or, outside its version range, the",
        "configs it would prune; `hardware` rules: SGLang accepts them at argument time, they fail",
        "at load; `adjust` rules: whether SGLang changes the flags; the suite checks the final",
        "values). In brackets, the SGLang source line that refused them in the first release of",
        "the run and, where it moved, in the last. `no config`: no example config or probe is about",
        "the rule there; `refuses some`: some of them are refused, at that line, by a check of",
        "SGLang's own (often one of the known gaps below).",
        "",
        "| rule | kind | releases: behaviour (source line) |",
        "|---|---|---|",
    ]
    for r in rules.RULES:
        out.append(f"| `{r.id}` | {r.kind} | {segments(r, versions, found)} |")
    unmatched: dict[tuple[str, str], set[str]] = {}
    for key, f in found.items():
        for problem in f["problems"]:
            refused = _REFUSES.search(problem)
            if refused:
                unmatched.setdefault((refused["where"], refused["msg"][:160]), set()).add(key.split()[0])
    out += ["", "Disagreements that fail the suite (SGLang's message and the source line):", ""]
    if not unmatched:
        out.append("- none")
    for (where, message), seen in sorted(unmatched.items(), key=lambda kv: (min(kv[1]), kv[0])):
        out.append(f"- {', '.join(v for v in versions if v in seen)}: `{where}`: {message}")
    out += [
        "",
        "Known gaps: rule probes where releases and the rules disagree, listed in PROBE_GAPS of",
        "tests/oracle/test_planner_vs_sglang.py (recorded, not failures; no example config reaches them):",
        "",
        "| probe | releases (GPUs) | what happens |",
        "|---|---|---|",
    ]
    gaps: dict[str, dict[str, Any]] = {}
    for key, f in found.items():
        version, gpu = key.split()
        for text in f.get("known", []):
            probe, detail = text.removeprefix("probe ").split(": ", 1)
            gap = gaps.setdefault(probe, {"versions": set(), "gpus": set(), "details": Counter()})
            gap["versions"].add(version)
            gap["gpus"].add(gpu)
            gap["details"][re.sub(r"(\.py):\d+", r"\1", detail)[:220]] += 1
    for probe, gap in sorted(
        gaps.items(), key=lambda kv: (order.index(min(kv[1]["versions"], key=order.index)), kv[0])
    ):
        span = sorted(gap["versions"], key=order.index)
        text = gap["details"].most_common(1)[0][0].replace("|", "/")
        out.append(f"| `{probe}` | {_ranges(span, versions)} ({', '.join(sorted(gap['gpus']))}) | {text} |")
    return "\n".join(out) + "\n"


def _ranges(seen: list[str], versions: list[str]) -> str:
    """`0.5.10-0.5.13.post1, 0.5.19` for the releases in `seen`, runs over `versions`."""
    runs = catalog.release_runs([v for v in versions if v in seen], versions)
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def doc_section(text: str) -> str:
    """The rendered part of the doc, between the markers."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{DOC.name} lacks the markers {BEGIN!r} ... {END!r}")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def main(argv: list[str]) -> int:
    found = json.loads(FINDINGS.read_text())
    section = render(found)
    if argv == ["--write"]:
        text = DOC.read_text()
        head, rest = text.split(BEGIN, 1)
        DOC.write_text(f"{head}{BEGIN}\n{section}{END}{rest.split(END, 1)[1]}")
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.write(section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
