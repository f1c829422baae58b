"""A stand-in for `python -m sglang.launch_server` with scripted start-up behaviour.

fake_server.py --port N --mode MODE [--delay S] [--ignore-term] [--grandchild] [--escape]
Modes: healthy, argparse, value-error, oom, no-kernel, crash-after-load, hang.
With FAKE_GPU_STATE set, every process it makes registers its pid there as a GPU user.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


def register_gpu(pid: int) -> None:
    state = os.environ.get("FAKE_GPU_STATE")
    if state:
        with open(state, "a") as f:
            f.write(json.dumps({"pid": pid, "mib": 1234}) + "\n")


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code = 200 if self.path in ("/health", "/health_generate") else 404
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    p = argparse.ArgumentParser(prog="launch_server.py")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", required=True)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--grandchild", action="store_true", help="fork a helper in the same group")
    p.add_argument("--escape", action="store_true", help="fork a helper that leaves the group (setsid)")
    a = p.parse_args()
    if a.mode == "argparse":
        p.error("argument --moe-runner-backend: invalid choice: 'bogus'")
    if a.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    register_gpu(os.getpid())
    # Like SGLang: ServerArgs checks the flags before the server logs them.
    if a.mode == "value-error":
        raise ValueError("speculative decoding needs --mamba-radix-cache-strategy extra_buffer")
    print("server_args=ServerArgs(...)", flush=True)
    helper = [
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)",
    ]
    if a.grandchild:
        child = subprocess.Popen(helper)
        register_gpu(child.pid)
        print(f"grandchild {child.pid}", flush=True)
    if a.escape:
        child = subprocess.Popen(helper, start_new_session=True)
        print(f"escaped {child.pid}", flush=True)
    print("Load weight begin. avail mem=94.00 GB", flush=True)
    time.sleep(a.delay)
    if a.mode == "oom":
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
        sys.exit(1)
    if a.mode == "no-kernel":
        print(
            "RuntimeError: CUDA error: no kernel image is available for execution on the device", flush=True
        )
        sys.exit(1)
    if a.mode == "crash-after-load":
        print("Traceback (most recent call last):\nValueError: shape mismatch in layer 3", flush=True)
        sys.exit(1)
    if a.mode == "hang":
        time.sleep(600)
    HTTPServer(("127.0.0.1", a.port), Health).serve_forever()


if __name__ == "__main__":
    main()
