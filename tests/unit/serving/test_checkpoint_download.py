"""checkpoint_download's checks (sizes, hashes, stamps, free disk) and checkpoint_info reading
its manifest."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._checkpoint import checkpoint_download as cf
from ansible_collections.bwtune.sglang.plugins.module_utils._checkpoint import checkpoint_info
from tests.fixtures.hub.make_repo import SHARDS, make_repo


def listing(d: Path) -> dict[str, dict]:
    return {
        name: {
            "size": (d / name).stat().st_size,
            "sha256": hashlib.sha256((d / name).read_bytes()).hexdigest(),
        }
        for name in SHARDS
    }


def test_whole_files_are_hashed_once_then_trusted_by_their_stamp(tmp_path: Path) -> None:
    d = make_repo(tmp_path / "m", shard_bytes=4096)
    files = listing(d)
    problems, verified, hashed = cf.check_files(str(d), files, {})
    assert problems == [] and hashed == sorted(SHARDS)
    assert cf.is_verified(str(d), files, verified)
    assert cf.check_files(str(d), files, verified)[2] == []  # nothing hashed again


def test_same_size_other_bytes_missing_and_short_files_are_named(tmp_path: Path) -> None:
    d = make_repo(tmp_path / "m", shard_bytes=4096)
    files = listing(d)
    _, verified, _ = cf.check_files(str(d), files, {})
    data = bytearray((d / SHARDS[0]).read_bytes())
    data[-1] ^= 0xFF
    (d / SHARDS[0]).write_bytes(bytes(data))
    os.utime(d / SHARDS[0], ns=(1, 1))  # a new stamp, as any write gives
    assert not cf.is_verified(str(d), files, verified)
    problems, _, hashed = cf.check_files(str(d), files, verified)
    assert hashed == [SHARDS[0]]
    assert len(problems) == 1 and problems[0].startswith(f"{SHARDS[0]}: sha256 ")
    (d / SHARDS[1]).unlink()
    assert f"{SHARDS[1]}: missing" in cf.check_files(str(d), files, verified)[0]
    (d / SHARDS[1]).write_bytes(b"x" * 10)
    assert (
        f"{SHARDS[1]}: 10 bytes, the source has {files[SHARDS[1]]['size']}"
        in cf.check_files(str(d), files, {})[0]
    )


def test_free_disk_counts_what_is_missing_and_names_the_numbers(tmp_path: Path) -> None:
    files = {"a": {"size": 1000}, "b": {"size": 500}}
    (tmp_path / "a").write_bytes(b"x" * 400)  # a partial file counts as started
    assert cf.bytes_to_fetch(str(tmp_path), files) == 600 + 500
    with pytest.raises(
        cf.FetchError, match=r"needs 0\.0 GB \+ 1000000000\.0 GB headroom, [\d.]+ GB free on /"
    ):
        cf.check_free_disk(str(tmp_path / "not" / "yet"), 1100, 10**18)
    assert cf.check_free_disk(str(tmp_path), 1100, 0)["on"] == str(tmp_path)


def test_checkpoint_facts_verify_against_the_manifest(tmp_path: Path) -> None:
    d = make_repo(tmp_path / "m", shard_bytes=4096)
    files = listing(d)
    cf.write_manifest(str(d), {"schema": 1, "source": "hub:x", "commit": "c", "files": files, "verified": {}})
    facts = checkpoint_info.gather(str(d))
    assert facts["complete"] and facts["source"]["hashed"] == sorted(SHARDS)
    (d / SHARDS[1]).write_bytes(os.urandom(files[SHARDS[1]]["size"]))  # headers gone, same size
    facts = checkpoint_info.gather(str(d))
    assert not facts["complete"]
    assert any(p.startswith(f"{SHARDS[1]}: sha256 ") for p in facts["problems"]), facts["problems"]


def test_mirror_argv_is_resumable_and_keeps_its_manifest_out() -> None:
    argv = cf.mirror_argv("mirror:/models/q", "/models/q")
    assert argv == [
        "rsync",
        "-a",
        "--partial",
        "--inplace",
        "--exclude",
        cf.MANIFEST,
        "mirror:/models/q/",
        "/models/q/",
    ]
