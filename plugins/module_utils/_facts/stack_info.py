# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Software-stack facts: what a stack venv's Python has (torch, sgl_kernel, FlashInfer, SGLang).

The stack's interpreter runs PROBE (argv list, no shell) and prints one JSON object; this
side reads sgl_kernel's shared libraries for their GPU targets (fatbin.py), and folds it all
into the bwtune_stack facts with a short stable fingerprint. Layout: docs/facts.md.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from collections.abc import Callable

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import fatbin

SCHEMA = 1
FINGERPRINT_LEN = 12

# sgl_kernel's NVFP4 entry points (Python wrappers and torch.ops names).
FP4_OPS = ("scaled_fp4_quant", "cutlass_scaled_fp4_mm", "scaled_fp4_experts_quant", "cutlass_fp4_group_mm")

# Runs under the stack's Python (any 3.8+). Prints one JSON object on stdout; every part
# that fails records its error instead of stopping the rest.
PROBE = r"""
import json, os, sys
out = {"python": {"version": sys.version.split()[0], "executable": sys.executable}}
def dist_version(*names):
    try:
        from importlib import metadata
    except ImportError:
        return None, None
    for n in names:
        try:
            return metadata.version(n), n
        except Exception:
            pass
    return None, None
def direct_url(dist):
    try:
        from importlib import metadata
        return json.loads(metadata.distribution(dist).read_text("direct_url.json") or "null")
    except Exception:
        return None
def pkg_dir(mod):
    try:
        import importlib.util
        spec = importlib.util.find_spec(mod)
    except Exception:
        return None
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(spec.origin)
def err(e):
    return "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")

t = {}
t["version"], _ = dist_version("torch")
try:
    import torch
    t["version"] = torch.__version__
    t["cuda"] = torch.version.cuda
    try:
        t["arch_list"] = torch._C._cuda_getArchFlags().split() if torch.version.cuda else []
    except Exception:
        t["arch_list"] = torch.cuda.get_arch_list()
    t["cuda_available"] = bool(torch.cuda.is_available())
    t["device_count"] = torch.cuda.device_count() if t["cuda_available"] else 0
    t["capabilities"] = ["%d.%d" % torch.cuda.get_device_capability(i) for i in range(t["device_count"])]
except Exception as e:
    t["error"] = err(e)
out["torch"] = t

k = {}
k["version"], k["dist"] = dist_version("sglang-kernel", "sgl-kernel", "sgl_kernel")
k["path"] = pkg_dir("sgl_kernel")
if k["path"]:
    try:
        import sgl_kernel
        k["imported"] = True
        ops = getattr(getattr(__import__("torch"), "ops", None), "sgl_kernel", None)
        names = __FP4_OPS__
        k["fp4_ops"] = sorted(
            n for n in names if hasattr(sgl_kernel, n) or (ops is not None and hasattr(ops, n)))
    except Exception as e:
        k["imported"] = False
        k["import_error"] = err(e)
out["sgl_kernel"] = k

f = {}
f["version"], f["dist"] = dist_version("flashinfer-python", "flashinfer")
f["path"] = pkg_dir("flashinfer")
out["flashinfer"] = f

s = {}
s["version"], _ = dist_version("sglang")
s["path"] = pkg_dir("sglang")
s["direct_url"] = direct_url("sglang")
if s["path"]:
    try:
        import argparse
        from sglang.srt.server_args import ServerArgs
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        flags = {}
        for a in parser._actions:
            longs = [o for o in a.option_strings if o.startswith("--")]
            if not longs or a.dest == "help":
                continue
            name = longs[0][2:]
            flags[name] = {
                "dest": a.dest,
                "choices": sorted(str(c) for c in a.choices) if a.choices is not None else None,
                "aliases": [o.lstrip("-") for o in a.option_strings if o != longs[0]],
                "takes_value": a.nargs != 0,
            }
        s["flags"] = flags
    except Exception as e:
        s["flags_error"] = err(e)
out["sglang"] = s
sys.stdout.write(json.dumps(out, sort_keys=True, default=str))
""".replace("__FP4_OPS__", repr(FP4_OPS))

