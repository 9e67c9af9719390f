"""`kb diagnose|signals --prometheus` without a server: recorded answers of a real
Prometheus (tests/data/samples/prometheus, see its SOURCES.md) replayed by a loopback
fake, the fleet and sglang fixtures built from them, and every failure Prometheus or
the network can produce."""

from __future__ import annotations

import base64
import json

import pytest
from promfake import FakePrometheus, args, fleet, load

SECRET = "prom-test-token-0123456789"
# every `kb diagnose` here reads the shipped findings: each test's home starts with them indexed
pytestmark = pytest.mark.usefixtures("shipped_home")


@pytest.fixture(scope="module")
def load_rec():
    return load("vllm-0.32.0_cap8_load.json")


def _lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.strip()]


# ------------------------------------------------------------------ one real instance


def test_recorded_vllm_answers_find_the_cap(kb, load_rec):
    with FakePrometheus(load_rec) as prom:
        proc = kb("diagnose", "--prometheus", prom.url, *args(load_rec))
        doc = kb("diagnose", "--prometheus", prom.url, *args(load_rec), "--json", check_json=True)
    assert proc.returncode == 0, proc.stderr
    assert "running-cap-with-queue (severe)" in proc.stdout and "Raise --max-num-seqs from 8 to 16" in proc.stdout
    [inst] = doc["instances"]
    assert inst["engine"] == "vllm" and inst["version_hint"] == "V1 names of 0.10 or later (kv_cache_usage_perc)"
    s = inst["stats"]
    assert s["running_max"] == 8 and s["queue_nonzero_frac"] >= 0.8 and s["idle_steps"] >= 1
    assert inst["startup"]["kv_cache_tokens"] == 1048576 and inst["startup"]["block_size"] == 128
    assert inst["server_args"] == {"gpu_memory_utilization": 0.92}  # from vllm:cache_config_info
    lat = s["latency"]
    assert 0 < lat["ttft_p50_ms"] <= lat["ttft_p99_ms"] and 0 < lat["tpot_p50_ms"] < lat["e2e_p50_ms"]
    assert s["requests"] > 0 and s["gen_throughput_mean"] > 0 and s["events"] == {}
    assert doc["prometheus"]["step_s"] == 1.0 and doc["prometheus"]["rate_window_s"] >= 4


def test_signals_lists_the_instance_without_recommendations(kb, load_rec):
    with FakePrometheus(load_rec) as prom:
        proc = kb("signals", "--prometheus", prom.url, *args(load_rec))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Signals of 127.0.0.1:" in out and "busy Prometheus steps of 1 s show a waiting queue" in out
    assert "Recommendations" not in out


def test_queries_are_by_instance_and_carry_the_selector(load_rec):
    """Every range or instant query names the selector and aggregates by instance, so
    one series per instance comes back whatever the engines' label sets are."""
    for r in load_rec["answers"]:
        q = r["params"].get("query") or r["params"].get("match[]")
        assert 'job="vllm"' in q, q
        if r["path"] == "/api/v1/query_range":
            assert q.startswith(("sum by (instance)", "max by (instance)")), q
            assert r["params"]["step"] == "1"


# ------------------------------------------------------------------ fleets


def test_fleet_one_pinned_one_idle_blames_the_router(kb):
    rec = load("fleet-2x-vllm_router.json")
    with FakePrometheus(rec) as prom:
        proc = kb("diagnose", "--prometheus", prom.url, *args(rec))
        doc = kb("diagnose", "--prometheus", prom.url, *args(rec), "--json", check_json=True)
    assert proc.returncode == 0, proc.stderr
    assert [i["instance"] for i in doc["instances"]] == ["replica-a:8000", "replica-b:8000"]  # worst first
    assert doc["worst"] == "replica-a:8000" and doc["instances"][1]["idle"]
    [v] = doc["fleet"]
    assert (v["signal"], v["scope"], v["instances"], v["others"]) == (
        "running-cap-with-queue", "confined", ["replica-a:8000"], ["replica-b:8000"])
    assert "replica-b:8000 was idle" in v["text"] and "the router" in v["text"]
    assert "Diagnosis of the worst instance, replica-a:8000" in proc.stdout
    assert doc["diagnosis"]["warnings"][0].startswith("this cap binds on replica-a:8000 only")


