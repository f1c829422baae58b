"""stack_root (the layout behind the stack_layout module): fingerprint of build inputs, atomic
`current`, keep-N pruning, rollback."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._provision import stack_root as sl

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40


def inputs(**over: object) -> dict:
    base: dict = {
        "torch_version": "2.12.0.dev20260307+cu130",
        "sglang_commit": COMMIT_A,
        "cuda_version": "13.0",
        "python_version": "3.12",
        "arch": "x86_64",
        "flashinfer_version": "0.7.2",
        "options": {"enable_fp4": True, "enable_sm100a": False, "cmake_args": []},
    }
    base.update(over)
    return base


def make_stack(root: Path, verified: bool = True, **over: object) -> str:
    sl.write_manifest(str(root), inputs(**over), verified=verified)
    return sl.fingerprint(inputs(**over))


def test_fingerprint_is_stable_and_moves_with_every_input() -> None:
    fp = sl.fingerprint(inputs())
    assert len(fp) == sl.FINGERPRINT_LEN and int(fp, 16) >= 0
    reordered = dict(reversed(list(inputs().items())))
    reordered["options"] = dict(reversed(list(inputs()["options"].items())))
    assert sl.fingerprint(reordered) == fp
    variants = [
        inputs(torch_version="2.12.0.dev20260308+cu130"),
        inputs(sglang_commit=COMMIT_B),
        inputs(cuda_version="12.9"),
        inputs(python_version="3.11"),
        inputs(arch="aarch64"),
        inputs(flashinfer_version="0.7.3"),
        inputs(options={"enable_fp4": False, "enable_sm100a": False, "cmake_args": []}),
        inputs(options={"enable_fp4": True, "enable_sm100a": False, "cmake_args": ["-DX=1"]}),
    ]
    fps = {sl.fingerprint(v) for v in variants}
    assert fp not in fps and len(fps) == len(variants)


@pytest.mark.parametrize(
    ("over", "message"),
    [
        (
            {"torch_version": "2.12-nightly"},
            "build input torch_version='2.12-nightly' is not a PEP 440 version",
        ),
        ({"sglang_commit": "main"}, "build input sglang_commit='main' is not a full 40-hex-digit git commit"),
        ({"cuda_version": "13"}, "build input cuda_version='13' is not MAJOR.MINOR"),
        ({"arch": "x86 64"}, "build input arch='x86 64' is not a CPU architecture"),
        ({"colour": "red"}, "unknown build input 'colour'"),
        ({"options": {"x": {"nested": 1}}}, "build option x={'nested': 1} is not"),
    ],
)
def test_bad_inputs_name_the_value(over: dict, message: str) -> None:
    with pytest.raises(sl.StackLayoutError) as err:
        sl.fingerprint(inputs(**over))
    assert str(err.value).startswith(message)


def test_missing_input_is_named() -> None:
    bad = inputs()
    del bad["cuda_version"]
    with pytest.raises(sl.StackLayoutError, match="build input cuda_version is missing"):
        sl.fingerprint(bad)


def test_changed_inputs_say_why() -> None:
    old = sl.validate_inputs(inputs())
    new = sl.validate_inputs(
        inputs(
            sglang_commit=COMMIT_B, options={"enable_fp4": False, "enable_sm100a": False, "cmake_args": []}
        )
    )
    assert sl.changed_inputs(old, new) == [
        "sglang_commit: aaaaaaaaaaaa -> bbbbbbbbbbbb",
        "option enable_fp4: true -> false",
    ]
    assert sl.changed_inputs(None, new) == ["no stack yet"]
    assert sl.changed_inputs(new, new) == []


def test_switch_current_only_to_verified_and_atomic(tmp_path: Path) -> None:
    root = tmp_path
    good = make_stack(root)
    bad = make_stack(root, verified=False, sglang_commit=COMMIT_B)
    assert sl.current(str(root)) is None
    assert sl.switch_current(str(root), good) is None
    assert os.readlink(root / "current") == good  # relative
    assert (root / "current" / sl.MANIFEST).is_file()
    with pytest.raises(sl.StackLayoutError, match=f"stack {bad} .* is not verified; current stays at {good}"):
        sl.switch_current(str(root), bad)
    assert sl.current(str(root)) == good
    assert sl.switch_current(str(root), good) == good  # no-op
    assert sl.history(str(root)) == [good]
    assert not [p for p in os.listdir(root) if p.endswith(".tmp")]


def test_current_is_never_missing_while_it_moves(tmp_path: Path) -> None:
    root = str(tmp_path)
    a = make_stack(tmp_path)
    b = make_stack(tmp_path, sglang_commit=COMMIT_B)
    sl.switch_current(root, a)
    seen_missing = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if sl.current(root) is None:
                seen_missing.append(1)

    t = threading.Thread(target=watch)
    t.start()
    for _ in range(300):
        sl.switch_current(root, b)
        sl.switch_current(root, a)
    stop.set()
    t.join()
    assert seen_missing == []


def test_rollback_goes_to_previous_verified_stack(tmp_path: Path) -> None:
    root = str(tmp_path)
    a = make_stack(tmp_path)
    b = make_stack(tmp_path, sglang_commit=COMMIT_B)
    with pytest.raises(sl.StackLayoutError, match="no earlier verified stack"):
        sl.rollback_target(root)
    sl.switch_current(root, a)
    sl.switch_current(root, b)
    assert sl.rollback_target(root) == a
    sl.switch_current(root, sl.rollback_target(root))
    assert sl.current(root) == a
    assert sl.rollback_target(root, to=b) == b
    with pytest.raises(sl.StackLayoutError, match="cannot roll back to 0123456789ab"):
        sl.rollback_target(root, to="0123456789ab")


def test_prune_keeps_last_n_verified_and_current_and_drops_failed(tmp_path: Path) -> None:
    root = str(tmp_path)
    fps = [make_stack(tmp_path, torch_version=f"2.12.0.dev2026030{i}+cu130") for i in range(1, 5)]
    failed = make_stack(tmp_path, verified=False, sglang_commit=COMMIT_B)
    for fp in fps:
        sl.switch_current(root, fp)
    sl.switch_current(root, fps[0])  # rolled back to the oldest: now the most recent current
    removed = sl.prune(root, keep=2)
    assert sorted(removed) == sorted([fps[1], fps[2], failed])
    assert sorted(sl.stacks(root)) == sorted([fps[0], fps[3]])
    assert sl.history(root) == [fps[3], fps[0]]
    assert sl.prune(root, keep=2) == []
    # keep=1 keeps only the stack in use
    sl.switch_current(root, fps[3])
    sl.switch_current(root, fps[0])
    assert sl.prune_plan(root, keep=1) == [fps[3]]
    # protect: a stack being built is never pruned
    building = make_stack(tmp_path, verified=False, cuda_version="12.9")
    assert building not in sl.prune_plan(root, keep=1, protect=(building,))
    with pytest.raises(sl.StackLayoutError, match="keep must be at least 1, got 0"):
        sl.prune_plan(root, keep=0)


def test_write_manifest_reports_change_only_when_content_changes(tmp_path: Path) -> None:
    root = str(tmp_path)
    assert sl.write_manifest(root, inputs(), verified=False) is True
    assert sl.write_manifest(root, inputs(), verified=False) is False
    assert sl.write_manifest(root, inputs(), verified=True) is True
    fp = sl.fingerprint(inputs())
    assert sl.is_verified(root, fp)
    assert sl.read_manifest(root, fp)["inputs"]["sglang_commit"] == COMMIT_A


def test_facts_mismatches_name_each_difference() -> None:
    facts = {
        "python_version": "3.11.2",
        "torch": {"version": "2.13.0+cpu"},
        "sgl_kernel": {"installed": True},
        "flashinfer": {"version": "0.7.1"},
        "sglang": {"installed": True, "git_commit": COMMIT_B},
    }
    assert sl.facts_mismatches(sl.validate_inputs(inputs()), facts) == [
        "torch is 2.13.0+cpu, expected 2.12.0.dev20260307+cu130",
        f"sglang is from commit {COMMIT_B}, expected {COMMIT_A}",
        "flashinfer is 0.7.1, expected 0.7.2",
        "python is 3.11.2, expected 3.12",
    ]
    good = {
        "python_version": "3.12.3",
        "torch": {"version": "2.12.0.dev20260307+cu130"},
        "sgl_kernel": {"installed": True},
        "flashinfer": {"version": "0.7.2"},
        "sglang": {"installed": True, "git_commit": COMMIT_A},
    }
    assert sl.facts_mismatches(sl.validate_inputs(inputs()), good) == []


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Until the child wrote `path` (it is ready), or it died."""
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"helper process exited {proc.returncode}")
        time.sleep(0.01)