Runner = Callable[[list[str]], tuple[int, str, str]]


class StackFactsError(ValueError):
    """The stack's Python could not be run or gave no usable answer."""


def probe_argv(python: str) -> list[str]:
    return [python, "-c", PROBE]


def run_probe(run: Runner, python: str) -> dict:
    rc, out, err = run(probe_argv(python))
    if rc != 0:
        last = (err.strip().splitlines() or [f"exit status {rc}"])[-1]
        raise StackFactsError(f"probe with {python} failed (exit {rc}): {last}")
    try:
        data = json.loads(out)
    except ValueError as exc:
        raise StackFactsError(f"probe with {python} printed no JSON: {out[:200]!r}") from exc
    if not isinstance(data, dict):
        raise StackFactsError(f"probe with {python} printed {type(data).__name__}, not an object")
    return data


def _git_head(start: str | None, levels: int = 3) -> str | None:
    """Commit of the git checkout holding `start` (a .git at most `levels` up), read without git.

    A package inside site-packages is an installed copy, never a checkout, whatever repository
    the venv itself happens to sit in.
    """
    if not start:
        return None
    path = os.path.abspath(start)
    if {"site-packages", "dist-packages"} & set(path.split(os.sep)):
        return None
    for _level in range(levels + 1):
        dotgit = os.path.join(path, ".git")
        if os.path.isfile(dotgit):  # worktree or submodule: "gitdir: <path>"
            with open(dotgit, encoding="utf-8") as fh:
                line = fh.read().strip()
            if line.startswith("gitdir:"):
                dotgit = os.path.join(path, line.split(":", 1)[1].strip())
        if os.path.isdir(dotgit):
            return _resolve_head(dotgit)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return None


def _resolve_head(gitdir: str) -> str | None:
    try:
        with open(os.path.join(gitdir, "HEAD"), encoding="utf-8") as fh:
            head = fh.read().strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head or None
    ref = head.split(":", 1)[1].strip()
    commondir = gitdir
    common_file = os.path.join(gitdir, "commondir")
    if os.path.isfile(common_file):
        with open(common_file, encoding="utf-8") as fh:
            commondir = os.path.normpath(os.path.join(gitdir, fh.read().strip()))
    for base in (gitdir, commondir):
        try:
            with open(os.path.join(base, ref), encoding="utf-8") as fh:
                return fh.read().strip()
        except OSError:
            pass
        try:
            with open(os.path.join(base, "packed-refs"), encoding="utf-8") as fh:
                for line in fh:
                    parts = line.split()
                    if len(parts) == 2 and parts[1] == ref:
                        return parts[0]
        except OSError:
            pass
    return None


def sglang_commit(sglang: dict) -> tuple[str | None, str | None]:
    """(commit, where it came from) for an SGLang from a git checkout or a pip VCS install."""
    vcs = ((sglang.get("direct_url") or {}).get("vcs_info")) or {}
    if vcs.get("commit_id"):
        return vcs["commit_id"], "direct_url.json"
    commit = _git_head(sglang.get("path"))
    if commit:
        return commit, "git checkout"
    url = (sglang.get("direct_url") or {}).get("url", "")
    if url.startswith("file://"):
        commit = _git_head(url[len("file://") :])
        if commit:
            return commit, "git checkout"
    return None, None


def fp4_ops_in_binaries(root: str, libraries: list[str]) -> list[str]:
    """FP4 op names found as strings in sgl_kernel's libraries (when it cannot be imported)."""
    found: set[str] = set()
    for rel in libraries:
        try:
            with (
                open(os.path.join(root, rel), "rb") as fh,
                mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m,
            ):
                found.update(op for op in FP4_OPS if m.find(op.encode()) != -1)
        except (OSError, ValueError):
            continue
    return sorted(found)


