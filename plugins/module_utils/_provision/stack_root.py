# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Where built stacks live on a node, what names them, and how `current` moves.

Layout under the stack root (`bwtune_stack_root`, default /opt/bwtune/stacks):

    <root>/<fingerprint>/              one venv per stack (<fp>/bin/python)
    <root>/<fingerprint>/bwtune-stack.json   manifest: build inputs; "verified" once every check passed
    <root>/current -> <fingerprint>    relative symlink to the verified stack in use
    <root>/history.json                fingerprints in the order `current` pointed at them

The fingerprint is a short hash of the build inputs (torch version, SGLang commit, CUDA
version, Python version, CPU architecture, FlashInfer version, the sgl-kernel build
options): the same inputs give the same stack directory and the same wheel-cache key on
every host, so a second run finds its stack and wheels and builds nothing.
`current` moves only by `switch_current` (symlink under a temporary name, then rename(2):
readers see the old or the new stack, never neither) and only to a verified stack.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time

from ansible_collections.bwtune.sglang.plugins.module_utils._provision import torch_pin

FINGERPRINT_LEN = 12
MANIFEST = "bwtune-stack.json"
CURRENT = "current"
HISTORY = "history.json"
SCHEMA = 1

# Input name -> (pattern its value must match, what the pattern means). Options are separate.
_INPUT_RULES = {
    "torch_version": (
        r"^\d+\.\d+(\.\d+)?((a|b|rc)\d+)?(\.dev\d+)?(\+[A-Za-z0-9.]+)?$",
        "a PEP 440 version such as 2.12.0.dev20260307+cu130",
    ),
    "sglang_commit": (r"^[0-9a-f]{40}$", "a full 40-hex-digit git commit"),
    "cuda_version": (r"^\d+\.\d+$", "MAJOR.MINOR such as 13.0"),
    "python_version": (r"^3\.\d+$", "MAJOR.MINOR such as 3.11"),
    "arch": (r"^[A-Za-z0-9_]+$", "a CPU architecture such as x86_64 or aarch64"),
    "flashinfer_version": (
        r"^(|\d+\.\d+(\.\d+)?([a-z0-9.+]*))$",
        "a version such as 0.7.2, or empty for none",
    ),
}
INPUT_NAMES = (*_INPUT_RULES, "options")


class StackLayoutError(ValueError):
    """Bad build inputs, or a stack root in a state that forbids the operation."""


def validate_inputs(inputs: dict) -> dict:
    """Canonical copy of `inputs`; StackLayoutError naming the first bad value."""
    unknown = sorted(set(inputs) - set(INPUT_NAMES))
    if unknown:
        raise StackLayoutError(f"unknown build input {unknown[0]!r} (known: {', '.join(INPUT_NAMES)})")
    out: dict = {}
    for name, (pattern, meaning) in _INPUT_RULES.items():
        value = inputs.get(name)
        if value is None:
            raise StackLayoutError(f"build input {name} is missing ({meaning})")
        value = str(value)
        if not re.match(pattern, value):
            raise StackLayoutError(f"build input {name}={value!r} is not {meaning}")
        out[name] = value
    options = inputs.get("options") or {}
    if not isinstance(options, dict):
        raise StackLayoutError(f"build input options must be a mapping, got {type(options).__name__}")
    for key, value in options.items():
        if not isinstance(value, (str, int, float, bool, list)) or (
            isinstance(value, list) and not all(isinstance(v, (str, int)) for v in value)
        ):
            raise StackLayoutError(
                f"build option {key}={value!r} is not a string, number, bool or list of them"
            )
    out["options"] = {str(k): options[k] for k in sorted(options)}
    return out


def fingerprint(inputs: dict) -> str:
    """Short stable hash of validated build inputs (key order and types do not matter)."""
    canon = validate_inputs(inputs)
    blob = json.dumps({"schema": SCHEMA, **canon}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:FINGERPRINT_LEN]


def changed_inputs(old: dict | None, new: dict) -> list[str]:
    """Why a stack differs from another: ['sglang_commit: 1a2b3c4d5e6f -> 9f8e7d6c5b4a', ...]."""
    if not old:
        return ["no stack yet"]
    why = []
    for name in INPUT_NAMES:
        if name == "options":
            a, b = old.get("options") or {}, new.get("options") or {}
            for key in sorted(set(a) | set(b)):
                if a.get(key) != b.get(key):
                    why.append(f"option {key}: {_short(a.get(key))} -> {_short(b.get(key))}")
        elif old.get(name) != new.get(name):
            why.append(f"{name}: {_short(old.get(name))} -> {_short(new.get(name))}")
    return why


def _short(value: object) -> str:
    if value is None:
        return "unset"
    text = json.dumps(value) if not isinstance(value, str) else value
    return text[:12] if re.match(r"^[0-9a-f]{40}$", text) else text


