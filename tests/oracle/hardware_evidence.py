"""The source lines behind the planner's hardware rules, release by release.

    .venv/bin/python tests/oracle/hardware_evidence.py          # print the doc section
    .venv/bin/python tests/oracle/hardware_evidence.py --write  # rewrite it in the doc

The `hardware` rules (plugins/module_utils/_sglang/rules_hardware.py) predict failures SGLang's argument
processing does not catch: at load or at the first forward. The differential suite cannot
see those, so each rule's release boundary is read from each release's own source (the
copies under build/sglang-releases/<v>/sglang/, tests/oracle/releases.py). Every CLAIM below
is a pattern over one source file and the releases the rules say it holds in (from the
rules' own boundary constants); `check()` finds the releases whose source holds it and
complains where the two differ. docs/sglang-rules-evidence.md quotes `render()`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

# Imported as tests.oracle.* (pytest): siblings from the package, one copy each; run as a
# script or imported by its bare name (scripts/): siblings by their bare names too.
if __package__:
    from tests.oracle import releases
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import releases

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import rule_model

DOC = releases.REPO_ROOT / "docs" / "sglang-rules-evidence.md"
BEGIN = "<!-- hardware-evidence:begin (tests/oracle/hardware_evidence.py --write) -->"
END = "<!-- hardware-evidence:end -->"
VERSIONS = list(releases.RELEASES)  # oldest first


@dataclass(frozen=True)
class Claim:
    rule: str
    says: str  # what the rule relies on, in words
    path: str  # under sglang/srt/
    pattern: str  # a regular expression over the file (re.S off: `[\s\S]` spans lines)
    since: str | None = None  # first release it holds in (None: the oldest)
    until: str | None = None  # first release it no longer holds in (None: still holds)

    def expected(self, version: str) -> bool:
        after = self.since is None or VERSIONS.index(version) >= VERSIONS.index(self.since)
        before = self.until is None or VERSIONS.index(version) < VERSIONS.index(self.until)
        return after and before


_GAP = r"[^\n]*\n(?:[^\n]*\n){0,6}?[^\n]*"  # the rest of the line and up to 6 more
CLAIMS = (
    Claim(
        "hopper-nvfp4-marlin-only",
        "NVFP4 MoE `auto` falls back to Marlin on capability 8.0-9.x (ModelOptNvFp4FusedMoEMethod)",
        "layers/quantization/modelopt_quant.py",
        r"if \(?moe_runner_backend\.is_auto\(\)[^\n]*and is_cuda\(\):" + _GAP
        + r"use_marlin_fallback = \(8, 0\) <= capability < \(10, 0\)",
        since=rule_model.NVFP4_SM90_MARLIN_SINCE,
    ),
    Claim(
        "hopper-nvfp4-marlin-only",
        "FP4 GEMM `auto` resolves to marlin on SM80-SM90 (initialize_fp4_gemm_config)",
        "layers/quantization/fp4_utils.py",
        r"elif is_cuda\(\) and \(10, 0\) > get_device_capability\(\) >= \(8, 0\):" + _GAP
        + r'backend = "marlin"',
        since=rule_model.NVFP4_SM90_MARLIN_SINCE,
    ),
    Claim(
        "hopper-nvfp4-marlin-only",
        "the NVFP4 MoE method raises on anything but Blackwell, whatever the runner",
        "layers/quantization/modelopt_quant.py",
        r"if not is_blackwell_supported\(\):" + _GAP + r"quantization\. Please use Blackwell and",
        until=rule_model.NVFP4_SM90_MARLIN_SINCE,
    ),
    Claim(
        "sm120-fp4-moe-auto",
        "with --quantization modelopt_fp4 on SM120, argument processing turns MoE `auto` into "
        "flashinfer_cutlass",
        "server_args.py|arg_groups/overrides.py",
        r'quantization == "modelopt_fp4"' + _GAP + r"sm120" + _GAP
        + r'moe_runner_backend = "flashinfer_cutlass"',
        since=rule_model.SM120_FP4_MOE_AUTO_SINCE,
    ),
    Claim(
        "fp4-moe-auto-trtllm-at-load",
        "the FP4 MoE method turns a MoE runner still `auto` into flashinfer_trtllm at load on "
        "capability >= 10.0 (SM120 included)",
        "layers/quantization/modelopt_quant.py",
        r"if moe_runner_backend\.is_auto\(\):" + _GAP
        + r"moe_runner_backend = MoeRunnerBackend\.FLASHINFER_TRTLLM",
        since="0.5.11",
    ),
)  # fmt: skip


def found(claim: Claim, version: str) -> str | None:
    """`path:first-last` of the lines in release `version` that say what the claim says."""
    for path in claim.path.split("|"):
        source = releases.RELEASES_DIR / version / "sglang" / "srt" / path
        if not source.exists():
            continue
        text = source.read_text()
        match = re.search(claim.pattern, text)
        if match:
            first = text.count("\n", 0, match.start()) + 1
            last = text.count("\n", 0, match.end()) + 1
            return f"srt/{path}:{first}-{last}"
    return None


def check() -> list[str]:
    """Where a release's source and the rules' boundary disagree (empty: they agree)."""
    problems = []
    for claim in CLAIMS:
        for version in VERSIONS:
            where = found(claim, version)
            if claim.expected(version) != (where is not None):
                state = f"says it at {where}" if where else "does not say it"
                problems.append(f"{claim.rule}: SGLang {version} {state}: {claim.says}")
    return problems


def _span(claim: Claim) -> str:
    held = [v for v in VERSIONS if claim.expected(v)]
    return f"{held[0]}-{held[-1]}" if held else "none"


def render() -> str:
    lines = [
        "| rule | what it relies on | releases | cited lines (first release, 0.5.16, newest) |",
        "|---|---|---|---|",
    ]
    for claim in CLAIMS:
        held = [v for v in VERSIONS if claim.expected(v)]
        cited = []
        for version in dict.fromkeys([held[0], "0.5.16", held[-1]]):
            where = found(claim, version) if version in held else None
            if where:
                cited.append(f"{version} `{where}`")
        lines.append(f"| `{claim.rule}` | {claim.says} | {_span(claim)} | {'; '.join(cited)} |")
    return "\n".join(lines) + "\n"


def doc_section(text: str) -> str:
    if BEGIN not in text or END not in text:
        raise ValueError(f"{DOC.name} lacks the markers {BEGIN!r} ... {END!r}")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def main(argv: list[str]) -> int:
    problems = check()
    for problem in problems:
        print(problem, file=sys.stderr)
    section = render()
    if "--write" in argv:
        text = DOC.read_text()
        head, rest = text.split(BEGIN, 1)
        DOC.write_text(f"{head}{BEGIN}\n{section}{END}{rest.split(END, 1)[1]}")
    else:
        sys.stdout.write(section)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
