"""kb/live without a server: /metrics parsing (real vLLM 0.32.0 capture), probe logic
against recorded answers (httpx.MockTransport), URL hygiene, the sweep JSONL read back
by ingest (sglang_bench.read and the kb_metrics trace), and the log window."""

import json
import math

import httpx
import pytest
from conftest import DATA
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from ingest.metrics_text import Scrape, vllm_cache_config
from kb.errors import ServerError
from kb.live import client as cl
from kb.live.probe import probe
from kb.live.stats import percentile
from kb.live.stream import Outcome
from kb.live.sweep_options import SweepOptions
from kb.live.sweep_output import summarise

LIVE = DATA / "samples" / "live"
SGLANG_INFO = DATA / "samples" / "sglang_bench_jsonl" / "p1_sglang058_server_info.jsonl"


# ------------------------------------------------------------------ /metrics


def test_vllm_metrics_under_load_real_capture():
    s = Scrape.parse((LIVE / "vllm-0.32.0_metrics_under_load.txt").read_text())
    assert s.engine() == "vllm"
    fig = s.figures("vllm")
    assert fig["running"] == 8 and fig["waiting"] == 8
    assert 0 <= fig["kv_cache_usage"] < 1
    assert fig["preemptions_total"] == 0 and fig["generation_tokens_total"] > 0
    names = s.names("vllm")
    # the names vLLM 0.32.0 actually exports (gpu_cache_usage_perc is gone)
    assert names["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert names["preemptions_total"] == "vllm:num_preemptions_total"
    assert names["generation_tokens_total"] == "vllm:generation_tokens_total"
    args, startup = vllm_cache_config(s)
    assert args == {"gpu_memory_utilization": 0.92}  # prefix caching on and block size auto: vLLM's own defaults
    assert startup["kv_cache_tokens"] == 1048576 and startup["block_size"] == 128


def test_prefiltered_parse_gives_the_same_figures():
    from ingest.metrics_text import prefixes

    text = (LIVE / "vllm-0.32.0_metrics_under_load.txt").read_text()
    full, quick = Scrape.parse(text), Scrape.parse(text, only=prefixes("vllm"))
    assert quick.figures("vllm") == full.figures("vllm") and quick.names("vllm") == full.names("vllm")
    assert len(quick.series) < len(full.series) / 4


def test_sglang_metrics_sum_ranks_and_keep_max_fraction():
    reg = CollectorRegistry()
    labels = ["model_name", "tp_rank"]
    run = Gauge("sglang:num_running_reqs", "running", labels, registry=reg)
    queue = Gauge("sglang:num_queue_reqs", "queued", labels, registry=reg)
    usage = Gauge("sglang:token_usage", "usage", labels, registry=reg)
    gen = Counter("sglang:generation_tokens_total", "tokens", labels, registry=reg)
    retract = Counter("sglang:num_retracted_requests_total", "retracted", labels, registry=reg)
    for rank, (r, q, u) in enumerate([(32, 5, 0.91), (31, 7, 0.97)]):
        run.labels("m", str(rank)).set(r)
        queue.labels("m", str(rank)).set(q)
        usage.labels("m", str(rank)).set(u)
        gen.labels("m", str(rank)).inc(1000)
        retract.labels("m", str(rank)).inc(2)
    s = Scrape.parse(generate_latest(reg).decode())
    assert s.engine() == "sglang"
    fig = s.figures("sglang")
    assert fig["running"] == 63 and fig["waiting"] == 12
    assert fig["kv_cache_usage"] == pytest.approx(0.97)
    assert fig["generation_tokens_total"] == 2000 and fig["preemptions_total"] == 4


def test_metrics_garbage_is_a_server_error():
    with pytest.raises(ServerError, match="not Prometheus text"):
        Scrape.parse('vllm:x{a="1" 2\n')


# ------------------------------------------------------------------ probe (recorded answers)


def _client(routes: dict, seen: list | None = None, api_key: str | None = None) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        r = routes.get(request.url.path)
        if r is None:
            return httpx.Response(404, json={"detail": "Not Found"})
        return r(request) if callable(r) else r

    return httpx.Client(transport=httpx.MockTransport(handler), headers=cl.headers(api_key))


def _vllm_routes():
    return {"/v1/models": httpx.Response(200, content=(LIVE / "vllm-0.32.0_v1_models.json").read_bytes(),
                                         headers={"content-type": "application/json"}),
            "/version": httpx.Response(200, content=(LIVE / "vllm-0.32.0_version.json").read_bytes()),
            "/metrics": httpx.Response(200, text=(LIVE / "vllm-0.32.0_metrics_under_load.txt").read_text())}


def test_probe_vllm_from_recorded_answers():
    seen = []
    p = probe("http://127.0.0.1:8000/v1/", http=_client(_vllm_routes(), seen, api_key="s3cret-key"))
    assert (p.engine, p.version, p.model, p.max_model_len) == ("vllm", "0.32.0", "/tmp/tinymodel", 512)
    assert p.url == "http://127.0.0.1:8000"  # /v1 dropped
    assert p.metrics["available"] and p.metrics["values"]["running"] == 8
    assert p.tuning_args["max_model_len"] == 512 and p.startup["kv_cache_tokens"] == 1048576
    assert p.server_info()["version"] == "0.32.0" and p.server_info()["model_path"] == "/tmp/tinymodel"
    assert all(r.headers["authorization"] == "Bearer s3cret-key" for r in seen)
    assert "s3cret" not in p.model_dump_json()


def test_probe_sglang_server_info_args_redacted():
    doc = json.loads(SGLANG_INFO.read_text().splitlines()[0])
    info = dict(doc["server_info"], api_key="s3cret-key",
                launch_command="python -m sglang.launch_server --api-key s3cret-key")
    routes = {
        "/v1/models": httpx.Response(200, json={"object": "list", "data": [
            {"id": info["model_path"], "object": "model", "owned_by": "sglang", "root": info["model_path"]}]}),
        "/server_info": httpx.Response(200, json=info),
        "/model_info": httpx.Response(200, json={"model_path": info["model_path"], "is_generation": True}),
    }
    p = probe("http://127.0.0.1:30000", http=_client(routes))
    assert p.engine == "sglang" and p.version == "0.5.8"
    assert p.server_args["api_key"] == "<redacted>" and "launch_command" not in p.server_args
    assert "s3cret" not in p.model_dump_json()
    assert p.tuning_args["tensor_parallel_size"] == 1 and p.tuning_args["schedule_policy"] == "fcfs"
    assert "max_running_requests" in p.server_args
    assert not p.metrics["available"] and any("--enable-metrics" in w for w in p.warnings)


def test_probe_old_sglang_get_server_info():
    routes = {"/v1/models": httpx.Response(200, json={"data": [{"id": "m"}]}),
              "/get_server_info": httpx.Response(200, json={"model_path": "m", "tp_size": 2, "version": "0.4.6",
                                                            "max_running_requests": 128})}
    p = probe("http://127.0.0.1:30000", http=_client(routes))
    assert p.engine == "sglang" and p.tuning_args["max_running_requests"] == 128
    assert p.endpoints["/server_info"] == 404 and p.endpoints["/get_server_info"] == 200


@pytest.mark.parametrize("routes, message", [
    ({"/": httpx.Response(200, text="<html>")}, "not an OpenAI-compatible LLM server (GET /v1/models: HTTP 404"),
    ({"/v1/models": httpx.Response(200, text="<html>hello</html>", headers={"content-type": "text/html"})},
     "not an OpenAI model list, text/html"),
    ({"/v1/models": httpx.Response(401, json={"error": "Unauthorized"})}, "wants an API key"),
    ({"/v1/models": httpx.Response(200, json={"data": []})}, "lists no model"),
    ({"/v1/models": httpx.Response(302, headers={"location": "http://example.com/v1/models"})},
     "redirects to another host (http://example.com/v1/models); not followed"),
    ({"/v1/models": httpx.Response(200, content=b'{"data": [' + b" " * (2 * 2**20) + b"]}")},
     "answer larger than 1024 KiB"),
])
def test_probe_refuses_with_one_line(routes, message):
    with pytest.raises(ServerError) as e:
        probe("http://127.0.0.1:9", http=_client(routes))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_same_host_redirect_is_followed():
    routes = _vllm_routes()
    routes["/v1/models"], routes["/v2/models"] = (httpx.Response(307, headers={"location": "/v2/models"}),
                                                  routes["/v1/models"])
    assert probe("http://127.0.0.1:8000", http=_client(routes)).model == "/tmp/tinymodel"


@pytest.mark.parametrize("url, message", [
    ("127.0.0.1:8000", "with its scheme"),
    ("ftp://127.0.0.1/", "only http:// and https://"),
    ("file:///etc/passwd", "only http:// and https://"),
    ("http://user:pw@127.0.0.1:8000", "not in the URL"),
])
def test_url_hygiene(url, message):
    with pytest.raises(ServerError, match=message):
        cl.base_url(url)


def test_error_messages_name_the_url_not_the_key():
    u = cl.base_url("http://127.0.0.1:1")
    msg = cl.describe_error(httpx.ConnectError("[Errno 111] Connection refused"), cl.join(u, "/v1/models"))
    assert msg == "http://127.0.0.1:1/v1/models: connection refused (is the server running on that port?)"
    msg = cl.describe_error(httpx.ReadTimeout("timed out"), u, cl.Timeouts(read=2))
    assert "no answer within 2 s (read timeout)" in msg


# ------------------------------------------------------------------ sweep results → ingest


def test_percentile_is_numpy_linear():
    v = [1.0, 2.0, 3.0, 4.0]
    assert percentile(v, 50) == 2.5 and percentile(v, 0) == 1 and percentile(v, 100) == 4
    assert percentile(v, 99) == pytest.approx(3.97)


def _row(c=8, running=(8, 8, 8), waiting=(5, 8, 6)):
    outs = [Outcome(ok=True, ttft=0.02 + i / 1000, latency=0.2 + i / 100, itl=[0.003] * 63, prompt_tokens=32,
                    output_tokens=64) for i in range(16)]
    outs.append(Outcome(error="HTTP 400: too long"))
    row = summarise(c, outs, 1.25, SweepOptions(levels=[c], input_len=32, output_len=64), "/m", "vllm", 17)
    row.update(tool="kb-sweep", server_info={"engine": "vllm", "version": "0.32.0", "model_path": "/m",
                                             "max_model_len": 512},
               kb_metrics={"engine": "vllm", "source": "/metrics", "interval_s": 0.25,
                           "names": {"preemptions_total": "vllm:num_preemptions_total"},
                           "startup": {"kv_cache_tokens": 1048576},
                           "before": {"preemptions_total": 0}, "after": {"preemptions_total": 3},
                           "samples": [{"t": 0.25 * (i + 1), "running": r, "waiting": w, "kv_cache_usage": 0.5,
                                        "generation_tokens_total": 1000 * i}
                                       for i, (r, w) in enumerate(zip(running, waiting, strict=True))]})
    return json.loads(json.dumps(row))


def test_sweep_line_has_sglang_keys_and_sglang_reader_accepts_it():
    from ingest import sglang_bench

    row = _row()
    for key in ("backend", "dataset_name", "request_rate", "max_concurrency", "duration", "completed",
                "total_input_tokens", "total_output_tokens", "request_throughput", "input_throughput",
                "output_throughput", "total_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
                "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p95_itl_ms",
                "p99_itl_ms", "mean_e2e_latency_ms", "median_e2e_latency_ms", "server_info", "kb_metrics"):
        assert key in row, key
    assert row["completed"] == 16 and row["failed"] == 1 and row["errors"] == {"HTTP 400: too long": 1}
    assert row["total_throughput"] == pytest.approx(16 * 96 / 1.25)
    assert row["median_tpot_ms"] == pytest.approx((0.2 + 0.075 - 0.0275) / 63 * 1000, rel=0.05)
    [run] = sglang_bench.read(row, "sweep.jsonl", 1)
    assert run.concurrency == 8 and run.total_throughput == row["total_throughput"]
    assert run.ttft_ms["median"] == row["median_ttft_ms"] and run.itl_ms["p95"] == row["p95_itl_ms"]
    assert run.engine_version == "0.32.0" and run.input_len == 32 and run.output_len == 64


def test_sweep_file_reads_as_bench_runs_and_metrics_traces(tmp_path):
    from ingest.run import read_run
    from kb.signals import detect

    f = tmp_path / "sweep.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [
        _row(1, (1, 1, 1, 1, 1), (0, 0, 0, 0, 0)),
        _row(8, (8, 8, 8, 8, 8, 8), (3, 8, 8, 7, 8, 8)),
    ]) + "\n")
    ev = read_run([f])
    assert ev.files[0]["kind"] == "kb-sweep-jsonl"
    assert "vllm /metrics: 11 samples over 2 levels" in ev.files[0]["yielded"]
    assert [r.tool for r in ev.bench] == ["kb-sweep", "kb-sweep"]
    assert ev.engine == "vllm" and ev.engine_version == "0.32.0"
    tr = ev.traces[1]
    assert tr.stats["running_max"] == 8 and tr.stats["queue_nonzero_frac"] == 1.0
    assert tr.stats["events"] == {"preempt": 3} and tr.startup["kv_cache_tokens"] == 1048576
    assert tr.samples[1].line == 2 and tr.samples[2].gen_throughput == pytest.approx(4000)
    sig = {s.id: s for s in detect(ev)}
    cap = sig["running-cap-with-queue"]
    assert cap.data["cap"] == 8 and cap.severity == "severe"
    assert "/metrics samples at concurrency 8" in cap.evidence[0].text
    assert sig["kv-cache-pressure"].data["events"] == 6  # 3 preemptions in each level