def test_prune_never_deletes_a_stack_a_running_process_uses(tmp_path: Path) -> None:
    root = tmp_path / "stacks"
    root.mkdir()
    fps = [make_stack(root, torch_version=f"2.12.0.dev2026030{i}+cu130") for i in range(1, 5)]
    for fp in fps:
        sl.switch_current(str(root), fp)
    # A "server" started through `current` when it pointed at fps[0]: it maps a library of
    # that stack (as a server maps torch's .so) and works elsewhere.
    lib = root / "current" / "lib.so"
    sl.switch_current(str(root), fps[0])
    lib.write_bytes(b"\0" * 4096)
    sl.switch_current(str(root), fps[3])
    ready = tmp_path / "ready"
    code = (
        "import mmap, sys, time\n"
        f"f = open({str(root / fps[0] / 'lib.so')!r}, 'rb')\n"
        "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "time.sleep(120)\n"
    )
    server = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path)
    # Another one whose working directory is a stack (fps[1]).
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], cwd=root / fps[1])
    try:
        _wait_for(ready, server)
        busy = sl.in_use(str(root))
        assert busy[fps[0]].startswith(f"pid {server.pid} (") and " maps " in busy[fps[0]]
        assert busy[fps[1]].startswith(f"pid {other.pid} (") and " cwd " in busy[fps[1]]
        kept: dict[str, str] = {}
        removed = sl.prune(str(root), keep=1, kept=kept)
        assert removed == [fps[2]]
        assert sorted(kept) == sorted([fps[0], fps[1]])
        assert sorted(sl.stacks(str(root))) == sorted([fps[0], fps[1], fps[3]])
    finally:
        for proc in (server, other):
            proc.kill()
            proc.wait()
    # Once nothing uses them, the next prune takes them.
    assert sorted(sl.prune(str(root), keep=1)) == sorted([fps[0], fps[1]])
