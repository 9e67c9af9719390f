"""`kb report`: one self-contained HTML page, opened in headless Chromium.

The main input is a real `kb sweep` against vLLM 0.32.0 on CPU (tests/data/samples/kb_sweep,
SOURCES.md); the other formats are the real samples of every benchmark tool kb reads.
Expected counts come from the sample files themselves (read here with json), and the
knee from `kb signals --json`, so the report is checked against kb's one knee rule.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import chromium
import pytest
from conftest import DATA

# the `kb` runs here read the shipped findings: each test's home starts with them indexed
pytestmark = pytest.mark.usefixtures("shipped_home")

SAMPLES = DATA / "samples"
SWEEP = SAMPLES / "kb_sweep" / "vllm-0.32.0-cpu_max-num-seqs8_c1-32.jsonl"


def _levels(jsonl: Path) -> list[int]:
    return [json.loads(line)["max_concurrency"] for line in jsonl.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def sweep_report(tmp_path_factory):
    """kb report on the real sweep, and the DOM Chromium rendered from it."""
    import os
    import subprocess

    tmp = tmp_path_factory.mktemp("report")
    out = tmp / "report.html"
    env = {**os.environ, "KB_HOME": str(tmp / "home")}
    proc = subprocess.run([sys.executable, "-m", "kb", "report", str(SWEEP), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    sig = subprocess.run([sys.executable, "-m", "kb", "signals", str(SWEEP), "--json"], capture_output=True,
                         text=True, env=env, timeout=300)
    signals = {s["id"]: s for s in json.loads(sig.stdout)["signals"]}
    return out, chromium.Dom(chromium.dump_dom(out)), signals


def test_every_plot_rendered_with_one_marker_per_level(sweep_report):
    out, dom, _ = sweep_report
    n = len(_levels(SWEEP))
    assert n >= 5
    for plot in ("throughput", "latency", "pareto", "state"):
        assert any(tag == "svg" and a.get("data-plot") == plot for tag, a in dom.attrs), f"no {plot} plot"
    assert dom.uses["throughput-total-0"] == n
    assert dom.uses["throughput-output-0"] == n
    for key in ("ttft", "tpot", "itl"):
        for pct in ("p50", "p99"):
            assert dom.uses[f"latency-{key}-{pct}-0"] == n, (key, pct)
    assert dom.uses["pareto-series-0"] == n
    # the server-state panel: one step per /metrics sample in the file
    samples = sum(len(json.loads(line)["kb_metrics"]["samples"]) for line in SWEEP.read_text().splitlines())
    assert samples > n
    assert "state-running" in dom.ids and "state-waiting" in dom.ids and "state-kv" in dom.ids


def test_knee_and_plateau_are_kbs_throughput_plateau_signal(sweep_report):
    _, dom, signals = sweep_report
    knee = signals["throughput-plateau"]["data"]
    assert f"knee: {knee['knee']:g}" in dom.text("throughput-knee-label-0")
    assert "throughput-plateau-0" in dom.ids  # the shaded span from the knee to the last level
    assert dom.uses["throughput-knee-0"] == 1


def test_signals_recommendations_and_facts_are_on_the_page(sweep_report):
    out, dom, signals = sweep_report
    html = out.read_text()
    for sid, s in signals.items():
        assert f'data-signal="{sid}"' in html
        for ev in s["evidence"][:2]:
            assert chromium_escape(ev["text"]) in html
    assert 'class="card rec"' in html and "--max-num-seqs" in html  # KB101 for the pinned running cap
    assert '<pre class="cmd">vllm serve' in html  # a copyable command
    assert "vllm 0.32.0" in html and "Model, hardware and launch" in html


def chromium_escape(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def test_screenshot_is_not_blank(sweep_report, tmp_path):
    from PIL import Image, ImageStat

    out, _, _ = sweep_report
    shot = chromium.screenshot(out, tmp_path / "report.png")
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    control = chromium.screenshot(blank, tmp_path / "blank.png")
    with Image.open(shot) as im, Image.open(control) as bl:
        assert im.size == (1200, 2400)
        var = ImageStat.Stat(im.convert("L")).var[0]
        assert ImageStat.Stat(bl.convert("L")).var[0] < 1  # the method tells blank from drawn
        assert var > 200, f"screenshot looks blank (grey-level variance {var:.1f})"
        colours = len(im.convert("RGB").getcolors(1 << 20) or [])
        assert colours > 50, colours


class _Hits(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):
        _Hits.hits.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *a):
        pass


def test_page_makes_no_network_request(sweep_report, tmp_path):
    out, _, _ = sweep_report
    html = out.read_text()
    # nothing to fetch: no src, stylesheet link, CSS url() or @import pointing at a network address
    assert not re.search(r"""\bsrc\s*=\s*["']?(?:https?:)?//""", html, re.I)
    assert not re.search(r"""<link\b[^>]*href\s*=\s*["']?(?:https?:)?//""", html, re.I)
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", html, re.I) and "@import" not in html
    assert chromium.page_requests(out, tmp_path / "net.json") == []
    # control: the same net-log reading sees a page's request to a live local server
    server = HTTPServer(("127.0.0.1", 0), _Hits)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        page = tmp_path / "control.html"
        page.write_text(f'<html><body><img src="http://127.0.0.1:{server.server_port}/probe.png"></body></html>')
        urls = chromium.page_requests(page, tmp_path / "net2.json")
    finally:
        server.shutdown()
        server.server_close()
    assert urls == [f"http://127.0.0.1:{server.server_port}/probe.png"]
    assert "/probe.png" in _Hits.hits


