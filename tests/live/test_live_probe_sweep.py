"""`kb probe` and `kb sweep` against a real vLLM server (--max-num-seqs 8)."""

import json
import signal
import time

from live.util import read_jsonl, sweep_until_first_level

SECRET = "kb-test-secret-0123456789"
SMALL = ["--input-len", "32", "--output-len", "16"]


def test_probe_reads_engine_version_model_and_context(kb_live, vllm8, tiny_model):
    proc = kb_live("probe", vllm8.url, env={"KB_API_KEY": SECRET})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "engine          vllm 0.32.0" in out
    assert f"model           {tiny_model}" in out
    assert "context length  512 tokens" in out
    assert "KV cache        1,048,576 tokens" in out  # VLLM_CPU_KVCACHE_SPACE=1 (GiB), from vllm:cache_config_info
    assert SECRET not in out + proc.stderr

    doc = json.loads(kb_live("probe", vllm8.url, "--json", "--api-key", SECRET).stdout)
    assert {"url", "engine", "version", "model", "model_path", "max_model_len", "server_args", "tuning_args",
            "startup", "metrics", "endpoints", "warnings"} <= set(doc)
    assert (doc["engine"], doc["version"], doc["max_model_len"]) == ("vllm", "0.32.0", 512)
    assert doc["metrics"]["names"]["running"] == "vllm:num_requests_running"
    assert doc["metrics"]["names"]["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert doc["endpoints"]["/server_info"] == 404 and doc["endpoints"]["/version"] == 200
    assert SECRET not in json.dumps(doc)


def test_sweep_writes_sglang_jsonl_that_ingest_reads(kb_live, vllm8, tmp_path):
    from ingest import sglang_bench
    from ingest.run import read_run

    out = tmp_path / "sweep.jsonl"
    # 128 output tokens: the c=16 level lasts a few /metrics samples even on a quiet machine (at 64
    # it was over in about a second and its one or two samples could miss the cap)
    proc = kb_live("sweep", vllm8.url, "-c", "1,16", "-n", "32", "--input-len", "32", "--output-len", "128",
                   "--out", out, env={"KB_API_KEY": SECRET})
    assert proc.returncode == 0, proc.stderr
    assert f"written to {out}" in proc.stdout and SECRET not in proc.stdout + proc.stderr + out.read_text()
    rows = read_jsonl(out)
    assert [r["max_concurrency"] for r in rows] == [1, 16]
    for i, r in enumerate(rows, 1):
        assert r["completed"] == 32 and r["failed"] == 0
        assert r["total_output_tokens"] == 32 * 128  # ignore_eos: every request runs to max_tokens
        assert 28 <= r["total_input_tokens"] / 32 <= 36  # prompts calibrated to 32 tokens
        assert r["server_info"]["version"] == "0.32.0"
        [run] = sglang_bench.read(r, str(out), i)  # the sglang bench_serving reader takes the line as is
        assert run.concurrency == r["max_concurrency"] and run.total_throughput > 0
    km = rows[1]["kb_metrics"]
    running = max(s["running"] for s in km["samples"])  # a few samples in this short level
    assert 6 <= running <= 8 and max(s["waiting"] for s in km["samples"]) > 0  # at the cap, the rest waiting
    ev = read_run([out])
    assert ev.engine == "vllm" and len(ev.bench) == 2 and len(ev.traces) == 2
    assert ev.traces[1].stats["running_max"] == running


def test_sweep_json_keys(kb_live, vllm8):
    doc = json.loads(kb_live("sweep", vllm8.url, "-c", "2", "-n", "4", *SMALL, "--json").stdout)
    assert {"url", "engine", "version", "model", "input_len", "output_len", "prompt_tokens", "out", "levels",
            "interrupted", "error", "warnings"} <= set(doc)
    [level] = doc["levels"]
    assert level["completed"] == 4 and "kb_metrics" not in level and level["client"]["cpu_s"] >= 0


def _posts(server) -> int:
    """Completions requests the server has answered so far (uvicorn's access log lines)."""
    return server.log.read_text(errors="replace").count('"POST /v1/completions HTTP/1.1"')


def test_default_lengths_fit_the_servers_context(kb_live, vllm8, tmp_path):
    """The server runs --max-model-len 512. With the defaults (256 + 256) the first counted
    prompt used to be 256 words, more than 512 tokens with this tokenizer: HTTP 400 before
    any level. Now `kb sweep` and `kb doctor` run with prompt + output within 512, and every
    request gets all its output tokens (vLLM would shorten an output that did not fit)."""
    doc = json.loads(kb_live("sweep", vllm8.url, "-c", "2", "-n", "4", "--json").stdout)
    assert (doc["input_len"], doc["output_len"]) == (256, 256) and not doc["error"], doc
    assert 240 <= doc["prompt_tokens"] <= 256  # calibrated to the nearest at or below the input length
    [level] = doc["levels"]
    assert level["completed"] == 4 and level["failed"] == 0
    assert level["total_output_tokens"] == 4 * 256 and level["total_input_tokens"] <= 4 * 256

    proc = kb_live("doctor", vllm8.url, "-c", "2", "-n", "4", "--out", tmp_path / "doctor.jsonl", "--json")
    assert proc.returncode == 0, proc.stderr
    [row] = read_jsonl(tmp_path / "doctor.jsonl")
    assert row["completed"] == 4 and row["total_output_tokens"] == 4 * 256

    # one length given: the default beside it takes what is left of the context, and says so
    doc = json.loads(kb_live("sweep", vllm8.url, "-c", "2", "-n", "4", "--output-len", "400", "--json").stdout)
    assert (doc["input_len"], doc["output_len"]) == (112, 400), doc
    assert any("context is 512 tokens (max_model_len): input length 112 tokens, not the default 256" in w
               for w in doc["warnings"]), doc["warnings"]
    assert doc["levels"][0]["total_output_tokens"] == 4 * 400 and doc["prompt_tokens"] <= 112


def test_lengths_that_cannot_fit_stop_before_any_load(kb_live, vllm8, tmp_path):
    before = _posts(vllm8)
    for command in ("sweep", "doctor"):
        out = tmp_path / f"{command}.jsonl"
        proc = kb_live(command, vllm8.url, "--input-len", "400", "--output-len", "200", "--out", out)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1, proc.stderr
        assert lines[0] == ("kb: error: input_len 400 + output_len 200 = 600 tokens do not fit the server's "
                            "context of 512 tokens (max_model_len): give lengths that sum to at most 512")
        assert not out.exists()
    time.sleep(0.5)  # an access-log line would be written as the request is answered
    assert _posts(vllm8) == before  # not one request sent, not even to count prompt tokens


def test_ctrl_c_keeps_finished_levels(vllm8, tmp_path):
    out = tmp_path / "sweep.jsonl"
    proc = sweep_until_first_level(vllm8.url, out, {"KB_HOME": str(tmp_path / "home")})  # Ctrl-C lands in level 64
    try:
        assert out.exists(), "the first level never finished"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert time.monotonic() - t0 < 10, "Ctrl-C should stop the sweep at once"
    assert proc.returncode == 130, (proc.returncode, stderr)
    assert stderr.strip().splitlines() == [f"kb: interrupted: 1 finished level kept in {out}"]
    assert [r["max_concurrency"] for r in read_jsonl(out)] == [1]
    assert "Traceback" not in stderr
