"""The stand-in refuses what real SGLang refuses: by real SGLang's recorded verdicts, by real
SGLang's own argument processing where it is importable, and in one line where neither is
there (never silent acceptance)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bwtune.standin import verdicts
from bwtune.standin.args import flag_table, parse

REPO = Path(__file__).resolve().parents[3]
MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
BASE = ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass", "--tp-size", "8"]
EP2 = ["--tp-size", "8", "--ep-size", "2", "--quantization", "modelopt_fp4", "--moe-runner-backend",
       "flashinfer_cutlass"]  # fmt: skip
NO_SGLANG = {verdicts.PYTHON_ENV: "", verdicts.PYTHONPATH_ENV: ""}


def finish(server, timeout: float = 30) -> tuple[int, str]:
    return server.proc.wait(timeout), server.log()


def explicit(*flags: str, version: str = "0.5.23") -> dict:
    return parse(["--model-path", str(MODEL), *flags], flag_table(version)).explicit


def test_ep_size_other_than_1_or_tp_is_refused_as_sglang_refuses_it(launch):
    # SGLang 0.5.23 arg_groups/moe_hook.py: "The expert parallel size must be 1 or the same as
    # the tensor parallel size" (a neighbour of the examples' configs along ep-size).
    for gpu in ("sm120", "sm100"):
        verdict = verdicts.lookup("0.5.23", gpu, explicit(*EP2))
        assert verdict is not None and not verdict.ok, gpu
        assert "expert parallel size must be 1 or the same as the tensor parallel size" in verdict.error
    code, log = finish(launch(*EP2, env=NO_SGLANG))
    assert code == 1 and "Load weight begin" not in log
    assert "The expert parallel size must be 1 or the same as the tensor parallel size" in log
    ok = verdicts.lookup("0.5.23", "sm120", explicit(*BASE, "--ep-size", "8"))
    assert ok is not None and ok.ok and ok.resolved["ep-size"] == 8


def test_flags_without_a_recorded_verdict_are_refused_in_one_line(launch):
    flags = [*BASE, "--chunked-prefill-size", "1234"]
    assert verdicts.lookup("0.5.23", "sm120", explicit(*flags)) is None
    code, log = finish(launch(*flags, env=NO_SGLANG))
    lines = log.strip().splitlines()
    assert code == 2 and len(lines) == 1, log
    assert lines[0].startswith(
        "bwtune-standin: no recorded verdict for --chunked-prefill-size 1234 --moe-runner-backend "
        "flashinfer_cutlass --quantization modelopt_fp4 --tp-size 8 (SGLang 0.5.23, sm120): "
    )
    assert verdicts.PYTHON_ENV in lines[0]


def _fake_sglang(tmp_path: Path, version: str, answer: dict) -> Path:
    """A 'python' that imports SGLang `version` and whose evaluator answers `answer`."""
    script = tmp_path / "python"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "if sys.argv[1] == '-c':\n"
        f"    print({version!r})\n"
        "else:\n"
        "    request = json.load(sys.stdin)\n"
        f"    open({str(tmp_path / 'asked.json')!r}, 'w').write(json.dumps(request))\n"
        f"    print(json.dumps([{answer!r}]))\n"
    )
    script.chmod(0o755)
    return script


def test_unrecorded_flags_go_to_real_sglang_when_it_is_importable(launch, tmp_path):
    refusal = {"ok": False, "error_type": "ValueError", "error": "chunked prefill 1234 refused",
               "where": "sglang/srt/server_args.py:42", "statement": None, "values": {}}  # fmt: skip
    python = _fake_sglang(tmp_path, "0.5.23", refusal)
    env = {verdicts.PYTHON_ENV: str(python), verdicts.EVALUATOR_ENV: str(python)}
    code, log = finish(launch(*BASE, "--chunked-prefill-size", "1234", env=env))
    assert code == 1 and "ValueError: chunked prefill 1234 refused" in log
    asked = json.loads((tmp_path / "asked.json").read_text())
    assert asked["gpu"] == "sm120" and "--chunked-prefill-size" in asked["cases"][0]
    accepted = {"ok": True, "values": {"moe-runner-backend": "flashinfer_cutlass", "tp-size": 8}}
    python = _fake_sglang(tmp_path, "0.5.23", accepted)
    server = launch(*BASE, "--chunked-prefill-size", "1234", env=env)
    server.wait_healthy()
    assert "real SGLang's own argument processing gave it" in server.log()


def test_a_real_sglang_of_another_release_is_not_asked(launch, tmp_path):
    python = _fake_sglang(tmp_path, "0.5.9", {"ok": True, "values": {}})
    env = {verdicts.PYTHON_ENV: str(python), verdicts.EVALUATOR_ENV: str(python)}
    code, log = finish(launch(*BASE, "--chunked-prefill-size", "1234", env=env))
    assert code == 2 and "cannot answer for SGLang 0.5.23: it has SGLang 0.5.9" in log
    assert not (tmp_path / "asked.json").exists()