def stack_dir(root: str, fp: str) -> str:
    if not re.match(r"^[0-9a-f]{%d}$" % FINGERPRINT_LEN, fp):
        raise StackLayoutError(f"{fp!r} is not a stack fingerprint ({FINGERPRINT_LEN} hex digits)")
    return os.path.join(root, fp)


def read_manifest(root: str, fp: str) -> dict | None:
    try:
        with open(os.path.join(stack_dir(root, fp), MANIFEST), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_verified(root: str, fp: str) -> bool:
    manifest = read_manifest(root, fp)
    return bool(manifest and manifest.get("verified") and manifest.get("fingerprint") == fp)


def _write_json(path: str, data: object) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_manifest(root: str, inputs: dict, verified: bool, checks: dict | None = None) -> bool:
    """Record a stack's inputs (and that it passed verification); True if the file changed."""
    canon = validate_inputs(inputs)
    fp = fingerprint(canon)
    data = {"schema": SCHEMA, "fingerprint": fp, "inputs": canon, "verified": bool(verified)}
    if checks is not None:
        data["checks"] = checks
    old = read_manifest(root, fp)
    if old is not None and {k: v for k, v in old.items() if k != "written"} == data:
        return False
    data["written"] = int(time.time())
    os.makedirs(stack_dir(root, fp), exist_ok=True)
    _write_json(os.path.join(stack_dir(root, fp), MANIFEST), data)
    return True


def current(root: str) -> str | None:
    """Fingerprint `current` points at, or None."""
    try:
        target = os.readlink(os.path.join(root, CURRENT))
    except OSError:
        return None
    return os.path.basename(target.rstrip("/")) or None


def history(root: str) -> list[str]:
    try:
        with open(os.path.join(root, HISTORY), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return []
    return [fp for fp in data if isinstance(fp, str)] if isinstance(data, list) else []


def switch_current(root: str, fp: str) -> str | None:
    """Point `current` at a verified stack atomically; returns the previous fingerprint.

    A no-op (returns fp) when `current` already points there.
    """
    if not is_verified(root, fp):
        raise StackLayoutError(f"stack {fp} under {root} is not verified; current stays at {current(root)}")
    previous = current(root)
    if previous == fp:
        return fp
    link = os.path.join(root, CURRENT)
    tmp = os.path.join(root, f".{CURRENT}.{os.getpid()}.tmp")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(fp, tmp)  # relative: the root can move or be bind-mounted elsewhere
    os.replace(tmp, link)
    hist = [h for h in history(root) if h != fp] + [fp]
    _write_json(os.path.join(root, HISTORY), hist)
    return previous


def rollback_target(root: str, to: str | None = None) -> str:
    """The stack a rollback moves `current` to: `to`, or the newest verified one before current."""
    cur = current(root)
    if to:
        if not is_verified(root, to):
            raise StackLayoutError(
                f"cannot roll back to {to}: no verified stack with that fingerprint under {root}"
            )
        return to
    for fp in reversed(history(root)):
        if fp != cur and is_verified(root, fp):
            return fp
    raise StackLayoutError(f"no earlier verified stack under {root} to roll back to (current: {cur})")


def stacks(root: str) -> list[str]:
    """Fingerprints of the stack directories under root (verified or not)."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    pattern = re.compile(r"^[0-9a-f]{%d}$" % FINGERPRINT_LEN)
    return sorted(n for n in names if pattern.match(n) and os.path.isdir(os.path.join(root, n)))


def prune_plan(root: str, keep: int, protect: tuple[str, ...] = ()) -> list[str]:
    """Stacks to delete so that `keep` verified stacks remain (current and `protect` always stay).

    Verified stacks are ranked by when `current` last pointed at them, never-current ones
    by their manifest's time; unverified ones (failed builds) go unless protected.
    """
    if keep < 1:
        raise StackLayoutError(f"keep must be at least 1, got {keep}")
    cur = current(root)
    hist = history(root)
    verified = [fp for fp in stacks(root) if is_verified(root, fp)]

    def rank(fp: str) -> tuple[int, int]:
        return (hist.index(fp) if fp in hist else -1, int((read_manifest(root, fp) or {}).get("written", 0)))

    kept = set(sorted(verified, key=rank, reverse=True)[:keep]) | {cur} | set(protect)
    return [fp for fp in stacks(root) if fp not in kept]


def in_use(root: str, proc: str = "/proc") -> dict[str, str]:
    """Stacks under root that running processes use: fingerprint -> why ("pid 812 (python3) maps ...").

    A process uses a stack when its executable, working directory, a mapped file (a
    loaded .so: the server's torch) or an absolute path in its command line lies in the
    stack's directory. The kernel resolves exe, cwd and maps to real paths (a server
    started through `current` shows the stack it was started from, even after `current`
    moved), so the root is compared as a real path too. Processes we may not read are
    skipped (run as root to see every one).
    """
    prefixes = {os.path.join(os.path.abspath(root), ""), os.path.join(os.path.realpath(root), "")}
    pattern = re.compile(r"^([0-9a-f]{%d})(/|$)" % FINGERPRINT_LEN)
    found: dict[str, str] = {}

    def owner(path: str) -> str | None:
        for prefix in prefixes:
            if path.startswith(prefix):
                hit = pattern.match(path[len(prefix) :])
                if hit:
                    return hit.group(1)
        return None

    try:
        pids = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return found
    for pid in pids:
        if int(pid) == os.getpid():
            continue
        base = os.path.join(proc, pid)
        try:
            with open(os.path.join(base, "comm"), encoding="utf-8", errors="replace") as fh:
                comm = fh.read().strip()
        except OSError:
            continue
        seen: list[tuple[str, str]] = []
        for link in ("exe", "cwd"):
            with contextlib.suppress(OSError):
                seen.append((link, os.readlink(os.path.join(base, link))))
        try:
            with open(os.path.join(base, "cmdline"), "rb") as raw:
                args = raw.read().decode("utf-8", "replace").split("\0")
            seen += [("runs", os.path.realpath(a)) for a in args if a.startswith("/")]
        except OSError:
            pass
        try:
            with open(os.path.join(base, "maps"), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    parts = line.split(None, 5)
                    if len(parts) == 6 and parts[5].startswith("/"):
                        path = parts[5].rstrip("\n")
                        if path.endswith(" (deleted)"):
                            path = path[: -len(" (deleted)")]
                        seen.append(("maps", path))
        except OSError:
            pass
        for what, path in seen:
            fp = owner(path)
            if fp and fp not in found:
                found[fp] = f"pid {pid} ({comm}) {what} {path}"
    return found


def disk_bytes(path: str) -> int:
    """Bytes a directory tree takes on disk (allocated blocks; links not followed)."""
    total = 0
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
    return total


def failed_stacks(root: str, protect: tuple[str, ...] = ()) -> list[str]:
    """Unverified stacks (failed or interrupted builds) that nothing needs: not current, not
    in `protect`, not used by a running process. Safe to delete before the next build.

    Only directories with a manifest count (state=building writes one before any build):
    other fingerprint-named directories (the sgl-kernel build's work dirs) are not stacks.
    """
    cur = current(root)
    candidates = [
        fp
        for fp in stacks(root)
        if fp != cur
        and fp not in protect
        and read_manifest(root, fp) is not None
        and not is_verified(root, fp)
    ]
    if not candidates:
        return []
    busy = in_use(root)
    return [fp for fp in candidates if fp not in busy]


def remove_failed(root: str, protect: tuple[str, ...] = ()) -> list[str]:
    """Delete failed_stacks(root, protect); the fingerprints deleted."""
    removed = failed_stacks(root, protect)
    for fp in removed:
        shutil.rmtree(stack_dir(root, fp))
    if removed:
        _write_json(os.path.join(root, HISTORY), [h for h in history(root) if h not in removed])
    return removed


def prune(
    root: str, keep: int, protect: tuple[str, ...] = (), kept: dict[str, str] | None = None
) -> list[str]:
    """Delete what prune_plan names, except stacks a running process uses (see in_use).

    `kept`, when given, receives fingerprint -> why for each stack spared that way.
    """
    plan = prune_plan(root, keep, protect)
    busy = in_use(root) if plan else {}
    spared = {fp: why for fp, why in busy.items() if fp in plan}
    if kept is not None:
        kept.update(spared)
    removed = [fp for fp in plan if fp not in spared]
    for fp in removed:
        shutil.rmtree(stack_dir(root, fp))
    if removed:
        _write_json(os.path.join(root, HISTORY), [h for h in history(root) if h not in removed])
    return removed


def facts_mismatches(inputs: dict, facts: dict) -> list[str]:
    """What the installed stack (stack_facts' bwtune_stack) says that the build inputs do not."""
    bad = []
    torch = facts.get("torch") or {}
    if not torch_pin.version_matches(torch.get("version"), str(inputs.get("torch_version") or "")):
        bad.append(f"torch is {torch.get('version')}, expected {inputs.get('torch_version')}")
    sglang = facts.get("sglang") or {}
    if not sglang.get("installed"):
        bad.append("sglang is not installed")
    elif sglang.get("git_commit") and sglang["git_commit"] != inputs.get("sglang_commit"):
        bad.append(f"sglang is from commit {sglang['git_commit']}, expected {inputs.get('sglang_commit')}")
    if not (facts.get("sgl_kernel") or {}).get("installed"):
        bad.append("sgl_kernel is not installed")
    want_fi = inputs.get("flashinfer_version") or None
    have_fi = (facts.get("flashinfer") or {}).get("version")
    if want_fi and have_fi != want_fi:
        bad.append(f"flashinfer is {have_fi}, expected {want_fi}")
    python = facts.get("python_version") or ""
    if python and ".".join(python.split(".")[:2]) != inputs.get("python_version"):
        bad.append(f"python is {python}, expected {inputs.get('python_version')}")
    return bad
