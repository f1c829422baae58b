"""The stand-in's HTTP surface against SGLang 0.5.23's shapes (http_server.py,
tokenizer_manager.py, openai protocol), its auth, and the official openai client."""

from __future__ import annotations

import json

import openai
import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._bench.correctness_prompts import PROMPTS

META_KEYS = {"id", "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "weight_version"}


def sse_events(raw: bytes) -> list[str]:
    return [line[len("data: ") :] for line in raw.decode().split("\n\n") if line.startswith("data: ")]


def test_health_info_and_models(healthy):
    server = healthy("--served-model-name", "qwen35")
    assert server.get("/health") == (200, b"")
    assert server.get("/health_generate")[0] == 200
    for path in ("/model_info", "/get_model_info"):
        status, body = server.get(path)
        info = json.loads(body)
        assert status == 200
        assert info["architectures"] == ["Qwen3_5MoeForConditionalGeneration"]
        assert info["is_generation"] is True and info["simulated"] is True
    for path in ("/server_info", "/get_server_info"):
        info = json.loads(server.get(path)[1])
        assert info["tp_size"] == 8 and info["moe_runner_backend"] == "flashinfer_cutlass"
        assert info["version"] == "0.5.23" and info["simulated"] is True
        state = info["internal_states"][0]
        assert {"last_gen_throughput", "memory_usage"} <= set(state)
        assert "avg_spec_accept_length" not in state  # no speculative decoding configured
    models = json.loads(server.get("/v1/models")[1])
    assert models["object"] == "list" and models["data"][0]["id"] == "qwen35"


def test_generate_text_and_ids(healthy):
    server = healthy()
    status, body = server.post(
        "/generate", {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 8}}
    )
    out = json.loads(body)
    assert status == 200 and out["text"] == " Paris"
    assert META_KEYS | {"e2e_latency"} <= set(out["meta_info"])
    assert out["meta_info"]["finish_reason"]["type"] == "stop"
    status, body = server.post(
        "/generate", {"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 5}}
    )
    out = json.loads(body)
    assert out["meta_info"]["completion_tokens"] == 5 and out["meta_info"]["prompt_tokens"] == 3
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 5}
    assert len(out["output_ids"]) == 5
    assert server.post("/generate", {"sampling_params": {}})[0] == 400


def test_generate_stream_is_cumulative_and_ends_with_done(healthy):
    server = healthy()
    body = {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 6, "ignore_eos": True}, "stream": True}
    status, raw = server.post("/generate", body)
    events = sse_events(raw)
    assert status == 200 and events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts == sorted(counts) and counts[-1] == 6
    assert all(chunks[i + 1]["text"].startswith(chunks[i]["text"]) for i in range(len(chunks) - 1))
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 6}
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])


def test_speculative_meta_info_and_accept_length(healthy):
    server = healthy("--speculative-algorithm", "NEXTN", "--mamba-radix-cache-strategy", "extra_buffer")
    out = json.loads(
        server.post("/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 64}})[1]
    )
    meta = out["meta_info"]
    assert meta["completion_tokens"] == 64
    assert meta["spec_accept_length"] == pytest.approx(64 / meta["spec_verify_ct"])
    assert 1.0 < meta["spec_accept_length"] <= 4.0
    state = json.loads(server.get("/server_info")[1])["internal_states"][0]
    assert 1.0 < state["avg_spec_accept_length"] <= 4.0


def test_api_key_everywhere_but_health_and_metrics(healthy):
    server = healthy("--api-key", "sekret", "--enable-metrics")
    assert server.get("/health")[0] == 200
    assert server.get("/metrics")[0] == 200
    assert server.get("/v1/models") == (401, b'{"error":"Unauthorized"}')
    assert server.post("/generate", {"text": "hi"})[0] == 401
    assert server.get("/server_info", {"Authorization": "Bearer wrong"})[0] == 401
    assert server.get("/server_info", {"Authorization": "Bearer sekret"})[0] == 200


def test_metrics_only_with_flag_and_in_prometheus_text(healthy):
    plain = healthy()
    assert plain.get("/metrics")[0] == 404
    server = healthy("--enable-metrics")
    server.post("/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 3}})
    text = server.get("/metrics")[1].decode()
    assert "# TYPE sglang:num_running_reqs gauge" in text
    assert "sglang:generation_tokens_total{" in text
    gen_line = next(line for line in text.splitlines() if line.startswith("sglang:generation_tokens_total{"))
    assert float(gen_line.rsplit(" ", 1)[1]) == 3.0
    assert "sglang:time_to_first_token_seconds_bucket{" in text and "SIMULATED" in text
    assert server.post("/flush_cache", {})[0] == 200


def test_openai_client_streamed_chat_with_usage(healthy):
    server = healthy()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none")
    prompt = next(p for p in PROMPTS if p.mode == "chat")
    stream = client.chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": prompt.prompt}],
        temperature=0,
        max_tokens=prompt.max_new_tokens,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert prompt.is_correct(text)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == ["stop"]
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens >= 1 and usage.total_tokens > usage.completion_tokens


def test_openai_client_completions_and_chat(healthy):
    server = healthy()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none")
    for p in PROMPTS:
        if p.mode == "completion":
            out = client.completions.create(
                model="m", prompt=p.prompt, max_tokens=p.max_new_tokens, temperature=0
            )
            assert p.is_correct(out.choices[0].text), (p.name, out.choices[0].text)
        else:
            chat = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": p.prompt}], max_tokens=p.max_new_tokens
            )
            assert p.is_correct(chat.choices[0].message.content or ""), p.name
    filler = client.completions.create(model="m", prompt="tell me a story", max_tokens=7)
    assert filler.usage is not None and filler.usage.completion_tokens == 7
    assert filler.choices[0].finish_reason == "length"


def test_server_args_are_logged_as_sglang_does_secrets_included(healthy):
    # SGLang logs `server_args=ServerArgs(...)` with every field, api_key included: the stand-in
    # must too, or nothing would catch a node log that keeps the key (issue 21 #12).
    server = healthy("--api-key", "sk-standin-key-1234", env={"HF_TOKEN": "hf_standin_token_5678"})
    line = next(line for line in server.log().splitlines() if "server_args=ServerArgs(" in line)
    assert "server_args=ServerArgs(model_path=" in line
    assert "api_key='sk-standin-key-1234'" in line
    assert "tp_size=8" in line and f"port={server.port}" in line
    assert "mem_fraction_static=None" in line  # defaults too, as the dataclass repr shows them
    assert "hf_standin_token_5678" not in server.log()  # SGLang does not print its environment
