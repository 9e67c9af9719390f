"""Benchmark scripts kb has no reader for: CSV, markdown and box-drawn result tables
(verbatim public outputs, tests/data/samples/generic_results/SOURCES.md) become benchmark
runs and a curve; the column mapping is shown and what was guessed is warned about; files
a specific reader owns are never read as generic tables; diagnosis uses the runs."""

import json

import pytest
from conftest import DATA

from ingest.generic_results import KIND, GenericResultsJson, classify
from ingest.run import read_run

SAMPLES = DATA / "samples"
GENERIC = SAMPLES / "generic_results"


def runs_of(name):
    ev = read_run([GENERIC / name])
    (entry,) = ev.files
    assert entry.get("kind") == KIND, entry
    return ev, entry


def by_level(ev):
    return {r.level(): r for r in ev.bench}


def test_box_drawn_console_table():
    # ┃ Concurrency ┃ Req/s ┃   Tok/s ┃ TTFT (ms) ┃ TPOT (ms) ┃ Requests ┃  (rich, heavy head)
    ev, entry = runs_of("cpueval-results-last-console.txt")
    runs = by_level(ev)
    assert sorted(runs) == [1, 8, 32]
    r8 = runs[8]
    assert (r8.request_throughput, r8.output_throughput) == (0.67, 710.55)
    assert r8.ttft_ms == {"mean": 142.2} and r8.tpot_ms == {"mean": 23.14}
    assert r8.source.line == 14  # the row's own line, for evidence
    # the small key/value box above the results table is not a results table
    assert len(ev.bench) == 3
    assert [(p.level, p.throughput) for p in ev.curve()] == [(1, 106.37), (8, 710.55), (32, 1585.99)]


def test_markdown_table_with_two_tools_reads_the_first_series_and_says_so():
    ev, entry = runs_of("llm-decode-bench-aiperf-parity-table.txt")
    assert [(r.concurrency, r.output_throughput) for r in ev.bench] == [(1, 169.1), (4, 358.0)]
    r4 = ev.bench[1]
    assert r4.ttft_ms == {"median": 115.8} and r4.itl_ms == {"median": 9.10} and r4.e2e_ms == {"median": 687.5}
    assert (r4.input_len, r4.output_len) == (75, 64)
    assert r4.server_args["bench"]["tok_s_user_p50"] == 109.9  # per-user tok/s is kept, never a throughput
    assert any("2 series" in w and "Tool=AIPerf 0.7.0" in w and "left out" in w for w in ev.warnings)


def test_csv_with_vllm_result_columns_and_configurations():
    ev, entry = runs_of("dstack-pd-ratio-results.csv")
    # request_rate is "inf" on every row: the load is max_concurrency
    runs = by_level(ev)
    assert sorted(runs) == [32, 64, 128]
    r = runs[128]
    assert (r.input_len, r.output_len) == (128, 2048)  # the first configuration only
    assert r.total_throughput == pytest.approx(10894.303245013514)
    assert r.ttft_ms["p99"] == pytest.approx(839.1076522000276)
    assert r.tpot_ms["median"] == pytest.approx(10.80831780630186)
    assert "max_concurrency → concurrency" in entry["columns"]
    assert not any("guessed" in w for w in ev.warnings)  # every column was named exactly
    assert any("19 series" in w and "prefill=1, decode=1, isl=128, osl=2048" in w for w in ev.warnings)


def test_batch_size_csv_with_quoted_tab_padded_cells():
    ev, entry = runs_of("dstack-8xh100-latency-output.csv")
    runs = by_level(ev)
    assert sorted(runs) == [4, 8, 16, 32, 64, 128]
    assert runs[16].output_throughput == pytest.approx(781.5082372)
    assert runs[16].server_args["bench"]["load"] == "batch size"
    # the latency column names no unit: read as ms and said so
    assert any("end to end latency" in w and "no unit given" in w for w in ev.warnings)


def test_csv_with_a_byte_order_mark_is_not_taken_for_gpu_facts():
    ev, entry = runs_of("dstack-throughput-latency-curve.csv")
    assert ev.hardware is None and "nvidia-smi" not in entry["kind"]
    assert [r.concurrency for r in ev.bench] == [4, 8, 16, 32, 64, 128, 256]
    assert ev.bench[0].server_args["bench"]["series"] == "gpu=8xH100 1FP8-meta, input_len=128"


