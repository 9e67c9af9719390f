"""`kb compare`: real kb sweeps of vLLM 0.32.0 (CPU) with --max-num-seqs 8 and 4, each
swept twice (tests/data/samples/kb_sweep/SOURCES.md). Expected values are read from
the sample files here; the regression case degrades a copy of a real sweep in its data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from statistics import median

import chromium
from conftest import DATA

S = DATA / "samples" / "kb_sweep"
A1 = S / "vllm-0.32.0-cpu_max-num-seqs8_c1-32.jsonl"
A2 = S / "vllm-0.32.0-cpu_max-num-seqs8_c1-32_run2.jsonl"
B1 = S / "vllm-0.32.0-cpu_max-num-seqs4_c1-32.jsonl"
B2 = S / "vllm-0.32.0-cpu_max-num-seqs4_c1-32_run2.jsonl"


def _lines(*files: Path) -> list[dict]:
    return [json.loads(x) for f in files for x in f.read_text().splitlines() if x.strip()]


def _by_level(*files: Path, key: str = "total_throughput") -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for d in _lines(*files):
        out.setdefault(d["max_concurrency"], []).append(d[key])
    return out


def _side(tmp: Path, name: str, *files: Path) -> Path:
    d = tmp / name
    d.mkdir()
    for f in files:
        shutil.copy(f, d / f.name)
    return d


def _expected(delta_pct: float, noise_pct: float, higher_is_better: bool) -> str:
    if abs(delta_pct) <= noise_pct + 1e-6:
        return "within noise"
    return "better" if (delta_pct > 0) == higher_is_better else "worse"


def test_two_real_sweeps(kb):
    doc = kb("compare", A1, B1, "--json", check_json=True)
    [cmp] = doc["comparisons"]
    assert doc["baseline"] == str(A1) and cmp["name"] == str(B1)
    assert {lv["load"]["value"] for lv in cmp["levels"]} == set(_by_level(A1)) & set(_by_level(B1))
    a, b = _by_level(A1), _by_level(B1)
    for lv in cmp["levels"]:
        c = int(lv["load"]["value"])
        m = {x["metric"]: x for x in lv["metrics"]}
        assert set(m) == {"total_tok_s", "output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
                          "itl_p50_ms", "itl_p99_ms"}
        tot = m["total_tok_s"]
        assert tot["baseline"] == round(a[c][0], 3) and tot["value"] == round(b[c][0], 3)
        assert abs(tot["delta_pct"] - (b[c][0] / a[c][0] - 1) * 100) < 0.01
        for x in lv["metrics"]:  # one run per side: the stated default band of 3%
            assert x["runs"] == [1, 1] and x["noise_from"] == "default" and x["noise_pct"] == 3.0
            assert x["verdict"] == _expected(x["delta_pct"], x["noise_pct"], x["higher_is_better"])
    # with the cap at 4 instead of 8, 32 concurrent streams get far less throughput and wait longer
    top = {x["metric"]: x for x in cmp["levels"][-1]["metrics"]}
    assert b[32][0] < 0.8 * a[32][0]
    assert top["total_tok_s"]["verdict"] == "worse" and top["ttft_p50_ms"]["verdict"] == "worse"
    text = kb("compare", A1, B1)
    assert text.returncode == 0, text.stderr
    assert f"{B1} vs baseline" in text.stdout and "±3.0%*" in text.stdout and "worse" in text.stdout


def test_repeated_runs_set_the_noise_band(kb, tmp_path):
    a, b = _side(tmp_path, "max-num-seqs8", A1, A2), _side(tmp_path, "max-num-seqs4", B1, B2)
    doc = kb("compare", a, b, "--json", check_json=True)
    ra, rb = _by_level(A1, A2), _by_level(B1, B2)
    for lv in doc["comparisons"][0]["levels"]:
        c = int(lv["load"]["value"])
        tot = next(x for x in lv["metrics"] if x["metric"] == "total_tok_s")
        assert tot["runs"] == [2, 2] and tot["noise_from"] == "repeats"
        spread = lambda v: (max(v) - min(v)) / median(v)  # noqa: E731
        assert abs(tot["noise_pct"] - 100 * max(spread(ra[c]), spread(rb[c]))) < 0.01
        assert tot["baseline"] == round(median(ra[c]), 3)
        assert tot["verdict"] == _expected(tot["delta_pct"], tot["noise_pct"], True)


def _degraded(tmp: Path, factor: float) -> Path:
    """A copy of the real sweep A1 whose throughput figures are multiplied by `factor`
    (the latencies are left as measured): a regression made in the data."""
    out = tmp / f"degraded-{factor}.jsonl"
    rows = []
    for d in _lines(A1):
        for k in ("total_throughput", "output_throughput", "input_throughput", "request_throughput"):
            d[k] = d[k] * factor
        rows.append(json.dumps(d))
    out.write_text("\n".join(rows) + "\n")
    return out


def test_fail_on_regression_exits_3(kb, tmp_path):
    worse = _degraded(tmp_path, 0.85)
    proc = kb("compare", A1, worse, "--fail-on-regression", "5", "--json")
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)
    hits = {(r["level"].split(" ")[0], r["metric"]) for r in doc["regressions"]}
    levels = sorted(_by_level(A1))
    assert hits == {(str(c), m) for c in levels for m in ("total_tok_s", "output_tok_s")}
    assert all(abs(r["worse_pct"] - 15) < 0.01 for r in doc["regressions"])
    text = kb("compare", A1, worse, "--fail-on-regression", "5")
    assert text.returncode == 3 and "REGRESSION: 12 metrics worse by more than 5%" in text.stdout
    # 15% worse does not fail a 20% gate, and a run against itself changes nothing
    assert kb("compare", A1, worse, "--fail-on-regression", "20").returncode == 0
    same = kb("compare", A1, A1, "--fail-on-regression", "0", "--json")
    assert same.returncode == 0
    cells = [x for lv in json.loads(same.stdout)["comparisons"][0]["levels"] for x in lv["metrics"]]
    assert cells and all(x["delta_pct"] == 0 and x["verdict"] == "within noise" for x in cells)


def test_noise_band_option(kb, tmp_path):
    worse = _degraded(tmp_path, 0.85)
    doc = kb("compare", A1, worse, "--noise", "20", "--fail-on-regression", "5", "--json", check_json=True)
    assert doc["regressions"] == [] and doc["default_noise_pct"] == 20.0


def test_mismatched_workloads_are_named_not_compared(kb, tmp_path):
    part = tmp_path / "first-three-levels.jsonl"
    part.write_text("".join(B1.read_text().splitlines(keepends=True)[:3]))
    doc = kb("compare", A1, part, "--json", check_json=True)
    [cmp] = doc["comparisons"]
    assert [lv["load"]["value"] for lv in cmp["levels"]] == sorted(_by_level(A1))[:3]
    missing = sorted(_by_level(A1))[3:]
    assert missing and all(any(n.startswith(f"{c} concurrency") and "not compared" in n for n in cmp["not_compared"])
                           for c in missing)
    # an sglang sweep of other lengths (1,024 in / 1,024 out): nothing in common, both named
    other = DATA / "samples" / "sglang_bench_jsonl" / "run-sglang-0.5.5_sweep_c1-32-128-256_server-info.jsonl"
    proc = kb("compare", A1, other)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert str(A1) in proc.stderr and str(other) in proc.stderr and "no load level in common" in proc.stderr


def test_usage_and_bad_input(kb, tmp_path):
    assert kb("compare", A1).returncode == 2
    assert kb("compare", A1, B1, "--fail-on-regression", "-1").returncode == 2
    empty = tmp_path / "notes.txt"
    empty.write_text("nothing measured here\n")
    proc = kb("compare", A1, empty)
    assert proc.returncode == 1 and "notes.txt" in proc.stderr and "no benchmark results" in proc.stderr


def test_compare_report_overlays_both_runs(kb, tmp_path):
    out = tmp_path / "cmp.html"
    proc = kb("compare", A1, B1, "--report", out)
    assert proc.returncode == 0, proc.stderr
    dom = chromium.Dom(chromium.dump_dom(out))
    for i, f in enumerate((A1, B1)):
        n = len(_by_level(f))
        assert dom.uses[f"throughput-total-{i}"] == n
        assert dom.uses[f"pareto-series-{i}"] == n
        assert dom.uses[f"latency-ttft-p99-{i}"] == n
        knee = next((s for s in kb("signals", f, "--json", check_json=True)["signals"]
                     if s["id"] == "throughput-plateau"), None)
        if knee:
            assert f"knee: {knee['data']['knee']:g}" in dom.text(f"throughput-knee-label-{i}")
        else:
            assert f"throughput-knee-label-{i}" not in dom.ids
        assert knee or i == 1, "the max-num-seqs 8 sweep has a knee"
    assert "pareto-frontier" in dom.ids  # several runs: the frontier over all their points
    html = out.read_text()
    assert 'class="cmp"' in html and str(B1) in html and "verdict" in html
