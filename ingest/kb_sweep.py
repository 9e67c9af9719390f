"""`kb sweep --out` JSONL: sglang bench_serving lines plus `kb_metrics`.

Each line is one concurrency level in sglang's `--output-file` shape (read by
ingest.sglang_bench) with an extra `kb_metrics` object: the server's /metrics
sampled while the level ran:

    {"engine": "vllm", "source": "/metrics", "interval_s": 1.0,
     "names": {"running": "vllm:num_requests_running", ...},
     "startup": {"kv_cache_tokens": 1048576, ...},
     "before": {...figures...}, "after": {...figures...},
     "samples": [{"t": 0.25, "running": 8, "waiting": 8, "kv_cache_usage": 0.01,
                  "preemptions_total": 0, "generation_tokens_total": 1234}, ...]}

The samples become a ServerTrace (one per level) so the log-driven signals —
running requests pinned at the cap while requests wait, KV-cache pressure,
preemptions — read live metrics the way they read a server log.
"""

from __future__ import annotations

from typing import Any, Mapping

from ingest import bench_common as bc, sglang_bench
from ingest.serverlog import EventLog, SampleStats
from kb.records import Sample, ServerTrace

KIND = "kb-sweep-jsonl"
TOOL = "kb-sweep"
MAX_SAMPLES = 2000


def _int(v: Any) -> int | None:
    f = bc.num(v)
    return int(f) if f is not None and f >= 0 else None


def _frac(v: Any) -> float | None:
    f = bc.num(v)
    return f if f is not None and 0 <= f <= 1.5 else None


def metrics_trace(km: Mapping, path: str, line: int | None, level: Any, version: str | None) -> ServerTrace | None:
    engine = km.get("engine")
    samples = km.get("samples")
    if engine not in ("vllm", "sglang") or not isinstance(samples, list):
        return None
    stats = SampleStats()
    kept: list[Sample] = []
    prev_tokens, prev_t = None, None
    for s in samples[:MAX_SAMPLES]:
        if not isinstance(s, Mapping):
            continue
        t = bc.num(s.get("t"))
        tokens = bc.num(s.get("generation_tokens_total"))
        gen = None
        if tokens is not None and prev_tokens is not None and t is not None and prev_t is not None and t > prev_t:
            gen = max(0.0, (tokens - prev_tokens) / (t - prev_t))
        if tokens is not None and t is not None:
            prev_tokens, prev_t = tokens, t
        sample = Sample(line=line, time=f"+{t:.2f}s" if t is not None else None, kind="stats",
                        running=_int(s.get("running")), queued=_int(s.get("waiting")),
                        token_usage=_frac(s.get("kv_cache_usage")), gen_throughput=gen)
        if sample.running is None and sample.queued is None:
            continue
        stats.observe(sample)
        kept.append(sample)
    if not kept:
        return None
    events = EventLog(path)
    before, after = km.get("before"), km.get("after")
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        b, a = bc.num(before.get("preemptions_total")), bc.num(after.get("preemptions_total"))
        if b is not None and a is not None and a > b:
            n = int(a - b)
            name = (km.get("names") or {}).get("preemptions_total", "preemptions")
            kind = "retract" if engine == "sglang" else "preempt"
            events.add(kind, line or 0, f"{n} {kind} events during concurrency {level} ({name} {int(b)} → {int(a)})")
            events.counts[kind] = n  # one line stands for n events
    d = stats.as_dict()
    d["events"] = dict(sorted(events.counts.items()))
    d["origin"] = "metrics"
    d["interval_s"] = bc.num(km.get("interval_s"))
    d["level"] = level
    startup = {str(k): v for k, v in (km.get("startup") or {}).items() if isinstance(v, (int, float, str, bool))}
    return ServerTrace(engine=engine, engine_version=version, source=f"{path}", startup=startup, samples=kept,
                       stats=d, events=events.events, lines=len(kept))


@bc.guarded(KIND)
def read(doc: Any, path: str, line: int | None) -> list | None:
    """One kb sweep line → [BenchRun, ServerTrace], or None if not kb's."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("kb_metrics", {}), Mapping):
        return None
    if doc.get("tool") != TOOL and "kb_metrics" not in doc:
        return None
    runs = sglang_bench.read(doc, path, line)
    if not runs:
        return None
    runs = [r.model_copy(update={"tool": TOOL}) for r in runs]
    km = doc.get("kb_metrics")
    trace = metrics_trace(km, path, line, doc.get("max_concurrency"), runs[0].engine_version) if km else None
    return [*runs, *([trace] if trace else [])]


class KbSweepJsonl:
    kind = KIND
    read = staticmethod(read)


READERS = (KbSweepJsonl,)