def test_fleet_all_pinned_is_fleet_wide(kb, load_rec):
    rec = fleet(load_rec, [(load_rec, "replica-a:8000"), (load_rec, "replica-c:8000")])
    with FakePrometheus(rec) as prom:
        doc = kb("signals", "--prometheus", prom.url, *args(rec), "--json", check_json=True)
    [v] = doc["fleet"]
    assert v["scope"] == "fleet-wide" and v["instances"] == ["replica-a:8000", "replica-c:8000"]
    assert "all 2 instances" in v["text"] and "router" not in v["text"]


def test_sglang_names_from_its_source(kb):
    rec = load("sglang-0.5.23_names.json")
    with FakePrometheus(rec) as prom:
        doc = kb("diagnose", "--prometheus", prom.url, *args(rec), "--json", check_json=True)
        asked = [p.get("query", "") for _, p, _ in prom.seen]
    [inst] = doc["instances"]
    assert inst["engine"] == "sglang" and inst["instance"] == "127.0.0.1:30000"
    assert inst["version_hint"] == "names as in 0.5.23 (request_time_per_output_token_seconds)"
    assert inst["startup"] == {"max_total_num_tokens": 1048576, "page_size": 128, "context_len": 512}
    assert inst["stats"]["running_max"] == 8 and "prefix_hit_rate" in inst["stats"]
    assert any(s["id"] == "running-cap-with-queue" for s in inst["signals"])
    assert doc["diagnosis"]["recommendations"][0]["flags"][0]["flag"] == "--max-running-requests"
    for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                 "sglang:num_retracted_requests_total", "sglang:generation_tokens_total",
                 "sglang:time_to_first_token_seconds_bucket", "sglang:request_time_per_output_token_seconds_bucket",
                 "sglang:cache_hit_rate", "sglang:max_total_num_tokens"):
        assert any(name in q for q in asked), name
    assert not any("vllm:" in q for q in asked)


# ------------------------------------------------------------------ failures: one line, exit 1


def _one_line_error(proc, *words):
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = _lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("kb: error: "), proc.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_unreachable(kb):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    _one_line_error(kb("diagnose", "--prometheus", f"http://127.0.0.1:{port}"), "connection refused")


@pytest.mark.parametrize("status,body,words", [
    (503, '{"status":"error","errorType":"unavailable","error":"TSDB not ready"}',
     ["HTTP 503 (unavailable)", "TSDB not ready"]),
    (422, '{"status":"error","errorType":"execution","error":"query processing would load too many samples"}',
     ["HTTP 422 (execution)", "too many samples"]),
    (502, "<html><body>Bad Gateway</body></html>", ["HTTP 502", "Bad Gateway"]),
    (200, "<html>Grafana</html>", ["did not answer as the Prometheus API does"]),
    (404, "404 page not found", ["HTTP 404"]),
])
def test_http_errors(kb, status, body, words):
    with FakePrometheus(status=(status, body)) as prom:
        _one_line_error(kb("signals", "--prometheus", prom.url, "--since", "10m"), *words)


def test_auth_bearer_and_basic_never_printed(kb):
    refused = (401, '{"status":"error","errorType":"unauthorized","error":"bad token ' + SECRET + '"}')
    with FakePrometheus(status=(401, "Unauthorized")) as prom:
        _one_line_error(kb("diagnose", "--prometheus", prom.url), "HTTP 401", "needs credentials")
    with FakePrometheus(status=refused) as prom:
        proc = kb("diagnose", "--prometheus", prom.url, "--prometheus-token", SECRET)
        _one_line_error(proc, "HTTP 401", "the token was refused")
        assert SECRET not in proc.stderr + proc.stdout
        assert prom.seen[0][2]["Authorization"] == f"Bearer {SECRET}"
    with FakePrometheus(status=(403, "forbidden")) as prom:
        proc = kb("signals", "--prometheus", prom.url, "--prometheus-user", "team", env={"KB_PROMETHEUS_TOKEN": SECRET})
        _one_line_error(proc, "HTTP 403", "the token was refused")
        sent = prom.seen[0][2]["Authorization"]
    assert sent == "Basic " + base64.b64encode(f"team:{SECRET}".encode()).decode()
    assert SECRET not in proc.stderr + proc.stdout