def test_log_window_keeps_startup_and_drops_earlier_stats(tmp_path):
    from ingest.run import read_run

    stats = ("INFO 11-30 05:03:{s:02d} [loggers.py:335] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
             "Avg generation throughput: 2.0 tokens/s, Running: {r} reqs, Waiting: {w} reqs, "
             "CPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%\n")
    log = tmp_path / "server.log"
    head = ("INFO 11-30 04:55:25 [api_utils.py:286] non-default args: {'model': '/m', 'max_num_seqs': 8}\n"
            + "".join(stats.format(s=i, r=2, w=0) for i in range(10)))
    log.write_text(head)
    offset = log.stat().st_size
    with open(log, "a") as fh:
        fh.write("".join(stats.format(s=20 + i, r=8, w=5) for i in range(4)))
    ev = read_run([log], since={str(log): offset})
    [tr] = ev.traces
    assert tr.stats["samples"] == 4 and tr.stats["queue_nonzero_frac"] == 1.0
    assert tr.samples[0].line == 12 and tr.startup["max_num_seqs"] == 8
    assert read_run([log]).traces[0].stats["samples"] == 14


def test_vllm_deprecation_warning_is_not_a_launch_command():
    from ingest.launch_command import parse_launch_command

    line = ("/venv/lib/python3.11/site-packages/vllm/entrypoints/openai/api_server.py:51: DeprecationWarning: "
            "The `python -m vllm.entrypoints.openai.api_server` command is deprecated and may be removed in a "
            "future release. Please use `vllm server` instead.")
    assert parse_launch_command(line) is None
    cmd = parse_launch_command("`python -m vllm.entrypoints.openai.api_server --model m --max-num-seqs 8`")
    assert cmd and cmd.get("max-num-seqs") == "8"


