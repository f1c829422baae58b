"""Measuring a bisection's steps on this machine with the SGLang stand-in (issue 28).

`StandinStepRunner(...)` is the engine's `measure(stack, n)` for stacks that differ in
`sglang_commit` only (docs/bisect.md):

- **The stack.** A commit's `python/` tree (`git archive` of the checkout), byte-compiled:
  a syntax error is a failed build. Made once per commit under the stack cache
  (`<cache>/<sha>/`, renamed into place when complete; a failed build leaves
  `<cache>/<sha>.failed`) and never again, under the cache's lock (`<cache>/.lock`, so two
  bisections sharing a cache build a commit once): every build is a line of
  `<cache>/builds.jsonl`.
  The stand-in reads the stack's speed from it (`BWTUNE_STANDIN_STACK`, docs/standin.md).
  This is the stand-in's stack, not a real one: building torch, SGLang and FlashInfer into
  a fingerprinted venv through the build roles is not built here.
- **A launch.** The pinned config's argv on `python -m bwtune.standin`, a scratch server on a
  free loopback port in its own session (never the production unit), healthy within
  `launch_timeout_s`, a warm-up request, then `repetitions` closed-loop runs of
  `num_prompts` requests at `concurrency` (`/generate`, `ignore_eos`, `output_len` tokens
  each): each repetition's value is output tokens per second. Then the server's whole
  process group is stopped (SIGTERM, SIGKILL after `stop_timeout_s`), whatever happened.
  While a server runs, `<run_dir>/server.json` names it (pid, port): a runner that finds one
  left by a killed bisection stops it first (when that pid is still a stand-in on that port).
  Each launch is a line of `<run_dir>/launches.jsonl` and its log is under
  `<run_dir>/launches/`; its seed (`BWTUNE_STANDIN_SEED`) follows the commit and the launch's
  number, so a launch is another draw of the stand-in's launch-to-launch noise.
- **Untestable.** A failed build is `Untestable("build", ...)`; a server that exits or is
  not healthy in time, or a request it fails, `Untestable("launch", ...)`: the engine skips
  the version like `git bisect skip`.

The benchmark client is a small one here: the node's (`module_utils/_bench`) stays on the
node (the import contract's rule (m)).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bwtune.bisect.bisection import Measured, Untestable
from bwtune.bisect.component_ranges import BisectError, Candidate

COMPONENT = "sglang_commit"
BUILDS_LOG = "builds.jsonl"
LAUNCHES_LOG = "launches.jsonl"
STACK_RECORD = "stack.json"
SERVER_RECORD = "server.json"


def _git(checkout: Path, *argv: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(checkout), *argv], capture_output=True, text=True, check=False, timeout=60
        )
    except OSError as exc:
        raise BisectError(f"--checkout {checkout}: git: {exc}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise BisectError(f"--checkout {checkout}: git {' '.join(argv)}: {why}")
    return done.stdout


def first_parent_commits(checkout: Path, good: str, bad: str) -> tuple[str, str, list[Candidate]]:
    """(good sha, bad sha, the commits good..bad in first-parent order, oldest first, each
    with its subject). BisectError for a revision that is not there, or a good commit that is
    not a first-parent ancestor of the bad one."""
    if not (checkout / ".git").exists() and not (checkout / "HEAD").exists():
        raise BisectError(f"--checkout {checkout}: not a git checkout")
    shas = []
    for which, rev in (("good", good), ("bad", bad)):
        try:
            shas.append(_git(checkout, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip())
        except BisectError:
            raise BisectError(f"the {which} revision {rev!r}: not a commit in {checkout}") from None
    good_sha, bad_sha = shas
    if good_sha == bad_sha:
        raise BisectError(f"the good and bad revisions are the same commit {good_sha}: nothing to bisect")
    log = _git(checkout, "log", "--first-parent", "--reverse", "--format=%H%x00%s", f"{good_sha}..{bad_sha}")
    rows = [line.split("\0", 1) for line in log.splitlines() if line]
    parents = _git(checkout, "rev-list", "--first-parent", bad_sha).split()
    if good_sha not in parents:
        raise BisectError(
            f"the good revision {good} ({good_sha[:12]}) is not on the first-parent history of the bad {bad}"
        )
    subject = _git(checkout, "log", "-1", "--format=%s", good_sha).strip()
    return good_sha, bad_sha, [Candidate(good_sha, subject), *(Candidate(sha, s) for sha, s in rows)]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _append(path: Path, record: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # a torn last line (a kill mid-write): a count only
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


@dataclass
class Workload:
    concurrency: int = 16
    num_prompts: int = 16
    output_len: int = 32
    repetitions: int = 1

    def check(self) -> None:
        for key in ("concurrency", "num_prompts", "output_len", "repetitions"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BisectError(f"workload {key} {value!r}: an integer >= 1")


@dataclass
class StandinStepRunner:
    checkout: Path
    server_args: Sequence[str]  # the pinned config: launch_server's argv (--model-path, flags)
    stack_cache: Path
    run_dir: Path
    workload: Workload = field(default_factory=Workload)
    env: Mapping[str, str] = field(default_factory=dict)  # on top of this process's (start-up scale, profile)
    launch_timeout_s: float = 600.0
    stop_timeout_s: float = 10.0
    request_timeout_s: float = 120.0
    builds: int = 0  # stacks built (or tried) by this object
    reused: int = 0  # stacks found in the cache
    launches: int = 0  # launches started by this object

    def __post_init__(self) -> None:
        self.checkout, self.stack_cache, self.run_dir = (
            Path(self.checkout),
            Path(self.stack_cache),
            Path(self.run_dir),
        )
        self.workload.check()
        if any(
            arg in ("--port", "--host") or arg.startswith(("--port=", "--host=")) for arg in self.server_args
        ):
            raise BisectError(
                "--server-args: leave out --host and --port (a scratch server gets a free port)"
            )
        if "--model-path" not in self.server_args and not any(
            a.startswith("--model-path=") for a in self.server_args
        ):
            raise BisectError("--server-args: the pinned config needs --model-path")
        self.leftover_stopped = stop_leftover(self.run_dir / SERVER_RECORD)
        self._count: dict[str, int] = {}
        for record in _read_lines(self.run_dir / LAUNCHES_LOG):
            commit = str(record.get("commit"))
            self._count[commit] = self._count.get(commit, 0) + 1

    # ------------------------------------------------------------------ the engine's measure

    def __call__(self, stack: Mapping[str, Any], n: int) -> Measured | Untestable:
        others = {k: v for k, v in stack.items() if k != COMPONENT and v is not None}
        if others:
            raise BisectError(
                f"the local stand-in runner builds {COMPONENT} only; this stack also sets "
                + ", ".join(f"{k}={v}" for k, v in sorted(others.items()))
            )
        commit = str(stack.get(COMPONENT))
        built = self.stack(commit)
        if isinstance(built, Untestable):
            return built
        values: list[list[float]] = []
        for _ in range(n):
            got = self.launch(commit, built)
            if isinstance(got, Untestable):
                return got
            values.append(got)
        return Measured(values)

    # ------------------------------------------------------------------ stacks

    def stack(self, commit: str) -> Path | Untestable:
        """The commit's stack directory (what BWTUNE_STANDIN_STACK names), built once: under
        the cache's lock, so two bisections sharing a cache do not both build it."""
        found = self._cached(commit)
        if found is not None:
            return found
        self.stack_cache.mkdir(parents=True, exist_ok=True)
        with (self.stack_cache / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = self._cached(commit)
            if found is not None:
                return found
            return self._build_into_cache(commit)

    def _cached(self, commit: str) -> Path | Untestable | None:
        done = self.stack_cache / commit
        failed = self.stack_cache / f"{commit}.failed"
        if (done / STACK_RECORD).is_file():
            self.reused += 1
            return done / "python"
        if failed.is_file():
            self.reused += 1
            return Untestable("build", failed.read_text(encoding="utf-8").strip())
        return None

    def _build_into_cache(self, commit: str) -> Path | Untestable:
        done = self.stack_cache / commit
        tmp = self.stack_cache / f".{commit}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        started = time.monotonic()
        self.builds += 1
        problem = self._build(commit, tmp)
        record = {"commit": commit, "ok": problem is None, "seconds": round(time.monotonic() - started, 3)}
        if problem is not None:
            shutil.rmtree(tmp, ignore_errors=True)
            (self.stack_cache / f"{commit}.failed").write_text(problem + "\n", encoding="utf-8")
            _append(self.stack_cache / BUILDS_LOG, {**record, "error": problem})
            return Untestable("build", problem)
        (tmp / STACK_RECORD).write_text(json.dumps({"commit": commit}) + "\n", encoding="utf-8")
        shutil.rmtree(done, ignore_errors=True)  # a folder without its record: not a stack
        os.replace(tmp, done)
        _append(self.stack_cache / BUILDS_LOG, record)
        return done / "python"

    def _build(self, commit: str, dest: Path) -> str | None:
        """None when built; else why not (one line)."""
        done = subprocess.run(
            ["git", "-C", str(self.checkout), "archive", "--format=tar", commit, "python"],
            capture_output=True,
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            why = (done.stderr.decode(errors="replace").strip().splitlines() or ["failed"])[-1]
            return f"git archive {commit[:12]} python: {why}"
        dest.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
            tar.extractall(dest, filter="data")
        for path in sorted((dest / "python").rglob("*.py")):
            try:
                compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
            except SyntaxError as exc:
                rel = path.relative_to(dest)
                return f"{rel}:{exc.lineno}: SyntaxError: {exc.msg}"
        return None

    # ------------------------------------------------------------------ launches

    def launch(self, commit: str, stack_dir: Path) -> list[float] | Untestable:
        number = self._count.get(commit, 0)
        self._count[commit] = number + 1
        self.launches += 1
        seed = int.from_bytes(hashlib.blake2s(f"{commit}:{number}".encode(), digest_size=4).digest(), "big")
        port = free_port()
        logs = self.run_dir / "launches"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{commit[:12]}-{number}.log"
        env = {
            **os.environ,
            **self.env,
            "BWTUNE_STANDIN_STACK": str(stack_dir),
            "BWTUNE_STANDIN_SEED": str(seed),
        }
        argv = [
            sys.executable,
            "-m",
            "bwtune.standin",
            *self.server_args,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        record: dict[str, Any] = {"commit": commit, "number": number, "seed": seed, "port": port}
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        server = self.run_dir / SERVER_RECORD
        try:
            server.write_text(json.dumps({"pid": proc.pid, "port": port, "commit": commit}) + "\n")
            why = self._wait_healthy(proc, port, log_path)
            values: list[float] = []
            if why is None:
                try:
                    self._generate(port, 1)  # warm-up
                    values = [self._closed_loop(port) for _ in range(self.workload.repetitions)]
                except (OSError, ValueError, KeyError) as exc:
                    why = f"a request failed: {exc}"
        finally:
            _stop(proc, self.stop_timeout_s)
            server.unlink(missing_ok=True)
        if why is not None:
            _append(self.run_dir / LAUNCHES_LOG, {**record, "error": why})
            return Untestable("launch", why)
        _append(self.run_dir / LAUNCHES_LOG, {**record, "values": values})
        return values

    def _wait_healthy(self, proc: subprocess.Popen[bytes], port: int, log_path: Path) -> str | None:
        deadline = time.monotonic() + self.launch_timeout_s
        while time.monotonic() < deadline:
            code = proc.poll()
            if code is not None:
                lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
                return f"the server exited {code}: {lines[-1] if lines else '(no output)'}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return None
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.05)
        return f"not healthy within {self.launch_timeout_s:g} s"

    def _generate(self, port: int, index: int) -> int:
        body = {
            "text": f"bisect request {index}",
            "sampling_params": {"max_new_tokens": self.workload.output_len, "ignore_eos": True},
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/generate",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=self.request_timeout_s) as resp:
            return int(json.load(resp)["meta_info"]["completion_tokens"])

    def _closed_loop(self, port: int) -> float:
        """Output tokens per second of num_prompts requests, concurrency at a time."""
        w = self.workload
        lock = threading.Lock()
        todo = iter(range(w.num_prompts))
        tokens: list[int] = []
        errors: list[Exception] = []

        def worker() -> None:
            while True:
                with lock:
                    index = next(todo, None)
                if index is None or errors:
                    return
                try:
                    got = self._generate(port, index)
                except (OSError, ValueError, KeyError) as exc:
                    errors.append(exc)
                    return
                with lock:
                    tokens.append(got)

        started = time.perf_counter()
        threads = [
            threading.Thread(target=worker, daemon=True) for _ in range(min(w.concurrency, w.num_prompts))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        if errors:
            raise errors[0]
        if not tokens or elapsed <= 0:
            raise ValueError("no output tokens")
        return sum(tokens) / elapsed

    def counts(self) -> dict[str, int]:
        builds = _read_lines(self.stack_cache / BUILDS_LOG)
        return {
            "builds": self.builds,
            "stacks_reused": self.reused,
            "launches": self.launches,
            "builds_in_cache_log": len(builds),
            "leftover_servers_stopped": int(self.leftover_stopped),
        }


def _stop(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Stop the server's whole session for sure: SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


def stop_leftover(record: Path) -> bool:
    """Stop the server a killed bisection left (its record names it): True when one was."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        pid, port = int(data["pid"]), int(data["port"])
    except (OSError, ValueError, KeyError, TypeError):
        record.unlink(missing_ok=True)
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        ours = b"bwtune.standin" in argv and str(port).encode() in argv and os.getpgid(pid) == pid
    except OSError:
        ours = False
    stopped = False
    if ours:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
            stopped = True
    record.unlink(missing_ok=True)
    return stopped