def test_token_not_in_json_output(kb, load_rec):
    with FakePrometheus(load_rec) as prom:
        proc = kb("diagnose", "--prometheus", prom.url, *args(load_rec), "--json", "--prometheus-token", SECRET)
    assert proc.returncode == 0 and SECRET not in proc.stdout + proc.stderr


def test_selector_matching_nothing_and_range_without_samples(kb, load_rec):
    empty = '{"status":"success","data":[]}'
    with FakePrometheus(status=(200, empty)) as prom:  # every label-values answer is empty
        _one_line_error(kb("diagnose", "--prometheus", prom.url, "--selector", '{job="none"}'),
                        'the selector {job="none"} matches no vLLM or sglang metric')
    # the metric names exist, but not between --start and --end
    names = next(r for r in load_rec["answers"] if r["path"].startswith("/api/v1/label/"))
    rec = {"answers": [{**names, "params": {"match[]": names["params"]["match[]"]}},
                       {**names, "body": empty}]}
    with FakePrometheus(rec) as prom:
        _one_line_error(kb("signals", "--prometheus", prom.url, "--selector", '{job="vllm"}',
                           "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T01:00:00Z"),
                        "no samples for {job=\"vllm\"} between 2026-01-01T00:00:00Z and 2026-01-01T01:00:00Z")


def test_answer_over_the_cap_is_refused(kb, monkeypatch):
    from kb.live import promapi

    big = '{"status":"success","data":["' + "x" * (promapi.ANSWER_CAP + 10) + '"]}'
    with FakePrometheus(status=(200, big)) as prom:
        _one_line_error(kb("signals", "--prometheus", prom.url), "answer larger than 16 MiB")


@pytest.mark.parametrize("argv,words", [
    (["--since", "5x"], "since: expected a duration"),
    (["--since", "1h", "--start", "1"], "since cannot be combined"),
    (["--start", "2026-01-01T00:00:00"], "start and end go together"),
    (["--start", "2026-01-01T00:00:00", "--end", "2026-01-01T01:00:00"], "give the time zone"),
    (["--start", "200", "--end", "100"], "end must be after start"),
    (["--selector", "job"], "selector: expected label matchers"),
    (["--step", "0s"], "step: the duration must be positive"),
])
def test_usage_errors_exit_2(kb, argv, words):
    proc = kb("signals", "--prometheus", "http://127.0.0.1:9", *argv)
    assert proc.returncode == 2 and words in " ".join(proc.stderr.split()), proc.stderr


def test_files_and_prometheus_are_exclusive(kb, tmp_path):
    (tmp_path / "x.log").write_text("hello\n")
    assert kb("diagnose", str(tmp_path / "x.log"), "--prometheus", "http://127.0.0.1:9").returncode == 2
    assert kb("signals", "--selector", '{job="vllm"}', str(tmp_path / "x.log")).returncode == 2
    assert kb("signals").returncode == 2


def test_credentials_in_url_refused(kb):
    proc = kb("signals", "--prometheus", f"http://u:{SECRET}@127.0.0.1:9")
    _one_line_error(proc, "not in the URL")
    assert SECRET not in proc.stderr


# ------------------------------------------------------------------ bounds (library level)


class _Api:
    """Answers shaped like Prometheus's for `n` instances; remembers what was asked."""

    where = "Prometheus at http://fake"
    base = "http://fake"

    def __init__(self, n: int):
        self.n, self.asked = n, []

    def label_values(self, label, match, start=None, end=None):
        return ["vllm:num_requests_running", "vllm:num_requests_waiting"]

    def query(self, expr, time):
        self.asked.append(("query", expr, None))
        if expr.startswith("count by (instance, model_name)"):
            return [{"metric": {"instance": f"10.0.{i // 250}.{i % 250}:8000", "model_name": "m"}, "value": [time, "1"]}
                    for i in range(self.n)]
        return [{"metric": {}, "value": [time, "60"]}]

    def query_range(self, expr, start, end, step):
        self.asked.append(("range", expr, step))
        return []


