# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Fetching a checkpoint onto a node: from the Hugging Face Hub or a fleet mirror.

The Hub side runs the real `huggingface_hub` client under the stack's Python (the node's
system Python need not have it): `HUB_SCRIPT` lists the repo at a pinned revision and
downloads with `snapshot_download` (partial files resume from
`<dir>/.cache/huggingface/download/*.incomplete`). The token travels in the environment
(`HF_TOKEN`), never in an argv.

What the source promised (each file's size, and its sha256 where the Hub gives one: LFS
files) is kept beside the checkpoint in `MANIFEST` with the (size, mtime) of each file
whose hash was checked, so a verified checkpoint is neither fetched nor hashed again;
checkpoint_info reads it to verify.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MANIFEST = ".bwtune-checkpoint.json"
MANIFEST_SCHEMA = 1
_HASH_BLOCK = 8 * 1024 * 1024

# Runs under the stack's Python: `python -c HUB_SCRIPT` with a JSON request on stdin, one
# JSON answer on stdout (the last line). `list`: {"commit", "files": [{path, size, sha256}]};
# `download`: {"path"}.
HUB_SCRIPT = r"""
import json, sys
req = json.loads(sys.stdin.read())
from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.utils import filter_repo_objects
endpoint = req.get("endpoint") or None
api = HfApi(endpoint=endpoint)
revision = req["revision"]
if req["op"] == "list":
    if len(revision) == 40 and all(c in "0123456789abcdef" for c in revision):
        commit = revision
    else:
        commit = api.repo_info(req["repo_id"], revision=revision).sha
    entries = [e for e in api.list_repo_tree(req["repo_id"], recursive=True, revision=commit)
               if hasattr(e, "size") and hasattr(e, "lfs")]
    keep = set(filter_repo_objects([e.path for e in entries], allow_patterns=req.get("allow_patterns"),
                                   ignore_patterns=req.get("ignore_patterns")))
    files = [{"path": e.path, "size": e.size, "sha256": e.lfs.sha256 if e.lfs else None}
             for e in entries if e.path in keep]
    print(json.dumps({"commit": commit, "files": files}))
else:
    path = snapshot_download(req["repo_id"], revision=revision, local_dir=req["local_dir"],
                             cache_dir=req.get("cache_dir") or None, allow_patterns=req.get("allow_patterns"),
                             ignore_patterns=req.get("ignore_patterns"),
                             max_workers=req.get("max_workers", 8), endpoint=endpoint)
    print(json.dumps({"path": str(path)}))
"""


class FetchError(RuntimeError):
    """A fetch that cannot go on; the message says what and where."""


