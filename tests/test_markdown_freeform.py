"""Free-form FINDINGS.md (tests/data/markdown/messy_FINDINGS.md, what to expect in
EXPECTED.md beside it): no section lost, commands, gains and context extracted."""

import re

import pytest
from conftest import DATA

from ingest.markdown import read_findings

MESSY = DATA / "markdown" / "messy_FINDINGS.md"


@pytest.fixture(scope="module")
def records():
    return read_findings(MESSY, "messy_FINDINGS.md")


def by_title(records, fragment):
    (r,) = [r for r in records if r.title.endswith(fragment)]
    return r


def heading_lines(text):
    lines, fence = [], False
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            lines.append(i)
    return lines


def test_no_section_is_lost(records):
    starts = [r.sources[0].line_start for r in records]
    assert starts == heading_lines(MESSY.read_text())
    assert len(records) == 14


def test_every_record_cites_its_lines(records):
    for r in records:
        src = r.sources[0]
        assert src.path == "messy_FINDINGS.md" and src.line_end >= src.line_start


def test_commands_from_code_blocks_and_inline_code(records):
    driver = by_title(records, "driver / cuInit error 3 (rtx box)")
    assert any("uvm_disable_hmm=1" in c and "sudo modprobe nvidia_uvm" in c for c in driver.commands)
    p2p = by_title(records, "VM -> LXC, P2P")
    assert "nvidia-smi topo -m" in p2p.commands
    assert any(c.startswith("export NCCL_P2P_LEVEL=SYS") for c in p2p.commands)
    kimi = by_title(records, "Kimi K2 NVFP4 on 8x RTX PRO 6000 — sglang 0.5.2")
    assert any("--tp-size 8" in c and c.startswith("python -m sglang.launch_server") for c in kimi.commands)
    # the Decode batch log block is output, not a command; flag fragments are not commands
    assert not any("Decode batch" in c for r in records for c in r.commands)
    assert not any(c.strip() in ("--max-num-seqs 256", "--request-rate inf", "cuInit") for r in records
                   for c in r.commands)


def gain_tuples(r):
    return {(g.metric, g.before, g.after, g.unit) for g in r.gains}


def test_gains_from_arrows_ratios_percents_and_tables(records):
    tldr = by_title(records, "TL;DR")
    assert {("total throughput", 880, 3740, "tok/s"), ("TTFT", 1250, 875, "ms"),
            ("total throughput", 2100, 3024, "tok/s"), ("total throughput", 1930, 2316, "tok/s")} <= gain_tuples(tldr)
    moe = by_title(records, "MoE backend")
    assert ("total throughput", 880, 2640, "tok/s") in gain_tuples(moe)
    assert moe.gains[0].concurrency == 256
    limits = by_title(records, "batch limits")
    assert ("single-stream decode", 11, 27, "tok/s") in gain_tuples(limits)
    assert ("total throughput", 2640, 3740, "tok/s") in gain_tuples(limits)
    regression = by_title(records, "nccl env that did nothing")
    assert regression.gains[0].ratio() < 1


def test_setting_changes_and_log_counters_are_not_gains(records):
    limits = by_title(records, "batch limits")
    assert not any(g.before in (0.88, 128) for g in limits.gains)


def test_context_from_mentions_and_parent_headings(records):
    moe = by_title(records, "MoE backend")
    assert (moe.context.engine, moe.context.engine_version) == ("sglang", "0.5.2")
    assert moe.context.gpu == "RTX PRO 6000 Blackwell" and moe.context.arch() == "SM120"
    assert moe.context.quantization == "nvfp4"
    vllm = by_title(records, "vllm side")
    assert (vllm.context.engine, vllm.context.engine_version) == ("vllm", "0.10.1")
    assert vllm.context.gpu == "H200" and vllm.context.model == "DeepSeek-V3"
    assert "expert-parallelism" in vllm.fix_classes


def test_unclassifiable_sections_are_kept_as_searchable_notes(records):
    todo = by_title(records, "TODO")
    assert todo.kind == "note" and todo.body
    broken = by_title(records, "quant comparison (half done, table is broken)")
    assert "OOM" in broken.body and "INT4" in broken.body  # ragged rows kept