def test_summarise_with_nothing_done_has_zero_rates():
    row = summarise(4, [Outcome(error="read timeout")], 2.0, SweepOptions(levels=[4]), None, None, 1)
    assert row["completed"] == 0 and row["total_throughput"] == 0.0 and row["backend"] == "openai"
    assert all(not isinstance(v, float) or math.isfinite(v) for v in row.values())


# ------------------------------------------------------------------ lengths within the server's context


@pytest.mark.parametrize("given, ctx, want, note", [
    ((None, None), 4096, (256, 256), None),            # the defaults fit
    ((None, None), 512, (256, 256), None),             # exactly: vLLM and sglang accept prompt + output == context
    ((None, None), None, (256, 256), None),            # context unknown
    ((None, None), 300, (150, 150), "input 150 + output 150 tokens instead of the default 256 + 256"),
    ((400, None), 512, (400, 112), "output length 112 tokens, not the default 256, beside input_len 400"),
    ((None, 500), 512, (12, 500), "input length 12 tokens, not the default 256, beside output_len 500"),
    ((32, 64), 512, (32, 64), None),
])
def test_fit_lengths_fits_defaults_and_says_so(given, ctx, want, note):
    from kb.live.sweep_options import fit_lengths

    opts, said = fit_lengths(SweepOptions(levels=[1], input_len=given[0], output_len=given[1]), ctx)
    assert (opts.input_len, opts.output_len) == want
    if note:
        assert note in said and f"context is {ctx} tokens (max_model_len)" in said
    else:
        assert said is None


