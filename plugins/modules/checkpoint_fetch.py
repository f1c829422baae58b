#!/usr/bin/python
# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: checkpoint_fetch
short_description: Fetch a model checkpoint from the Hugging Face Hub or a mirror, resumably, once
version_added: "0.1.0"
description:
  - With O(source=hub), lists the repo at O(revision) with the real C(huggingface_hub)
    client (run by O(python), the stack's Python), checks the free disk against what is
    still missing plus O(headroom_gb) and refuses with the numbers, then downloads with
    C(snapshot_download) into O(path). A partial download resumes where it stopped.
  - With O(source=mirror), copies from O(mirror), C(host:/path) or C(rsync://...) with
    C(rsync --partial); a path on the node (an NFS mount) file by file, skipping files
    already there with the same size and mtime and resuming a shorter one.
  - Then checks that every file the source lists is present, has the right size, and has
    the sha256 the source gives (the Hub's LFS hashes, a mirror's own manifest). A file that
    fails is named. What was checked is recorded in C(.bwtune-checkpoint.json) in O(path) with each
    file's size and mtime, so a verified checkpoint is neither fetched nor hashed again.
options:
  path:
    description: The checkpoint directory on the node.
    type: path
    required: true
  source:
    description: Where the checkpoint comes from.
    type: str
    choices: [hub, mirror]
    required: true
  repo_id:
    description: The Hub repo (for O(source=hub)).
    type: str
  revision:
    description: The Hub revision; a 40-digit commit hash pins it.
    type: str
  allow_patterns:
    description: Only files matching these globs.
    type: list
    elements: str
  ignore_patterns:
    description: Leave out files matching these globs.
    type: list
    elements: str
  token:
    description: A Hugging Face token (passed as C(HF_TOKEN) in the environment, never logged).
    type: str
  endpoint:
    description: Another Hub endpoint (C(HF_ENDPOINT)); empty for huggingface.co.
    type: str
  cache_dir:
    description: C(HF_HOME) for the download (token, xet cache); keep it on local disk.
    type: path
  python:
    description: A Python with C(huggingface_hub) (the stack's).
    type: path
  max_workers:
    description: Files downloaded at once.
    type: int
    default: 8
  mirror:
    description: The mirror (for O(source=mirror)).
    type: str
  rsync:
    description: The rsync program.
    type: str
    default: rsync
  headroom_gb:
    description: Free disk to keep beyond the checkpoint.
    type: float
    default: 10
  hash_workers:
    description: Files hashed at once.
    type: int
    default: 4
author:
  - bwtune developers (@bwtune)
extends_documentation_fragment:
  - bwtune.sglang.attributes
attributes:
  check_mode:
    support: full
    details: Lists the source and checks the disk; fetches nothing.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Fetch Qwen3.5 NVFP4 at a pinned commit
  bwtune.sglang.checkpoint_fetch:
    source: hub
    repo_id: nvidia/Qwen3.5-397B-A17B-NVFP4
    revision: 0123456789abcdef0123456789abcdef01234567
    path: /models/Qwen3.5-397B-A17B-NVFP4
    python: /opt/bwtune/stacks/current/bin/python
    token: "{{ vault_hf_token }}"
  no_log: true
"""

RETURN = r"""
fetched:
  description: Whether files were fetched this time.
  type: bool
  returned: always
commit:
  description: The Hub commit fetched.
  type: str
  returned: when source is hub
files:
  description: How many files the source lists.
  type: int
  returned: always
verified:
  description: Whether every file the source lists is there, whole (false in check mode when a fetch is due).
  type: bool
  returned: always
hashed:
  description: Files whose sha256 was checked this time.
  type: list
  elements: str
  returned: always
disk:
  description: C({need_bytes, headroom_bytes, free_bytes, on}) before fetching.
  type: dict
  returned: always
"""

import os
import subprocess

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils._checkpoint import checkpoint_download as cf


def source_name(p):
    if p["source"] == "hub":
        return f"hub:{p['repo_id']}"
    return f"mirror:{p['mirror']}"


def list_hub(module, p, env):
    answer = cf.hub_call(
        p["python"],
        {
            "op": "list",
            "repo_id": p["repo_id"],
            "revision": p["revision"],
            "endpoint": p["endpoint"],
            "allow_patterns": p["allow_patterns"],
            "ignore_patterns": p["ignore_patterns"],
        },
        env,
        timeout=600,
    )
    files = {f["path"]: {"size": f["size"], "sha256": f["sha256"]} for f in answer["files"]}
    return answer["commit"], files


def list_mirror(module, p):
    """(None, {file: {size, sha256}}) from the mirror's manifest, else its listing (a local
    mirror), else (None, None): a remote mirror without a manifest, known after rsync."""
    mirror = p["mirror"]
    own = cf.mirror_manifest(mirror, p["rsync"])
    if own:
        return own.get("commit"), own["files"]
    if os.path.isdir(mirror):
        return None, cf.local_listing(mirror)
    return None, None


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "source": {"type": "str", "choices": ["hub", "mirror"], "required": True},
            "repo_id": {"type": "str"},
            "revision": {"type": "str"},
            "allow_patterns": {"type": "list", "elements": "str"},
            "ignore_patterns": {"type": "list", "elements": "str"},
            "token": {"type": "str", "no_log": True},
            "endpoint": {"type": "str"},
            "cache_dir": {"type": "path"},
            "python": {"type": "path"},
            "max_workers": {"type": "int", "default": 8},
            "mirror": {"type": "str"},
            "rsync": {"type": "str", "default": "rsync"},
            "headroom_gb": {"type": "float", "default": 10},
            "hash_workers": {"type": "int", "default": 4},
        },
        required_if=[("source", "hub", ("repo_id", "revision", "python")), ("source", "mirror", ("mirror",))],
        supports_check_mode=True,
    )
    p = module.params
    path = p["path"]
    env = dict(os.environ)
    env.pop("HF_HUB_OFFLINE", None)
    if p["token"]:
        env["HF_TOKEN"] = p["token"]
    if p["endpoint"]:
        env["HF_ENDPOINT"] = p["endpoint"]
    if p["cache_dir"]:
        env["HF_HOME"] = p["cache_dir"]
    headroom = int(p["headroom_gb"] * 1e9)
    try:
        if p["source"] == "hub":
            commit, files = list_hub(module, p, env)
        else:
            commit, files = list_mirror(module, p)
        previous = cf.read_manifest(path) or {}
        same_source = previous.get("source") == source_name(p) and previous.get("commit") == commit
        verified = (previous.get("verified") or {}) if same_source else {}
        known = files if files is not None else (previous.get("files") if same_source else None)
        whole = known is not None and cf.is_verified(path, known, verified)
        disk = cf.check_free_disk(path, cf.bytes_to_fetch(path, files) if files else 0, headroom)
        result = {"files": len(known or {}), "disk": disk, "hashed": [], "fetched": False, "verified": False}
        if commit:
            result["commit"] = commit
        if whole and known:
            result["verified"] = True
            module.exit_json(changed=False, **result)
        if module.check_mode:
            module.exit_json(changed=True, **result)
        os.makedirs(path, exist_ok=True)
        if p["source"] == "hub":
            cf.hub_call(
                p["python"],
                {
                    "op": "download",
                    "repo_id": p["repo_id"],
                    "revision": commit,
                    "endpoint": p["endpoint"],
                    "local_dir": path,
                    "cache_dir": os.path.join(p["cache_dir"], "hub") if p["cache_dir"] else None,
                    "allow_patterns": p["allow_patterns"],
                    "ignore_patterns": p["ignore_patterns"],
                    "max_workers": p["max_workers"],
                },
                env,
            )
        elif os.path.isdir(p["mirror"]):
            cf.copy_tree(p["mirror"], path, files)
        else:
            argv = cf.mirror_argv(p["mirror"], path, p["rsync"])
            try:
                done = subprocess.run(argv, capture_output=True, text=True, check=False)
            except FileNotFoundError:
                raise cf.FetchError(f"checkpoint_rsync: {p['rsync']} is not installed on this node") from None
            if done.returncode != 0:
                raise cf.FetchError(
                    f"rsync from {p['mirror']} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}"
                )
            if files is None:
                files = cf.local_listing(path)
        result["fetched"] = True
        problems, now, hashed = cf.check_files(path, files, verified, workers=p["hash_workers"])
        result["hashed"] = hashed
        result["files"] = len(files)
        if problems:
            module.fail_json(
                msg=f"checkpoint at {path} does not match {source_name(p)}: " + "; ".join(problems), **result
            )
        cf.write_manifest(
            path,
            {
                "schema": cf.MANIFEST_SCHEMA,
                "source": source_name(p),
                "commit": commit,
                "files": files,
                "verified": now,
            },
        )
    except cf.FetchError as exc:
        module.fail_json(msg=str(exc))
    result["verified"] = True
    module.exit_json(changed=True, **result)


if __name__ == "__main__":
    main()