def test_moe_and_batch_sections_are_findings_with_fix_classes(records):
    assert "moe-runner-backend" in by_title(records, "MoE backend").fix_classes
    limits = by_title(records, "batch limits")
    assert limits.kind == "finding"
    assert {"max-running-requests", "cuda-graph-max-bs"} <= set(limits.fix_classes)


# Result tables in public practitioner notes (tests/data/practitioner_notes, verbatim)
NOTES = DATA / "practitioner_notes"


def _gains(doc, title_end):
    f = next(r for r in read_findings(NOTES / doc) if r.title.endswith(title_end))
    return {(g.metric, g.before, g.after, g.unit) for g in f.gains}


def test_per_config_rows_against_the_baseline_row_become_gains():
    # | Configuration | Input TPS | Total TPS | Mean TTFT (ms) | Mean TPOT (ms) |, one row "Without LMCache"
    g = _gains("gpustack-lmcache-prefill.md", "Multi-turn Conversation Performance / 20K Input Tokens")
    vs = " (With LMCache vs Without LMCache)"
    assert ("input throughput" + vs, 4312.17, 7750.60, "tok/s") in g
    assert ("TTFT" + vs, 5070.52, 2091.00, "ms") in g
    assert ("TPOT" + vs, 33.91, 25.83, "ms") in g
    # "BF16 (Baseline)" row; the "(+1.6%)" beside a value does not change the measured pair
    kv = _gains("gpustack-quantization-vllm.md", "Experimental Results / KV Cache Quantization")
    assert ("total throughput (BF16 + KV Cache FP8 (E4M3) vs BF16 (Baseline))", 13305.38, 13513.19, "tok/s") in kv


def test_before_after_columns_with_one_metric_per_line_in_a_cell():
    # the row (one line in the file): | **ShareGPT** | Total TPS: 5482.59<br>Mean TPOT(ms): 227.45 |
    #                                  Total TPS: 7143.30 (+30.3%)<br>Mean TPOT(ms): 304.71 |
    g = _gains("gpustack-deepseek-r1-h200.md", "Conclusion")
    assert ("total throughput", 5482.59, 7143.30, "tok/s") in g
    assert ("TPOT", 227.45, 304.71, "ms") in g
    # "Total TPS: 7787.17x2": one replica's figure doubled is arithmetic, never a measured after
    q = _gains("gpustack-qwen3-235b-h100.md", "Conclusion")
    assert not any(after == 7787.17 or before == 8424.86 and metric == "total throughput" for metric, before, after,
                   _ in q)
    assert ("TPOT", 147.56, 186.26, "ms") in q


def test_a_percentage_is_named_by_the_metric_written_after_it():
    # "- **Dynamic FP8**: +14.8% TPS, -14.1% TTFT, -21.8% TPOT"
    g = _gains("gpustack-quantization-vllm.md", "Conclusions")
    assert {("total throughput", 100.0, 114.8, "%"), ("TTFT", 100.0, 85.9, "%"), ("TPOT", 100.0, 78.2, "%")} <= g


def test_the_model_a_document_names_once_holds_for_its_sections():
    # "- **Model**: Qwen3-8B" under Experimental Setup; the results sections name only GPUs
    recs = read_findings(NOTES / "gpustack-quantization-vllm.md")
    h100 = next(r for r in recs if r.title.endswith("Experimental Results / H100 80GB"))
    assert "Qwen3-8B" in h100.tags
    chunk = next(r for r in read_findings(NOTES / "gpustack-lmcache-prefill.md")
                 if r.title.endswith("Tuning Chunk Size"))
    assert chunk.tags == ["Qwen3-8B"]
    # "Qwen3-235B" and "Qwen3-235B-A22B" are one model: the longer name is carried
    from ingest.markdown import parse_findings

    recs = parse_findings("# Sweep\n\nQwen3-235B on 8x H100, the Qwen3-235B-A22B-Instruct FP8 build.\n\n"
                          "## TP4\n\n7527 tok/s\n", "n.md")
    assert next(r for r in recs if r.title.endswith("TP4")).tags == ["Qwen3-235B-A22B"]
    # no model named with its size: nothing is added
    assert not any(r.tags for r in read_findings(NOTES / "dstack-deepseek-r1-mi300x-h200.md"))