@pytest.mark.parametrize("given, ctx, words", [
    ((400, 200), 512, "input_len 400 + output_len 200 = 600 tokens do not fit the server's context of 512 tokens"),
    ((512, None), 512, "input_len 512 tokens leave no room in the server's context of 512 tokens"),
])
def test_fit_lengths_refuses_given_lengths_that_cannot_fit(given, ctx, words):
    from kb.errors import KbError
    from kb.live.sweep_options import fit_lengths

    with pytest.raises(KbError) as e:
        fit_lengths(SweepOptions(levels=[1], input_len=given[0], output_len=given[1]), ctx)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_calibration_never_sends_a_prompt_longer_than_the_context():
    """A small tokenizer (here 4 tokens per word plus BOS, as a byte-level vocabulary of a
    few hundred pieces spends): the first counted prompt was `target` words, 1,025 tokens
    for a 256-token target, which vLLM refuses with HTTP 400 on a 512-token server. The
    chosen prompt is the nearest at or below the target (253, not 257)."""
    import asyncio

    from kb.live.prompts import calibrate

    ctx, sent = 512, []

    def handler(request: httpx.Request) -> httpx.Response:
        n = 1 + 4 * len(json.loads(request.content)["prompt"].split())
        sent.append(n)
        if n > ctx:
            return httpx.Response(400, json={"error": {"message": f"maximum context length is {ctx} tokens"}})
        return httpx.Response(200, json={"choices": [{"text": "x"}], "usage": {"prompt_tokens": n}})

    async def run():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            return await calibrate(http, httpx.URL("http://127.0.0.1:8000"), "m", 256, 0, [])

    prompts, tokens = asyncio.run(run())
    assert max(sent) <= ctx, sent
    assert tokens == 253 and len(prompts.words) == 63  # 1 + 4 × 63; 64 words are 257 tokens


