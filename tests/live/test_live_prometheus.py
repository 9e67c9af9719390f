"""`kb diagnose --prometheus` against a real Prometheus scraping a real vLLM server
(--max-num-seqs 8) every second: the cap is found from Prometheus alone.

With KB_RECORD_PROMETHEUS=DIR the API answers of the loaded and the idle window are
also written there (how tests/data/samples/prometheus/ was made; see its SOURCES.md)."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from live import prometheus_server as ps
from live.util import read_jsonl

IDLE_S = 10
LOAD_S = 20


@pytest.fixture
def prometheus(vllm8, tmp_path):
    """A real Prometheus scraping vllm8 every second (job "vllm"); stopped on every path."""
    try:
        server = ps.start(tmp_path / "prometheus", [f"127.0.0.1:{vllm8.port}"])
    except (ps.PrometheusMissing, RuntimeError) as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield server
    finally:
        server.stop()
    assert server.proc.poll() is not None, "prometheus still running after stop()"
    with socket.socket() as s:  # its port is free again (SO_REUSEADDR: TIME_WAIT is fine, a listener is not)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", server.port))


def _record(prom_url: str, start: float, end: float, step: str, selector: str, path: Path) -> None:
    from kb.fleet.collect import collect, duration
    from kb.live.promapi import PromApi

    with PromApi(prom_url, record=[]) as api:
        collect(api, selector, start, end, duration(step, "--step"))
        answers = [{"path": r.path, "params": r.params, "status": r.status, "body": r.body} for r in api.record]
    doc = {"prometheus": "2.42.0+ds (Debian bookworm package)", "url": prom_url,
           "args": {"selector": selector, "start": start, "end": end, "step": step}, "answers": answers}
    path.write_text(json.dumps(doc, indent=1) + "\n")


def test_diagnose_from_prometheus_finds_the_cap(vllm8, prometheus, kb_live, tmp_path):
    ps.wait_for_scrapes(prometheus, "vllm:num_requests_running", 3)
    idle0 = time.time()
    time.sleep(IDLE_S)  # nothing runs: the idle window
    idle1 = load0 = time.time()
    out = tmp_path / "sweep.jsonl"
    sweep = kb_live("sweep", vllm8.url, "-c", "16", "--duration", LOAD_S, "--input-len", "32", "--output-len", "128",
                    "--out", out)
    assert sweep.returncode == 0, sweep.stderr
    time.sleep(3)  # the last scrapes after the load
    load1 = time.time()
    [level] = read_jsonl(out)
    selector = '{job="vllm"}'
    window = ["--prometheus", prometheus.url, "--selector", selector, "--start", f"{load0:.3f}",
              "--end", f"{load1:.3f}", "--step", "1s"]

    proc = kb_live("diagnose", *window)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    instance = f"127.0.0.1:{vllm8.port}"
    assert f"running-cap-with-queue (severe): running requests pinned at the cap while requests queue on the " \
           f"only instance, {instance}" in text
    assert "running requests reach 8 (cap 8)" in text
    assert "Raise --max-num-seqs from 8 to 16" in text
    assert "vllm: V1 names of 0.10 or later (kv_cache_usage_perc)" in text

    doc = json.loads(kb_live("diagnose", *window, "--json").stdout)
    [inst] = doc["instances"]
    s = inst["stats"]
    assert inst["instance"] == instance and inst["engine"] == "vllm" and doc["worst"] == instance
    assert s["running_max"] == 8 and s["queued_max"] >= 1 and s["queue_nonzero_frac"] >= 0.8
    assert s["samples"] >= LOAD_S * 0.6  # busy one-second steps (Prometheus scraped every second)
    assert inst["startup"]["kv_cache_tokens"] == 1048576  # vllm:cache_config_info, VLLM_CPU_KVCACHE_SPACE=1
    # the counters agree with what the client measured (increase() extrapolates a little at the edges)
    assert s["requests"] == pytest.approx(level["completed"], rel=0.1)
    assert s["latency"]["ttft_p50_ms"] > 0 and s["latency"]["e2e_p99_ms"] > s["latency"]["ttft_p50_ms"]
    assert s["gen_throughput_mean"] > 0
    [sig] = [x for x in inst["signals"] if x["id"] == "running-cap-with-queue"]
    assert sig["data"]["cap"] == 8 and sig["severity"] == "severe"
    assert doc["diagnosis"]["recommendations"][0]["flags"][0]["flag"] == "--max-num-seqs"

    proc = kb_live("signals", *window)
    assert proc.returncode == 0 and "running-cap-with-queue" in proc.stdout and "Recommendations" not in proc.stdout

    idle = ["--prometheus", prometheus.url, "--selector", selector, "--start", f"{idle0:.3f}",
            "--end", f"{idle1:.3f}", "--step", "1s"]
    proc = kb_live("signals", *idle)
    assert proc.returncode == 0, proc.stderr
    assert "nothing looks wrong on any instance" in proc.stdout and " idle" in proc.stdout

    # a selector that matches nothing, and a range without samples: one line each, exit 1
    proc = kb_live("diagnose", "--prometheus", prometheus.url, "--selector", '{job="sglang"}', "--since", "5m")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "matches no vLLM or sglang metric" in proc.stderr
    proc = kb_live("signals", "--prometheus", prometheus.url, "--start", f"{idle0 - 7200:.0f}",
                   "--end", f"{idle0 - 3600:.0f}")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "no samples" in proc.stderr, proc.stderr

    record = os.environ.get("KB_RECORD_PROMETHEUS")
    if record:
        d = Path(record)
        d.mkdir(parents=True, exist_ok=True)
        _record(prometheus.url, load0, load1, "1s", selector, d / "vllm-0.32.0_cap8_load.json")
        _record(prometheus.url, idle0, idle1, "1s", selector, d / "vllm-0.32.0_cap8_idle.json")
        (d / "sweep.jsonl").write_text(out.read_text())
