"""A tiny SGLang-shaped HTTP server for the benchmark client's tests.

Streams /generate and /v1/completions as SSE with a configured time to first token and
inter-token gap. One thread per connection sleeping to absolute deadlines (nanosleep, not
an event loop's millisecond-rounded timers), so emission is precise to ~0.1 ms and does not
drift. Runs as its own process (`python sse_server.py --port 0 ...` prints `PORT <n>`), so
the client under test shares neither an event loop nor the GIL with it. It records when it
sent every token event (time.perf_counter: CLOCK_MONOTONIC, the same clock the client reads
in another process) and GET /stats returns that and what else it saw. Every event carries
the request's id (`req-<n>`), so the client's records pair with the server's; with
--hold-until-in-flight N it answers nothing until N requests were in flight at once.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._bench.correctness_prompts import find_prompt

NAN = "probability tensor contains either `inf`, `nan` or element < 0"

ARGS = argparse.Namespace()
LOCK = threading.Lock()
FULL = threading.Condition(LOCK)  # --hold-until-in-flight waits on it
HOLD_S = 60.0  # a deadline for a broken client, never reached by a working one
HOLD_ENDS: list[float] = []
STATS: dict[str, Any] = {
    "requests": 0,
    "in_flight": 0,
    "max_in_flight": 0,
    "connections": 0,
    "arrivals": [],
    "arrived": {},  # request id -> perf_counter when the request had been read
    "auth_seen": [],
    "sends": [],  # per streamed request: id, prompt_len and perf_counter of each token event
}
SPEC = {"tokens": 0, "verify": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with LOCK:
            STATS["connections"] += 1

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _json(self, status: int, obj: object) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if ARGS.close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/stats":
            with LOCK:
                self._json(200, STATS)
        elif self.path in ("/health", "/health_generate"):
            self._json(200, {})
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "default", "object": "model"}]})
        elif self.path == "/model_info":
            self._json(200, {"model_path": "default", "is_generation": True})
        elif self.path == "/server_info":
            if not self._authorized():
                return
            # Like a server without speculative decoding: no accept length unless chunks carry several.
            state: dict[str, float] = {"last_gen_throughput": 1.0}
            if ARGS.tokens_per_chunk > 1 and SPEC["verify"]:
                state["avg_spec_accept_length"] = SPEC["tokens"] / SPEC["verify"]
            self._json(200, {"internal_states": [state]})
        else:
            self._json(404, {"detail": "Not Found"})

    def _authorized(self) -> bool:
        if ARGS.api_key and self.headers.get("Authorization") != f"Bearer {ARGS.api_key}":
            self._json(401, {"error": "Unauthorized"})
            return False
        return True

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not self._authorized():
            return
        parsed = json.loads(body or b"{}")
        if self.path == "/v1/chat/completions" or find_prompt(str(parsed.get("text", ""))):
            self._answer(json.loads(body))
            return
        if self.path not in ("/generate", "/v1/completions"):
            self._json(404, {"detail": "Not Found"})
            return
        with LOCK:
            STATS["requests"] += 1
            n_req = STATS["requests"]
            rid = f"req-{n_req}"  # in every event's id: tells the client's records apart
            STATS["arrivals"].append(time.perf_counter())
            STATS["arrived"][rid] = STATS["arrivals"][-1]
            STATS["auth_seen"].append(self.headers.get("Authorization", ""))
        if ARGS.fail_every and n_req % ARGS.fail_every == 0:
            self._json(500, {"error": {"message": "simulated failure"}})
            return
        req = json.loads(body)
        with LOCK:
            STATS["in_flight"] += 1
            STATS["max_in_flight"] = max(STATS["max_in_flight"], STATS["in_flight"])
            if ARGS.hold_until_in_flight:
                # Nothing is answered until that many requests were in flight at once: a client
                # that keeps that many reaches it at any speed; one that keeps fewer waits out
                # the hold (and max_in_flight says so).
                FULL.notify_all()
                if not HOLD_ENDS:  # one hold, from the first request on
                    HOLD_ENDS.append(time.perf_counter() + HOLD_S)
                left = HOLD_ENDS[0] - time.perf_counter()
                FULL.wait_for(lambda: STATS["max_in_flight"] >= ARGS.hold_until_in_flight, max(0.0, left))
        try:
            if req.get("stream"):
                self._stream(req, rid)
            else:
                n = int(req["sampling_params"]["max_new_tokens"])
                time.sleep((ARGS.ttft_ms + (n - 1) * ARGS.itl_ms) / 1000.0)
                meta = {"id": rid, "completion_tokens": n, "prompt_tokens": len(req.get("input_ids") or [])}
                self._json(200, {"text": "tok " * n, "meta_info": meta})
        finally:
            with LOCK:
                STATS["in_flight"] -= 1

    def _answer(self, req: dict[str, Any]) -> None:
        """Gate prompts: the canonical answer, or the garbage --answers asks for."""
        chat = self.path == "/v1/chat/completions"
        prompt = req["messages"][-1]["content"] if chat else req["text"]
        known = find_prompt(prompt)
        mode = ARGS.answers
        if mode == "nan":
            self._json(400, {"error": {"message": NAN}})
            return
        text = (known.expected if known else "?") + " and that is all."
        if mode == "repeat":
            text = "!" * 16
        elif mode == "empty":
            text = ""
        elif mode == "drift" and known is not None:
            text = known.expected + " zq xv kj pw ml qq rr ss tt uu vv ww xx"
        if chat:
            self._json(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})
        else:
            self._json(200, {"text": text, "meta_info": {"completion_tokens": len(text.split())}})

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _stream(self, req: dict[str, Any], rid: str) -> None:
        generate = self.path == "/generate"
        if generate:
            max_new = int(req["sampling_params"]["max_new_tokens"])
            prompt_len = len(req.get("input_ids") or [])
        else:
            max_new = int(req["max_tokens"])
            prompt_len = len(req.get("prompt") or [])
        k = ARGS.tokens_per_chunk
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        if ARGS.close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        sends: list[float] = []
        t0 = time.perf_counter() + ARGS.ttft_ms / 1000.0
        sent = chunks = 0
        while sent < max_new:
            n = min(k, max_new - sent)
            delay = t0 + chunks * k * ARGS.itl_ms / 1000.0 - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            sent += n
            chunks += 1
            if ARGS.error_after and sent > ARGS.error_after:
                event: dict[str, Any] = {
                    "error": {"message": "probability tensor contains either inf, nan or element < 0"}
                }
                self._chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
                break
            if generate:
                meta: dict[str, Any] = {
                    "id": rid,
                    "finish_reason": {"type": "length", "length": max_new} if sent == max_new else None,
                    "prompt_tokens": prompt_len,
                    "completion_tokens": sent,
                }
                if k > 1:
                    meta["spec_verify_ct"] = chunks
                    meta["spec_accept_length"] = sent / chunks
                event = {"text": "tok " * sent, "output_ids": list(range(sent)), "meta_info": meta}
            else:
                event = {"id": rid, "choices": [{"index": 0, "text": "tok " * n}], "usage": None}
            payload = b"data: " + json.dumps(event).encode() + b"\n\n"
            sends.append(time.perf_counter())
            if ARGS.split_events:  # one event across two HTTP chunks: the client must reassemble it
                self.wfile.write(
                    b"%x\r\n%s\r\n%x\r\n%s\r\n" % (7, payload[:7], len(payload) - 7, payload[7:])
                )
            else:
                self._chunk(payload)
        with LOCK:
            SPEC["tokens"] += sent
            SPEC["verify"] += chunks
            STATS["sends"].append({"id": rid, "prompt_len": prompt_len, "times": sends})
        if not generate:
            usage = {
                "prompt_tokens": prompt_len,
                "completion_tokens": sent,
                "total_tokens": prompt_len + sent,
            }
            final = {"id": rid, "choices": [], "usage": usage}
            self._chunk(b"data: " + json.dumps(final).encode() + b"\n\n")
        self.wfile.write(b"%x\r\ndata: [DONE]\n\n\r\n0\r\n\r\n" % len(b"data: [DONE]\n\n"))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--itl-ms", type=float, default=2.0)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--api-key", default="")
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--error-after", type=int, default=0)
    p.add_argument("--split-events", action="store_true")
    p.add_argument("--hold-until-in-flight", type=int, default=0)
    p.add_argument("--close", action="store_true", help="Connection: close after each response")
    p.add_argument("--answers", default="correct", choices=["correct", "repeat", "nan", "empty", "drift"])
    p.parse_args(namespace=ARGS)
    server = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
