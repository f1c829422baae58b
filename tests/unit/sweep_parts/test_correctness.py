"""The correctness gate: canonical prompts, garbage detection, comparison with the reference."""

from __future__ import annotations

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._bench.correctness import (
    OutputAudit,
    check_outputs,
    repeated_unit,
    run_gate,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.correctness_prompts import BY_NAME, PROMPTS

GOOD = {p.name: p.expected + " and more." for p in PROMPTS}


def judge(outputs: dict[str, str], errors: dict[str, str] | None = None, reference=None):
    errors = errors or {}
    return check_outputs(
        PROMPTS, [outputs.get(p.name) for p in PROMPTS], [errors.get(p.name, "") for p in PROMPTS], reference
    )


def test_correct_answers_pass_and_become_the_reference():
    r = judge(GOOD)
    assert r.passed and r.message == f"{len(PROMPTS)} prompts answered correctly"
    assert [o["name"] for o in r.outputs] == [p.name for p in PROMPTS]
    assert all(o["problem"] is None for o in r.outputs)
    # the same answers against themselves as reference still pass
    assert judge(GOOD, reference=r.outputs).passed


@pytest.mark.parametrize(
    ("output", "error", "needle"),
    [
        ("", "", "empty output"),
        ("   \n", "", "empty output"),
        ("!!!!!!!!!!!!!!!!", "", "one token repeated: '!'"),
        ("the the the the the the the", "", "one token repeated: 'the'"),
        ("abcabcabcabcabcabcabc", "", "one token repeated: 'abc'"),
        (None, "HTTP 400: probability tensor contains either `inf`, `nan` or element < 0", "sampling error"),
        ("RuntimeError: probability tensor contains either inf, nan or element < 0", "", "sampling error"),
        (" London", "", "expected an answer starting 'Paris'"),
        (None, "ConnectionRefusedError: refused", "request failed"),
    ],
)
def test_garbage_is_wrong_output_with_a_message(output, error, needle):
    r = judge({**GOOD, "capital-france": output}, {"capital-france": error})
    assert not r.passed
    assert r.message.startswith("wrong output on 1/5 prompts: capital-france: ")
    assert needle in r.message


def test_far_from_reference_fails_close_to_it_passes():
    ref = judge(GOOD).outputs
    drift = {**GOOD, "capital-france": " Paris zq xv kj pw ml qq rr ss tt uu vv ww"}
    r = judge(drift, reference=ref)
    assert not r.passed and "far from the reference answer" in r.message
    near = {**GOOD, "capital-france": " Paris and more!"}
    assert judge(near, reference=ref).passed


def test_several_problems_are_counted():
    r = judge({p.name: "" for p in PROMPTS})
    assert r.message == "wrong output on 5/5 prompts: add-2-3: empty output (+4 more)"


def test_repeated_unit():
    assert repeated_unit("1, 2, 3, 4, 5") is None
    assert repeated_unit("56") is None
    assert repeated_unit("ababababababab") == "ab"
    assert repeated_unit(BY_NAME["count-to-5"].expected) is None


@pytest.mark.parametrize(
    ("answers", "passed", "needle"),
    [
        ("correct", True, "5 prompts answered correctly"),
        ("repeat", False, "one token repeated"),
        ("nan", False, "sampling error (NaN/inf logits)"),
        ("empty", False, "empty output"),
    ],
)
def test_gate_against_a_server(sse_server, answers, passed, needle):
    port = sse_server("--answers", answers)
    r = run_gate("127.0.0.1", port)
    assert r.passed is passed
    assert needle in r.message


def test_gate_with_reference_from_a_previous_config(sse_server):
    ref = run_gate("127.0.0.1", sse_server()).outputs
    r = run_gate("127.0.0.1", sse_server("--answers", "drift"), reference=ref)
    assert not r.passed and "far from the reference" in r.message


# ---------------------------------------------------------------- the gate under load


def sample(index: int, text: str | None, ok: bool = True, error: str = "", workload: str = "w") -> dict:
    return {"workload": workload, "rep": 0, "index": index, "greedy": True, "ok": ok,
            "text": text, "output_len": 8, "error": error}  # fmt: skip


GOOD_LOAD = [sample(i, f" the model streams words for request {i}") for i in range(8)]


def test_load_samples_pass_and_become_the_reference():
    audit = OutputAudit()
    assert audit.check(GOOD_LOAD) is None
    assert audit.reference[("w", 0, 3)] == GOOD_LOAD[3]["text"]
    assert audit.check(GOOD_LOAD) is None  # the same outputs agree with themselves


def test_garbage_in_part_of_a_batch_is_wrong_output():
    # A kernel that breaks above some batch size: the later half of the batch is '!' repeated.
    broken = GOOD_LOAD[:5] + [sample(i, "!" * 16) for i in range(5, 8)]
    message = OutputAudit().check(broken)
    assert message is not None and "3/8 sampled requests are garbage" in message and "'!'" in message
    # One looping output of eight is not enough to call a kernel broken.
    assert OutputAudit().check([*GOOD_LOAD[:7], sample(7, " yes" * 8)]) is None


def test_a_nan_sampling_error_under_load_is_wrong_output_even_once():
    nan = "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"
    message = OutputAudit().check([*GOOD_LOAD[:7], sample(7, None, ok=False, error=nan)])
    assert message is not None and "NaN/inf" in message
    # other request errors (a timeout) are the benchmark's failed requests, not wrong output
    assert OutputAudit().check([*GOOD_LOAD[:7], sample(7, None, ok=False, error="TimeoutError: ")]) is None


def test_greedy_outputs_far_from_the_reference_config_are_wrong_output():
    audit = OutputAudit()
    assert audit.check(GOOD_LOAD) is None
    drifted = [sample(i, f" completely different tokens #{i}") for i in range(8)]
    message = audit.check(drifted)
    assert message is not None and "disagree with the reference config" in message
    # Texts the API did not return (streamed /v1/completions) are not judged.
    assert audit.check([sample(i, None) for i in range(8)]) is None