# ------------------------------------------------------------------ every format


FORMATS = [
    ("sglang_bench_jsonl/run-sglang-0.5.5_sweep_c1-32-128-256_server-info.jsonl", "concurrency"),
    ("sglang_bench_text/run-sglang-0.5.5_sweep_c1-32-128-256_concatenated.txt", "concurrency"),
    ("vllm_bench_json", "concurrency"),
    ("vllm_bench_text/run-vllm-0.33.0_bench_serve_openai-chat_c256_percentiles.txt", "concurrency"),
    ("guidellm_json/run-guidellm-0.8.1_run_concurrent-1-16_benchmarks.json", "concurrency"),
    ("genai_perf/run-aiperf-0.13.0_chat_c32_profile_export_aiperf.json", "concurrency"),
    ("genai_perf/run-genai-perf-0.0.16_chat_c32_profile_export_genai_perf.json", "concurrency"),
]


@pytest.mark.parametrize("rel,kind", FORMATS, ids=[f[0].split("/")[0] for f in FORMATS])
def test_report_of_each_benchmark_format(kb, tmp_path, rel, kind):
    """Every level kb reads from the file is a marker on the throughput plot, per workload."""
    path = SAMPLES / rel
    out = tmp_path / "r.html"
    proc = kb("report", path, "--out", out)
    assert proc.returncode == 0, proc.stderr
    diag = kb("diagnose", path, "--json", check_json=True)
    from ingest.run import read_run
    from kb.compare import levels

    lvs = levels(read_run([path]).bench)
    workloads = {(lv.key[0], lv.input_len, lv.output_len) for lv in lvs}
    html = out.read_text()
    dom = chromium.Dom(html)
    total = sum(dom.uses.get(f"throughput-total-{i}", 0) for i in range(len(workloads)))
    assert total == len(lvs) and len(lvs) >= 1
    assert {c["level"] for c in diag["curve"]} <= {float(lv.key[1]) for lv in lvs}


def test_server_log_gives_the_state_panel(kb, tmp_path):
    log = SAMPLES / "sglang_logs" / "src-sglang-0.5.5_deepseek-v3_tp8_rtx-pro-6000.log"
    out = tmp_path / "r.html"
    proc = kb("report", log, "--out", out)
    assert proc.returncode == 0, proc.stderr
    dom = chromium.Dom(out.read_text())
    assert "state-running" in dom.ids and "state-kv" in dom.ids
    assert "state-preemptions" in dom.ids  # the log's "KV cache pool is full. Retract requests." lines
    assert "no benchmark results in these files" in out.read_text()