def test_points_per_series_bounded_by_raising_the_step():
    from kb.fleet.collect import MAX_POINTS, collect

    api = _Api(3)
    a = collect(api, '{job="vllm"}', 0.0, 30 * 86400.0, 1.0)  # 30 days at 1 s would be 2.6 million points
    steps = {s for kind, _, s in api.asked if kind == "range"}
    assert steps == {a.step} and 30 * 86400 / a.step <= MAX_POINTS - 1
    assert any("step raised from 1 s" in w for w in a.warnings)


def test_series_per_query_bounded_by_instances():
    from kb.fleet.collect import MAX_INSTANCES, collect

    api = _Api(MAX_INSTANCES + 50)
    a = collect(api, '{job="vllm"}', 0.0, 3600.0, 15.0)
    assert len(a.engine) == MAX_INSTANCES
    assert any(f"{MAX_INSTANCES + 50} instances match; the first {MAX_INSTANCES}" in w for w in a.warnings)
    later = [e for kind, e, _ in api.asked if kind == "range"]
    assert later and all('instance=~"10\\\\.0\\\\.0\\\\.0:8000|' in e for e in later)  # RE2-escaped, PromQL-quoted
    kept = sorted(a.engine)
    assert all(i in later[0] for i in (k.replace(".", "\\\\.") for k in kept[:3]))


def test_idle_steps_are_counted_not_sampled():
    from ingest.prometheus import Answers, trace

    a = Answers(url="http://p", selector="{}", start=0, end=5, step=1, window=4, engine={"i": "vllm"},
                series={"running": {"i": [(0, 0), (1, 8), (2, 8), (3, 0), (4, 8)]},
                        "waiting": {"i": [(0, 0), (1, 4), (2, 0), (3, 0), (4, 2)]}},
                scalars={"preemptions": {"i": 12.0}, "ttft_p50": {"i": 0.25}})
    a.names = {"vllm:num_requests_running", "vllm:num_preemptions_total"}
    tr = trace(a, "i")
    s = tr.stats
    assert (s["steps"], s["idle_steps"], s["samples"]) == (5, 2, 3)
    assert s["queue_nonzero_frac"] == pytest.approx(2 / 3, abs=1e-3) and s["running_max"] == 8
    assert s["events"] == {"preempt": 12} and "increase of vllm:num_preemptions_total" in tr.events[0].text
    assert s["latency"] == {"ttft_p50_ms": 250.0}


# ------------------------------------------------------------------ damaged answers


def test_damaged_answers_never_crash(load_rec, monkeypatch):
    """Every recorded answer in turn replaced by damaged JSON (hypothesis): kb either
    reads the fleet or stops with a KbError; nothing else escapes."""
    from hypothesis import HealthCheck, given, settings, strategies as st
    from promfake import key

    from kb.errors import KbError
    from kb.fleet.collect import collect
    from kb.fleet.report import build, report
    from kb.live import promapi

    answers = {key(r["path"], r["params"]): r for r in load_rec["answers"]}
    paths = list(answers)
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                        st.sampled_from(["NaN", "+Inf", "1e999", "8", "-1", "x", ""]), st.text(max_size=8))
    junk = st.recursive(scalars,
                        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
                        max_leaves=12)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(which=st.sampled_from(paths), where=st.sampled_from(["data", "result", "values", "metric", "body"]),
           value=junk)
    def run(which, where, value):
        def fake_call(self, method, path, params):
            rec = answers.get(key(path, params)) or {"status": 200, "body": '{"status":"success","data":[]}'}
            body = rec["body"]
            if key(path, params) == which:
                doc = json.loads(body)
                if where == "body":
                    body = json.dumps(value)
                elif where == "data" or not isinstance(doc.get("data"), dict):
                    doc["data"] = value
                    body = json.dumps(doc)
                else:
                    res = doc["data"].get("result") or [{}]
                    if where == "result":
                        doc["data"]["result"] = value
                    else:
                        res[0][where] = value
                        doc["data"]["result"] = res
                    body = json.dumps(doc)
            return promapi._envelope(rec["status"], body, path, self.where, False)

        monkeypatch.setattr(promapi.PromApi, "_call", fake_call)
        a = load_rec["args"]
        try:
            with promapi.PromApi("http://127.0.0.1:9") as api:
                fleet = build(collect(api, a["selector"], a["start"], a["end"], 1.0))
            report(fleet, with_diagnosis=False)
            json.dumps(fleet.to_json(), default=str)
        except KbError:
            pass

    run()
