"""Results file durability: fsync'd appends, torn last lines, resume lookup, in-flight marker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_file import (
    ResultsFile,
    ResultsFileError,
)


def line(config_id: str, status: str = "ok", fp: str = "fp1", run: str = "r1") -> dict:
    """A whole results line (a resume counts only lines that are results)."""
    failure = None if status == "ok" else {"class": status, "message": "", "log_tail": []}
    return {
        "schema": 1,
        "run_id": run,
        "host": "h",
        "config_id": config_id,
        "flags": {},
        "metrics": {},
        "status": status,
        "stack_fingerprint": fp,
        "failure": failure,
    }


def test_append_then_read_back_in_order(tmp_path):
    rf = ResultsFile(str(tmp_path / "sub" / "results.jsonl"))
    assert rf.read() == []
    for i in range(3):
        rf.append(line(f"c{i}"))
    assert [r["config_id"] for r in rf.read()] == ["c0", "c1", "c2"]
    raw = (tmp_path / "sub" / "results.jsonl").read_text()
    assert raw.count("\n") == 3 and all(json.loads(x) for x in raw.splitlines())


def test_append_fsyncs_file_and_directory(tmp_path, monkeypatch):
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    path = tmp_path / "results.jsonl"
    ResultsFile(str(path)).append(line("c0"))
    assert synced == [str(path), str(tmp_path)]  # the file, then (new file) its directory
    synced.clear()
    ResultsFile(str(path)).append(line("c1"))
    assert synced == [str(path)]


def test_torn_last_line_is_skipped_and_cut_before_the_next_append(tmp_path):
    path = tmp_path / "results.jsonl"
    rf = ResultsFile(str(path))
    rf.append(line("c0"))
    rf.append(line("c1"))
    with open(path, "ab") as f:  # a kill in the middle of a write
        f.write(b'{"schema": 1, "config_id": "c2", "sta')
    assert [r["config_id"] for r in rf.read()] == ["c0", "c1"]
    rf.append(line("c3"))
    assert [r["config_id"] for r in rf.read()] == ["c0", "c1", "c3"]
    assert path.read_bytes().endswith(b"\n") and b"c2" not in path.read_bytes()


def test_a_whole_line_missing_only_its_newline_is_kept_by_reader_and_writer(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(line("c0")) + "\n" + json.dumps(line("c1")))  # killed before "\n"
    rf = ResultsFile(str(path))
    assert [r["config_id"] for r in rf.read()] == ["c0", "c1"]
    rf.append(line("c2"))
    assert [r["config_id"] for r in rf.read()] == ["c0", "c1", "c2"]


def test_torn_only_line_leaves_an_empty_file(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"config_id": "c0"')
    rf = ResultsFile(str(path))
    assert rf.read() == []
    rf.append(line("c1"))
    assert [r["config_id"] for r in rf.read()] == ["c1"]


def test_a_bad_line_in_the_middle_names_file_and_line(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(line("c0")) + "\nnot json\n" + json.dumps(line("c1")) + "\n")
    with pytest.raises(ResultsFileError, match=r"results\.jsonl:2: not a JSON line"):
        ResultsFile(str(path)).read()


def test_a_write_killed_mid_line_loses_only_that_line(tmp_path):
    """A real kill: a child appends lines and is SIGKILLed while writing a huge one."""
    path = tmp_path / "results.jsonl"
    code = textwrap.dedent(
        f"""
        import os, sys
        from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_file import ResultsFile
        rf = ResultsFile({str(path)!r})
        for i in range(5):
            rf.append(dict({line("c0", fp="fp")!r}, config_id="c%d" % i))
        fd = os.open({str(path)!r}, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b'{{"config_id": "c5", "pad": "' + b"x" * 100000)
        print("torn", flush=True)
        import time; time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "torn\n"
    proc.kill()
    proc.wait()
    rf = ResultsFile(str(path))
    assert [r["config_id"] for r in rf.read()] == [f"c{i}" for i in range(5)]
    rf.append(line("c6", fp="fp"))
    assert sorted(rf.measured("fp")) == ["c0", "c1", "c2", "c3", "c4", "c6"]


def test_resume_lookup_is_per_stack_and_skips_plan_rows(tmp_path):
    rf = ResultsFile(str(tmp_path / "results.jsonl"))
    rf.append(line("c0", "ok", fp="fp1"))
    rf.append(line("c1", "oom", fp="fp1"))
    rf.append(line("c2", "pruned", fp="fp1"))
    rf.append(line("c3", "ok", fp="fp2", run="r2"))
    rf.append(line("c0", "crashed", fp="fp1", run="r2"))  # a later measurement wins
    done = rf.measured("fp1")
    assert sorted(done) == ["c0", "c1"]
    assert done["c0"]["status"] == "crashed"
    assert rf.is_measured("c3", "fp2") and not rf.is_measured("c3", "fp1")
    assert rf.config_ids("r1") == {"c0", "c1", "c2"}
    assert rf.config_ids() == {"c0", "c1", "c2", "c3"}


def test_inflight_marker_round_trip(tmp_path):
    rf = ResultsFile(str(tmp_path / "results.jsonl"))
    assert rf.read_inflight() is None
    rf.mark_inflight({"pid": 123, "pgid": 123, "port": 30000, "config_id": "c0"})
    assert rf.read_inflight() == {"pid": 123, "pgid": 123, "port": 30000, "config_id": "c0"}
    assert rf.inflight_path == str(tmp_path / "results.jsonl.inflight.json")
    rf.mark_inflight({"pid": 124, "pgid": 124, "port": 30001, "config_id": "c1"})
    assert (rf.read_inflight() or {}).get("config_id") == "c1"
    assert [p.name for p in tmp_path.iterdir() if ".tmp." in p.name] == []
    rf.clear_inflight()
    assert rf.read_inflight() is None
    rf.clear_inflight()  # twice is fine