def _flags_digest(flags: dict | None) -> str | None:
    if not flags:
        return None
    canon = {name: spec.get("choices") for name, spec in sorted(flags.items())}
    return hashlib.sha256(json.dumps(canon, sort_keys=True).encode()).hexdigest()[:16]


def fingerprint(facts: dict) -> str:
    """Short stable hash of what decides behaviour and speed: versions, targets, flags, driver."""
    key = {
        "driver": facts.get("driver_version"),
        "torch": [facts["torch"].get(k) for k in ("version", "cuda")] + [facts["torch"].get("arch_list")],
        "sgl_kernel": [
            facts["sgl_kernel"].get("version"),
            facts["sgl_kernel"].get("sm_targets"),
            facts["sgl_kernel"].get("fp4_ops"),
        ],
        "flashinfer": facts["flashinfer"].get("version"),
        "sglang": [
            facts["sglang"].get("version"),
            facts["sglang"].get("git_commit"),
            facts["sglang"].get("flags_digest"),
        ],
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:FINGERPRINT_LEN]


# The provision playbook's stack directories: bwtune_stack_root/<12 hex digits>/ holding this
# manifest (stack_root.py; not imported here: this module must stay importable alone).
STACK_MANIFEST = "bwtune-stack.json"


def build_fingerprint(python: str) -> str | None:
    """The provision playbook's name for the stack `python` lives in, else None.

    That name (`bwtune provision`'s "stack a400606c593d") hashes the build inputs (the torch
    pin, SGLang commit, CUDA, Python, CPU architecture, FlashInfer, sgl-kernel options); the
    facts' `fingerprint` hashes what is installed and the driver (the sweep-group key). A
    `current` link is followed: the answer is the directory it points at.
    """
    venv = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(python))))
    name = os.path.basename(venv)
    hexname = len(name) == 12 and all(c in "0123456789abcdef" for c in name)
    return name if hexname and os.path.isfile(os.path.join(venv, STACK_MANIFEST)) else None


def build_facts(
    probe: dict, python: str, driver_version: str | None = None, include_flags: bool = True
) -> dict:
    """Probe output (+ reading sgl_kernel's libraries) -> the bwtune_stack facts dict."""
    warnings: list[str] = []
    torch = dict(probe.get("torch") or {})
    torch.setdefault("version", None)
    for key, default in (("cuda", None), ("arch_list", []), ("cuda_available", False), ("device_count", 0)):
        torch.setdefault(key, default)

    kernel = dict(probe.get("sgl_kernel") or {})
    kernel.setdefault("version", None)
    kernel["installed"] = bool(kernel.get("path"))
    kernel["sm_targets"], kernel["ptx_targets"], kernel["libraries"] = [], [], {}
    if kernel["installed"]:
        targets = fatbin.package_targets(kernel["path"])
        kernel["sm_targets"], kernel["ptx_targets"] = targets["sm"], targets["ptx"]
        kernel["libraries"] = {rel: lib["sm"] + lib["ptx"] for rel, lib in targets["libraries"].items()}
        for rel, msg in targets["errors"].items():
            warnings.append(f"sgl_kernel library {rel}: {msg}")
        if "fp4_ops" not in kernel:
            kernel["fp4_ops"] = fp4_ops_in_binaries(kernel["path"], list(targets["libraries"]))
            kernel["fp4_ops_source"] = "library strings"
        else:
            kernel["fp4_ops_source"] = "import"
        if kernel.get("import_error"):
            warnings.append(f"sgl_kernel does not import: {kernel['import_error']}")
    kernel.setdefault("fp4_ops", [])
    kernel["fp4"] = bool(kernel["fp4_ops"])
    kernel["sm120a"] = "sm_120a" in kernel["sm_targets"]
    kernel["sm100a"] = "sm_100a" in kernel["sm_targets"]

    flashinfer = dict(probe.get("flashinfer") or {})
    flashinfer.setdefault("version", None)
    flashinfer["installed"] = bool(flashinfer.get("path") or flashinfer.get("version"))

    sglang = dict(probe.get("sglang") or {})
    sglang.setdefault("version", None)
    sglang["installed"] = bool(sglang.get("path"))
    sglang["git_commit"], sglang["git_commit_source"] = sglang_commit(sglang)
    sglang.pop("direct_url", None)
    flags = sglang.pop("flags", None)
    sglang["flag_count"] = len(flags) if flags else 0
    sglang["flags_digest"] = _flags_digest(flags)
    if include_flags:
        sglang["flags"] = flags
    if sglang["installed"] and not flags:
        warnings.append(
            f"SGLang's argument parser could not be read: {sglang.get('flags_error', 'no flags')}"
        )
    if torch.get("error"):
        warnings.append(f"torch does not import: {torch['error']}")

    facts = {
        "schema": SCHEMA,
        "python": python,
        "python_version": (probe.get("python") or {}).get("version"),
        "driver_version": driver_version,
        "torch": torch,
        "sgl_kernel": kernel,
        "flashinfer": flashinfer,
        "sglang": sglang,
        "warnings": warnings,
    }
    facts["fingerprint"] = fingerprint(facts)
    # Not part of the fingerprint above: the same installed stack hashes the same wherever it is.
    facts["build_fingerprint"] = build_fingerprint(python)
    return facts