def hub_call(python: str, request: dict[str, Any], env: dict[str, str], timeout: float | None = None) -> dict:
    """Run HUB_SCRIPT under `python`; its JSON answer, or FetchError with the error's last lines."""
    try:
        done = subprocess.run(
            [python, "-c", HUB_SCRIPT],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise FetchError(f"checkpoint_python: {python} does not exist") from None
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        tail = [line for line in done.stderr.splitlines() if line.strip()][-6:]
        raise FetchError(
            f"huggingface_hub {request['op']} failed (exit {done.returncode}): " + " | ".join(tail)
        )
    return json.loads(lines[-1])


# -- the manifest


def read_manifest(directory: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(directory, MANIFEST), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else None


def write_manifest(directory: str, manifest: dict[str, Any]) -> None:
    tmp = os.path.join(directory, MANIFEST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, os.path.join(directory, MANIFEST))


def stamp(path: str) -> dict[str, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            block = fh.read(_HASH_BLOCK)
            if not block:
                return h.hexdigest()
            h.update(block)


def is_verified(
    directory: str, files: dict[str, dict[str, Any]], verified: dict[str, dict[str, int]]
) -> bool:
    """Every file there with its size, and each hashed file unchanged since it was verified."""
    if not files:
        return False
    for name, want in files.items():
        st = stamp(os.path.join(directory, name))
        if st is None or (want.get("size") is not None and st["size"] != want["size"]):
            return False
        if want.get("sha256") and verified.get(name) != st:
            return False
    return True


def check_files(
    directory: str, files: dict[str, dict[str, Any]], verified: dict[str, dict[str, int]], workers: int = 4
) -> tuple[list[str], dict[str, dict[str, int]], list[str]]:
    """(problems naming each file, the verified stamps now, files hashed this time).

    A file is hashed only when the source gives a sha256 and its (size, mtime) differs from
    the stamp recorded when it was last verified.
    """
    problems: list[str] = []
    to_hash: list[str] = []
    now: dict[str, dict[str, int]] = {}
    for name in sorted(files):
        want = files[name]
        st = stamp(os.path.join(directory, name))
        if st is None:
            problems.append(f"{name}: missing")
        elif want.get("size") is not None and st["size"] != want["size"]:
            problems.append(f"{name}: {st['size']} bytes, the source has {want['size']}")
        elif not want.get("sha256"):
            continue
        elif verified.get(name) == st:
            now[name] = st
        else:
            to_hash.append(name)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:  # hashlib releases the GIL
        hashes = pool.map(lambda n: sha256_of(os.path.join(directory, n)), to_hash)
        digests = dict(zip(to_hash, hashes, strict=True))
    for name in to_hash:
        if digests[name] != files[name]["sha256"]:
            want = files[name]["sha256"]
            problems.append(
                f"{name}: sha256 {digests[name][:16]}... differs from the source's {want[:16]}..."
            )
        else:
            st = stamp(os.path.join(directory, name))
            if st is not None:
                now[name] = st
    return problems, now, to_hash


# -- free disk


def existing_parent(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def bytes_to_fetch(directory: str, files: dict[str, dict[str, Any]]) -> int:
    """What is still missing: each file's size less what is there already (partial downloads count)."""
    need = 0
    for name, want in files.items():
        size = int(want.get("size") or 0)
        st = stamp(os.path.join(directory, name))
        have = st["size"] if st and st["size"] <= size else 0
        need += size - have
    return need


def check_free_disk(directory: str, need: int, headroom: int) -> dict[str, Any]:
    """{"need", "headroom", "free", "on"}; FetchError with the numbers when it does not fit."""
    on = existing_parent(directory)
    free = shutil.disk_usage(on).free
    info = {"need_bytes": need, "headroom_bytes": headroom, "free_bytes": free, "on": on}
    if need and need + headroom > free:
        raise FetchError(
            f"not enough disk for the checkpoint at {directory}: needs {gb(need)} GB"
            f" + {gb(headroom)} GB headroom, {gb(free)} GB free on {on}"
        )
    return info


def gb(n: int) -> str:
    return f"{n / 1e9:.1f}"


# -- mirror


def mirror_argv(source: str, dest: str, rsync: str = "rsync") -> list[str]:
    """rsync from a mirror (`host:/path`, `rsync://host/module/path` or a local path), resumable."""
    return [
        rsync,
        "-a",
        "--partial",
        "--inplace",
        "--exclude",
        MANIFEST,
        source.rstrip("/") + "/",
        dest.rstrip("/") + "/",
    ]


def mirror_manifest(source: str, rsync: str = "rsync") -> dict[str, Any] | None:
    """The mirror's own manifest (sizes and sha256 of what it holds), when it has one."""
    if os.path.isdir(source):
        return read_manifest(source)
    with tempfile.TemporaryDirectory(prefix="bwtune-mirror-") as scratch:
        argv = [rsync, "-a", source.rstrip("/") + "/" + MANIFEST, os.path.join(scratch, MANIFEST)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise FetchError(f"checkpoint_rsync: {rsync} is not installed on this node") from None
        return read_manifest(scratch) if done.returncode == 0 else None


def copy_tree(
    source: str, dest: str, files: dict[str, dict[str, Any]], block: int = _HASH_BLOCK
) -> list[str]:
    """Copy `files` from a mirror directory on this node (an NFS mount, say) without rsync.

    A file already there with the source's size and mtime is skipped; a shorter one is
    resumed from where it stops (what `rsync --partial --append` does). Returns the copied files.
    """
    copied = []
    for name in sorted(files):
        src, dst = os.path.join(source, name), os.path.join(dest, name)
        src_st = os.stat(src)
        dst_st = stamp(dst)
        if dst_st == {"size": src_st.st_size, "mtime_ns": src_st.st_mtime_ns}:
            continue
        os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        start = dst_st["size"] if dst_st and dst_st["size"] < src_st.st_size else 0
        with open(src, "rb") as fin, open(dst, "r+b" if start else "wb") as fout:
            fin.seek(start)
            fout.seek(start)
            fout.truncate()
            while True:
                chunk = fin.read(block)
                if not chunk:
                    break
                fout.write(chunk)
            fout.flush()
            os.fsync(fout.fileno())
        os.utime(dst, ns=(src_st.st_atime_ns, src_st.st_mtime_ns))
        copied.append(name)
    return copied


def local_listing(directory: str) -> dict[str, dict[str, Any]]:
    """{relative path: {"size"}} of a directory (a mirror on this node)."""
    out: dict[str, dict[str, Any]] = {}
    for root, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if d != ".cache"]
        for name in names:
            if name == MANIFEST:
                continue
            full = os.path.join(root, name)
            out[os.path.relpath(full, directory)] = {"size": os.path.getsize(full), "sha256": None}
    return out