def test_saved_diagnosis_is_reported(kb, tmp_path):
    saved = tmp_path / "diag.json"
    saved.write_text(kb("diagnose", SWEEP, "--json").stdout)
    doc = json.loads(saved.read_text())
    out = tmp_path / "r.html"
    proc = kb("report", saved, "--out", out)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    for s in doc["signals"]:
        assert f'data-signal="{s["id"]}"' in html
    dom = chromium.Dom(html)
    assert dom.uses["throughput-total-0"] == len(doc["curve"])
    assert "kb diagnose --json" in html
    bad = tmp_path / "x.json"
    bad.write_text('{"signals": 3, "recommendations": [], "curve": [], "files": []}')
    proc = kb("report", bad, "--out", tmp_path / "y.html")
    assert proc.returncode == 1 and "x.json" in proc.stderr and "Traceback" not in proc.stderr


def test_without_matplotlib_says_what_to_install(kb, tmp_path):
    blocker = tmp_path / "block"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    out = tmp_path / "r.html"
    proc = kb("report", SWEEP, "--out", out, env={"PYTHONPATH": str(blocker)})
    assert proc.returncode == 1
    assert "pip install 'kb[report]'" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_bad_inputs(kb, tmp_path):
    proc = kb("report", tmp_path / "missing.jsonl", "--out", tmp_path / "r.html")
    assert proc.returncode == 1 and "missing.jsonl" in proc.stderr
    proc = kb("report", SWEEP, "--out", tmp_path / "r.html", "--engine", "tgi")
    assert proc.returncode == 2


def test_attach_writes_the_before_after_report(kb, tmp_path):
    before = SAMPLES / "kb_sweep" / "vllm-0.32.0-cpu_max-num-seqs4_c1-32.jsonl"
    out = tmp_path / "attach.html"
    proc = kb("attach", "--before", before, "--after", SWEEP, "--fix", "raise --max-num-seqs from 4 to 8",
              "--fix-class", "max-running-requests", "--report", out)
    assert proc.returncode == 0, proc.stderr
    dom = chromium.Dom(out.read_text())
    n = len(_levels(SWEEP))
    assert dom.uses["throughput-total-0"] == len(_levels(before)) and dom.uses["throughput-total-1"] == n
    html = out.read_text()
    assert f"before: {before}" in html and f"after: {SWEEP}" in html and 'class="cmp"' in html


def test_compare_report_without_matplotlib_fails_first(kb, tmp_path):
    blocker = tmp_path / "block"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    other = SAMPLES / "kb_sweep" / "vllm-0.32.0-cpu_max-num-seqs4_c1-32.jsonl"
    proc = kb("compare", SWEEP, other, "--report", tmp_path / "c.html", env={"PYTHONPATH": str(blocker)})
    assert proc.returncode == 1 and "pip install 'kb[report]'" in proc.stderr
    assert proc.stdout == ""  # nothing compared before the missing extra is named
    # without --report, compare needs no plotting library
    assert kb("compare", SWEEP, other, env={"PYTHONPATH": str(blocker)}).returncode == 0


def test_attach_observation_writes_the_run_report(kb, tmp_path):
    out = tmp_path / "observed.html"
    proc = kb("attach", "--after", SWEEP, "--fix", "max-num-seqs 8 as shipped", "--fix-class", "max-running-requests",
              "--report", out)
    assert proc.returncode == 0, proc.stderr
    dom = chromium.Dom(out.read_text())
    assert dom.uses["throughput-total-0"] == len(_levels(SWEEP)) and "throughput-total-1" not in dom.ids


def test_text_from_files_is_escaped(kb, tmp_path):
    """A file name (or any text from a file) is shown, never markup: in HTML and in the SVG."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "<img src=x onerror=alert(1)><script>alert(2)<script>.jsonl").write_bytes(SWEEP.read_bytes())
    out = tmp_path / "r.html"
    assert kb("report", d, "--out", out).returncode == 0
    dom = chromium.Dom(chromium.dump_dom(out))
    assert "img" not in dom.tags and dom.tags.get("script") == 1  # only the page's own copy-button script
    assert "&lt;img src=x onerror=alert(1)&gt;" in out.read_text()