def driver_version(run: Runner, nvidia_smi: str | None) -> str | None:
    if not nvidia_smi:
        return None
    rc, out, _err = run([nvidia_smi, "--query-gpu=driver_version", "--format=csv,noheader"])
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[0] if rc == 0 and lines else None


def gather(
    run: Runner, python: str, nvidia_smi: str | None, driver: str | None = None, include_flags: bool = True
) -> dict:
    """Probe `python` and build the facts; `driver` overrides asking nvidia-smi."""
    probe = run_probe(run, python)
    return build_facts(probe, python, driver or driver_version(run, nvidia_smi), include_flags)


# The stack components a results line records (its `stack`, beside the stack's `fingerprint`)
# and that a regression's attribution names, in this order, with the words a user reads:
# declared once here; `components` fills them, bwtune.regression reads them (issue 22).
COMPONENTS = (
    ("torch", "torch"),
    ("cuda", "CUDA (torch build)"),
    ("sglang", "SGLang version"),
    ("sglang_commit", "SGLang commit"),
    ("sgl_kernel", "sgl-kernel"),
    ("sgl_kernel_build", "sgl-kernel build (GPU targets, FP4 ops)"),
    ("flashinfer", "FlashInfer"),
    ("driver", "NVIDIA driver"),
)
COMPONENT_KEYS = tuple(key for key, _name in COMPONENTS)


def components(facts: dict | None) -> dict | None:
    """The stack's components, one short value each, as a results line records them (`stack`),
    so a regression can name what changed between two runs. None without facts."""
    if not facts or not facts.get("fingerprint"):
        return None
    torch = facts.get("torch") or {}
    kernel = facts.get("sgl_kernel") or {}
    sglang = facts.get("sglang") or {}
    build = None
    if kernel.get("version"):
        # What decides the kernels' speed besides the version: the GPU targets and FP4 ops built.
        build = "%s; fp4 ops: %s" % (
            " ".join(kernel.get("sm_targets") or []) or "no sm targets",
            ",".join(kernel.get("fp4_ops") or []) or "none",
        )
    values = {
        "torch": torch.get("version"),
        "cuda": torch.get("cuda"),
        "sglang": sglang.get("version"),
        "sglang_commit": sglang.get("git_commit"),
        "sgl_kernel": kernel.get("version"),
        "sgl_kernel_build": build,
        "flashinfer": (facts.get("flashinfer") or {}).get("version"),
        "driver": facts.get("driver_version"),
    }
    # Every declared component, in COMPONENTS' order (a test holds `values` to it).
    return {"fingerprint": facts.get("fingerprint"), **{key: values[key] for key in COMPONENT_KEYS}}