def test_latency_only_table_keeps_its_runs():
    ev, entry = runs_of("iwc-core-exp1-summary.csv")
    runs = by_level(ev)
    assert sorted(runs) == [1, 2, 4, 8, 16]
    assert runs[1].e2e_ms == {"mean": 64.5, "median": 64.5, "p99": 110.07} and runs[1].request_throughput == 3.78


def test_mapping_names_what_was_guessed():
    assert classify("max_concurrency").guessed is None
    assert classify("output_throughput").guessed is None
    assert classify("mean_ttft_ms").stat == "mean" and classify("mean_ttft_ms").guessed is None
    assert classify("Tok/s").field == "output_throughput" and "no direction" in classify("Tok/s").guessed
    assert classify("C").field == "load:concurrency" and classify("C").guessed
    assert classify("TTFT (s)").scale == 1000.0
    assert classify("tok/s/user p50").field.startswith("extra:")
    assert classify("Requests") is None and classify("date") is None


def test_ingest_report_shows_the_column_mapping_and_warns(kb):
    p = kb("ingest", "--report", GENERIC / "cpueval-results-last-console.txt")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert any(line.startswith("  columns: Concurrency → concurrency; Req/s → request throughput") for line in lines)
    warning = next(line for line in lines if line.startswith("warning:"))
    assert "Tok/s → output throughput" in warning and "TTFT (ms)" in warning
    data = kb("ingest", "--json", GENERIC / "cpueval-results-last-console.txt", check_json=True)
    assert "Tok/s → output throughput" in data["evidence"][0]["columns"] and data["warnings"]


def test_files_the_specific_readers_own_are_never_read_as_generic_tables():
    checked = 0
    for p in sorted(SAMPLES.rglob("*")):
        rel = p.relative_to(SAMPLES)
        if not p.is_file() or p.suffix == ".md" or rel.parts[0] in ("generic_results", "live"):
            continue
        ev = read_run([p])
        assert all(KIND not in f.get("kind", "") for f in ev.files), rel
        assert all(r.tool != KIND for r in ev.bench), rel
        checked += 1
    assert checked >= 100


def test_results_json_of_a_decode_matrix():
    # Built here (no verbatim public file of this shape was found): the row keys are those
    # llm_decode_bench writes and its consumers read, latencies in seconds.
    doc = {"metadata": {"version": "0.7.0"}, "results": [
        {"concurrency": c, "context_tokens": ctx, "aggregate_tps": tps, "per_request_avg_tps": tps / c,
         "ttft_p50": 0.05 * c, "inter_token_latency_p50": 0.012}
        for ctx in (0, 16384) for c, tps in ((1, 80.0), (4, 290.0), (16, 610.0), (64, 650.0))]}
    runs = GenericResultsJson.read(doc, "decode.json", None)
    assert [(r.concurrency, r.output_throughput) for r in runs] == [(1, 80.0), (4, 290.0), (16, 610.0), (64, 650.0)]
    assert runs[1].ttft_ms == {"median": 200.0} and runs[1].itl_ms == {"median": 12.0}
    bench = runs[0].server_args["bench"]
    assert bench["series"] == "context_tokens=0" and bench["per_request_avg_tps"] == 80.0
    assert any("read as s" in g for g in bench["guessed"])
    # a JSON document that is not a list of per-level results is not read
    assert GenericResultsJson.read({"results": [{"name": "x"}]}, "x.json", None) is None
    assert GenericResultsJson.read({"concurrency": 4, "aggregate_tps": 1.0}, "x.json", None) is None


def test_diagnose_finds_the_plateau_in_a_generic_table(kb):
    out = kb("diagnose", GENERIC / "dstack-8xh100-latency-output.csv", "--json", check_json=True)
    ids = {s["id"] for s in out["signals"]}
    assert "throughput-plateau" in ids, out["signals"]
    plateau = next(s for s in out["signals"] if s["id"] == "throughput-plateau")
    assert {(e["where"]["path"].rsplit("/", 1)[-1], e["where"]["line"]) for e in plateau["evidence"]} >= {
        ("dstack-8xh100-latency-output.csv", 2), ("dstack-8xh100-latency-output.csv", 5)}  # rows of the table


