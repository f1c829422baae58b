"""Signing a recipe with OpenSSH (`ssh-keygen -Y sign` / `-Y verify`, namespace bwtune-recipe).

What is signed is a small manifest, not the file's bytes alone: the recipe's sha256 and the
sha256 of each top-level field's canonical JSON. `FILE.sig` holds the manifest (one JSON
line) and the armored SSH signature of exactly those bytes. Verifying checks the signature
against an allowed-signers file (ssh-keygen's format), then the file against the manifest,
so a file changed after signing fails and, when it still parses, the fields that changed
are named. `ssh-keygen -Y verify -f ALLOWED -I ID -n bwtune-recipe -s SIG < MANIFEST` is
the same check by hand (docs/recipes.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bwtune.recipes import recipe_file

NAMESPACE = "bwtune-recipe"
SIG_FORMAT = "bwtune-recipe-signature/1"
TIMEOUT_S = 30


class SigningError(ValueError):
    """One line: the key, file or tool that is wrong, and where."""


@dataclass
class Verification:
    ok: bool
    message: str
    identity: str | None = None
    changed: list[str] = field(default_factory=list)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest(data: bytes) -> dict[str, Any]:
    """What is signed for the recipe file whose bytes are `data`."""
    try:
        recipe = json.loads(data)
    except ValueError as exc:
        raise SigningError(f"not JSON ({exc})") from None
    except RecursionError:
        raise SigningError("not JSON a recipe can be: nested too deep") from None
    if not isinstance(recipe, Mapping):
        raise SigningError("not a JSON object")
    return {
        "format": SIG_FORMAT,
        "namespace": NAMESPACE,
        "sha256": _sha256(data),
        "fields": {key: _sha256(recipe_file.canonical(value)) for key, value in sorted(recipe.items())},
    }


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if not found:
        raise SigningError("ssh-keygen is not installed here (OpenSSH 8.2 or later signs and verifies)")
    return found


def _run(argv: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise SigningError(f"{argv[0]} did not finish in {TIMEOUT_S} s (a key with a passphrase?)") from None


def _tool_line(result: subprocess.CompletedProcess[bytes]) -> str:
    text = (result.stderr or result.stdout or b"").decode("utf-8", "replace").strip().splitlines()
    return text[-1] if text else f"exit {result.returncode}"


def sign(path: str, key: str, key_flag: str = "--key") -> str:
    """Sign the recipe at `path` with the SSH private key `key` (given as `key_flag`, which
    the messages name); the signature file's path."""
    try:
        recipe_file.load(path)  # first: it refuses a file too large to be a recipe unread
    except recipe_file.RecipeError as exc:
        raise SigningError(str(exc)) from None
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise SigningError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if not os.path.isfile(key):
        raise SigningError(f"{key_flag} {key}: no such key file")
    body = recipe_file.canonical(manifest(data))
    with tempfile.TemporaryDirectory(prefix="bwtune-sign-") as tmp:
        message = os.path.join(tmp, "manifest.json")
        with open(message, "wb") as handle:
            handle.write(body)
        # -q: no "Signing file" chatter. The passphrase, if any, is ssh-agent's business;
        # stdin is closed so a prompt fails instead of waiting.
        result = _run([_ssh_keygen(), "-q", "-Y", "sign", "-n", NAMESPACE, "-f", key, message], stdin=b"")
        if result.returncode != 0:
            raise SigningError(f"{key_flag} {key}: ssh-keygen could not sign: {_tool_line(result)}")
        with open(message + ".sig", encoding="ascii") as handle:
            armored = handle.read()
    out = path + ".sig"
    with open(out, "w", encoding="utf-8") as handle:
        handle.write(body.decode("utf-8") + "\n" + armored)
    return out


def _read_sig(path: str) -> tuple[bytes, str]:
    try:
        with open(path, encoding="utf-8") as handle:
            first, _, armored = handle.read().partition("\n")
    except OSError as exc:
        raise SigningError(f"{path}: cannot read the signature ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise SigningError(f"{path}: not a bwtune recipe signature") from None
    try:
        head = json.loads(first)
    except ValueError:
        head = None
    if (
        not isinstance(head, Mapping)
        or head.get("format") != SIG_FORMAT
        or "BEGIN SSH SIGNATURE" not in armored
    ):
        raise SigningError(f"{path}: not a bwtune recipe signature (`bwtune recipe sign` writes them)")
    return first.encode("utf-8"), armored


def verify(
    path: str, allowed_signers: str, identity: str | None = None, sig_path: str | None = None
) -> Verification:
    """Whether `path` is as an allowed signer signed it (`identity`, else whoever the
    allowed-signers file names for the key)."""
    sig_path = sig_path or path + ".sig"
    if not os.path.isfile(allowed_signers):
        raise SigningError(f"--allowed-signers {allowed_signers}: no such file")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise SigningError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    body, armored = _read_sig(sig_path)
    tool = _ssh_keygen()
    with tempfile.TemporaryDirectory(prefix="bwtune-verify-") as tmp:
        sig_file = os.path.join(tmp, "manifest.json.sig")
        with open(sig_file, "w", encoding="ascii") as handle:
            handle.write(armored)
        if identity is None:
            found = _run([tool, "-Y", "find-principals", "-s", sig_file, "-f", allowed_signers])
            names = found.stdout.decode("utf-8", "replace").split()
            if found.returncode != 0 or not names:
                return Verification(
                    False, f"{sig_path}: its key is not in {allowed_signers}: not an allowed signer"
                )
            identity = names[0]
        result = _run(
            [tool, "-Y", "verify", "-f", allowed_signers, "-I", identity, "-n", NAMESPACE, "-s", sig_file],
            stdin=body,
        )
    if result.returncode != 0:
        return Verification(
            False,
            f"{sig_path}: the signature does not verify for {identity} in {allowed_signers} "
            f"({_tool_line(result)})",
            identity,
        )
    signed = json.loads(body)
    if _sha256(data) == signed.get("sha256"):
        return Verification(True, f"{path}: good signature by {identity} (namespace {NAMESPACE})", identity)
    try:
        now = manifest(data)
    except SigningError as exc:
        return Verification(False, f"{path}: changed since {identity} signed it; it is now {exc}", identity)
    before: Mapping[str, str] = signed.get("fields") or {}
    changed = sorted(
        name for name in set(before) | set(now["fields"]) if before.get(name) != now["fields"].get(name)
    )
    if not changed:  # same fields, other bytes (spacing, key order): the content is as signed
        return Verification(
            True, f"{path}: good signature by {identity}; reformatted since, every field as signed", identity
        )
    return Verification(
        False,
        f"{path}: changed since {identity} signed it: field{'s' if len(changed) > 1 else ''} "
        f"{', '.join(changed)}",
        identity,
        changed,
    )
