"""vLLM V1 reports preemptions only as a counter in its periodic stats line
(v1/metrics/loggers.py, LoggingStatLogger.log: `Preemptions: %d` after the waiting count,
printed when the interval's count is above 0, reset every interval). Those counts are the
log's preempt events: they reach the KV-pressure signal even when usage stays below its
threshold, and the fast reader (ingest/logscan.py) gives the same result as the line reader."""

from __future__ import annotations

from pathlib import Path

from ingest.run import read_run
from kb.signals import detect

# the format of vLLM 0.32's LoggingStatLogger.log, usage below the 95% pressure threshold
HEAD = "(APIServer pid=1) INFO 05-12 19:{m:02d}:{s:02d} [loggers.py:335] Engine 000: "
LINE = ("Avg prompt throughput: 1727.4 tokens/s, Avg generation throughput: 6065.7 tokens/s, "
        "Running: 64 reqs, Waiting: {w} reqs{p}, GPU KV cache usage: 81.5%, Prefix cache hit rate: 18.2%")


def _log(tmp_path: Path, preempt: list[int]) -> Path:
    rows = [HEAD.format(m=i // 60 % 60, s=i % 60) + LINE.format(w=3 * i, p=f", Preemptions: {n}" if n else "")
            for i, n in enumerate(preempt)]
    p = tmp_path / "server.log"
    p.write_text("\n".join(rows) + "\n")
    return p


def test_preemption_counters_are_summed_as_events(tmp_path):
    ev = read_run([_log(tmp_path, [0, 5, 0, 3, 4])])
    (tr,) = ev.traces
    assert tr.stats["events"]["preempt"] == 12  # per-interval counts add up
    assert [e.data.get("interval") for e in tr.events if e.kind == "preempt"] == [5, 3, 4]
    sig = {s.id: s for s in detect(ev)}["kv-cache-pressure"]
    assert sig.data["events"] == 12 and sig.severity == "severe"  # 12 >= 10 events


def test_no_counter_no_events(tmp_path):
    ev = read_run([_log(tmp_path, [0, 0, 0])])
    (tr,) = ev.traces
    assert "preempt" not in tr.stats.get("events", {})
    assert "kv-cache-pressure" not in {s.id for s in detect(ev)}


def test_long_log_counts_every_interval(tmp_path):
    """Thousands of lines: the fast reader hands counter lines to the line parser, none lost."""
    counts = [(i % 7 == 0) * 2 for i in range(3000)]
    ev = read_run([_log(tmp_path, counts)])
    assert ev.traces[0].stats["events"]["preempt"] == sum(counts)