def test_diagnose_json_file_of_results(kb, tmp_path):
    doc = {"results": [{"concurrency": c, "aggregate_tps": t} for c, t in ((1, 100.0), (2, 195.0), (4, 380.0),
                                                                          (8, 700.0), (16, 760.0), (32, 770.0))]}
    f = tmp_path / "sweep.json"
    f.write_text(json.dumps(doc))
    out = kb("diagnose", f, "--json", check_json=True)
    assert "throughput-plateau" in {s["id"] for s in out["signals"]}


def test_sweep_script_markdown_table_and_its_md_file_is_evidence(kb, tmp_path):
    # "## Benchmark Result (ISL:OSL=3000:150)" and the table tke llmbench's bench.sh writes
    ev, entry = runs_of("tke-llmbench-deepseek-r1-3000-150.txt")
    runs = by_level(ev)
    assert sorted(runs) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert runs[128].output_throughput == 416.2 and runs[128].ttft_ms == {"mean": 2976.7, "p99": 35364.6}
    assert runs[128].e2e_ms["p99"] == 79375.69
    # saved as the script names it (benchmark_result_<ISL>_<OSL>.md), it is run evidence, not notes
    from ingest.detect import split_paths

    md = tmp_path / "benchmark_result_3000_150.md"
    md.write_bytes((GENERIC / "tke-llmbench-deepseek-r1-3000-150.txt").read_bytes())
    findings, evidence, _ = split_paths([md])
    assert (findings, evidence) == ([], [md])
    notes = tmp_path / "notes.md"  # prose around the same table: a team's notes, indexed as knowledge
    notes.write_text("## Sweep\n\nRan it twice.\n\n" + md.read_text())
    assert split_paths([notes])[0] == [notes]
    out = kb("diagnose", md, "--json", check_json=True)
    assert "ttft-queueing" in {s["id"] for s in out["signals"]}


# ------------------------------------------------------------ concurrency as columns


def test_decode_matrix_with_concurrency_as_columns():
    # "| ctx \ conc | 1 | 2 | … | 128 |", one row per context length, under the heading that names
    # the values ("AWQ MTP ON — Aggregate Throughput (tok/s)"): llm_decode_bench results as published
    ev, entry = runs_of("rtx6kpro-qwen35-397b-awq-mtp-decode-matrix.txt")
    assert [(r.concurrency, r.output_throughput) for r in ev.bench] == [
        (1, 147), (2, 269), (4, 411), (8, 767), (16, 1163), (32, 1679), (64, 2622), (128, 3519)]
    assert {r.source.line for r in ev.bench} == {5}  # the ctx=0 row
    assert entry["columns"].startswith("1 … 128 (column headers) → concurrency")
    assert "Aggregate Throughput (tok/s) → output throughput" in entry["columns"]
    assert ev.bench[0].server_args["bench"]["series"] == "ctx \\ conc=0"
    assert any("5 rows in one matrix" in w and "ctx \\ conc=16k" in w and "left out" in w for w in ev.warnings)
    assert any("guessed" in w and "column headers" in w for w in ev.warnings)
    assert [(p.level, p.throughput) for p in ev.curve()][-1] == (128, 3519)


def test_matrix_without_a_heading_or_a_concurrency_name_is_not_read(tmp_path):
    text = (GENERIC / "rtx6kpro-qwen35-397b-awq-mtp-decode-matrix.txt").read_text().splitlines()
    bare = tmp_path / "no-heading.txt"  # the same table with nothing saying what its cells measure
    bare.write_text("\n".join(text[2:]) + "\n")
    assert not read_run([bare]).bench
    years = tmp_path / "years.txt"  # whole numbers as columns and no word for a load: not a load level
    years.write_text("### Aggregate Throughput (tok/s)\n\n" + "\n".join(
        ln.replace("ctx \\ conc", "region") for ln in text[2:]) + "\n")
    assert not read_run([years]).bench


def test_ingest_report_shows_the_matrix_mapping(kb):
    proc = kb("ingest", "--report", GENERIC / "rtx6kpro-qwen35-397b-awq-mtp-decode-matrix.txt")
    assert proc.returncode == 0, proc.stderr
    assert "1 … 128 (column headers) → concurrency" in proc.stdout + proc.stderr