def test_a_vllm_sweep_alone_gives_commands_marked_as_needing_the_rest_of_the_launch(tmp_path):
    """vLLM publishes no endpoint with its launch arguments: a sweep's server_info holds the
    few the probe read (model, max_model_len). A command rebuilt from them would start a
    different server (no --load-format, --tensor-parallel-size, ...), so it is marked; with
    the server log (its 'non-default args' line) the command is whole."""
    from ingest.run import read_run
    from kb.flags import catalog
    from kb.launchcmd import current

    f = tmp_path / "sweep.jsonl"
    f.write_text(json.dumps(_row(8, (8, 8, 8, 8), (3, 8, 8, 7))) + "\n")
    ev = read_run([f])
    assert ev.model_path == "/m" and not ev.server_args_complete
    base = current(ev, "vllm", catalog("vllm", "0.32.0"))
    assert base.argv[:3] == ["vllm", "serve", "/m"]
    assert base.command(base.argv).endswith("  # add the rest of your launch command")

    log = tmp_path / "server.log"
    # vLLM 0.32.0's start-up line, as the live tests' server writes it (its model path shortened to /m)
    log.write_text("(APIServer pid=13126) INFO 12-01 15:11:51 [api_utils.py:286] non-default args: {'host': "
                   "'127.0.0.1', 'port': 53543, 'model': '/m', 'max_model_len': 512, 'load_format': 'dummy', "
                   "'max_num_seqs': 8}\n")
    ev = read_run([f, log])
    assert ev.server_args_complete
    base = current(ev, "vllm", catalog("vllm", "0.32.0"))
    assert "#" not in base.command(base.argv) and "--load-format dummy" in base.command(base.argv)
