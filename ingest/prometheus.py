"""Prometheus API answers about vLLM / sglang instances → one ServerTrace per instance.

The engines' metric names, per figure, first present wins (checked in their sources):

- vLLM 0.32.0 `vllm/v1/metrics/loggers.py`: gauges `vllm:num_requests_running`,
  `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc` (0..1); counters
  `vllm:num_preemptions`, `vllm:prompt_tokens`, `vllm:generation_tokens`,
  `vllm:request_success`, `vllm:prefix_cache_queries`, `vllm:prefix_cache_hits`
  (prometheus_client exports a counter as `<name>_total`); histograms
  `vllm:time_to_first_token_seconds`, `vllm:inter_token_latency_seconds`,
  `vllm:request_time_per_output_token_seconds`, `vllm:e2e_request_latency_seconds`;
  the info gauge `vllm:cache_config_info` (labels: the cache configuration). Every
  series carries `model_name` and `engine` (one per data-parallel engine).
- vLLM before 0.10 (the V0 engine's `vllm/engine/metrics.py`, docs/design/v1/metrics.md
  "v0 Metrics"): `vllm:gpu_cache_usage_perc`, `vllm:gpu_prefix_cache_hit_rate`
  (a gauge), `vllm:time_per_output_token_seconds` (per output token, i.e. an
  inter-token latency), `vllm:num_preemptions_total`; early V1 releases counted
  `vllm:gpu_prefix_cache_queries` / `vllm:gpu_prefix_cache_hits`.
- sglang 0.5.23 `python/sglang/srt/observability/metrics_collector.py`: gauges
  `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:token_usage` (0..1),
  `sglang:cache_hit_rate`, `sglang:gen_throughput`; counters
  `sglang:num_retracted_requests_total`, `sglang:prompt_tokens_total`,
  `sglang:generation_tokens_total`, `sglang:num_requests_total`; histograms
  `sglang:time_to_first_token_seconds`, `sglang:inter_token_latency_seconds`,
  `sglang:request_time_per_output_token_seconds`, `sglang:e2e_request_latency_seconds`;
  constants set once at start-up: `sglang:max_total_num_tokens`, `sglang:context_len`,
  `sglang:page_size`. Older releases (`python/sglang/srt/metrics/collector.py`,
  docs/references/production_metrics.md) named the per-token histogram
  `sglang:time_per_output_token_seconds`. Series carry `model_name` and rank labels.

Neither engine exports its version as a metric, so the version is given as a hint
from the names present (`version_hint`), never as a number kb did not see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from ingest.metrics_text import Scrape, vllm_cache_config
from ingest.serverlog import EventLog, SampleStats
from kb.records import Sample, ServerTrace

KIND = "prometheus"
ENGINES = ("vllm", "sglang")

# figure → candidate metric names (as stored in Prometheus), first present wins.
# Histograms are named without their _bucket suffix.
NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "preemptions": ("vllm:num_preemptions_total",),
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "generation_tokens": ("vllm:generation_tokens_total",),
        "requests": ("vllm:request_success_total",),
        "ttft": ("vllm:time_to_first_token_seconds",),
        "tpot": ("vllm:request_time_per_output_token_seconds",),
        "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "e2e": ("vllm:e2e_request_latency_seconds",),
        "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
        "info": ("vllm:cache_config_info",),
    },
    "sglang": {
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
        "preemptions": ("sglang:num_retracted_requests_total",),
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "generation_tokens": ("sglang:generation_tokens_total",),
        "requests": ("sglang:num_requests_total",),
        "ttft": ("sglang:time_to_first_token_seconds",),
        "tpot": ("sglang:request_time_per_output_token_seconds",),
        "itl": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        "e2e": ("sglang:e2e_request_latency_seconds",),
        "prefix_hit_rate": ("sglang:cache_hit_rate",),
        "max_total_num_tokens": ("sglang:max_total_num_tokens",),
        "context_len": ("sglang:context_len",),
        "page_size": ("sglang:page_size",),
    },
}
HISTOGRAMS = ("ttft", "tpot", "itl", "e2e")
SGLANG_CONSTANTS = ("max_total_num_tokens", "context_len", "page_size")

# names that tell releases apart: (name, what its presence says)
VERSION_MARKS: dict[str, tuple[tuple[str, str], ...]] = {
    "vllm": (("vllm:kv_cache_usage_perc", "V1 names of 0.10 or later (kv_cache_usage_perc)"),
             ("vllm:gpu_cache_usage_perc", "names from before 0.10 (gpu_cache_usage_perc)"),
             ("vllm:num_requests_swapped", "the V0 engine (num_requests_swapped)")),
    "sglang": (("sglang:request_time_per_output_token_seconds",
                "names as in 0.5.23 (request_time_per_output_token_seconds)"),
               ("sglang:time_per_output_token_seconds", "names of older releases (time_per_output_token_seconds)")),
}


def present(names: set[str], engine: str, figure: str) -> str | None:
    """The metric this Prometheus holds for `figure` (histograms: the one with _bucket series)."""
    for n in NAMES[engine].get(figure, ()):
        if (n + "_bucket" if figure in HISTOGRAMS else n) in names:
            return n
    return None


def version_hint(names: set[str], engine: str) -> str | None:
    marks = [what for n, what in VERSION_MARKS.get(engine, ()) if n in names or n + "_bucket" in names]
    return "; ".join(marks) or None


@dataclass
class Answers:
    """What kb/fleet/collect.py asked Prometheus, per instance."""

    url: str
    selector: str
    start: float
    end: float
    step: float
    window: float  # rate() window, seconds
    names: set[str] = field(default_factory=set)
    engine: dict[str, str] = field(default_factory=dict)  # instance → vllm | sglang
    model: dict[str, str] = field(default_factory=dict)  # instance → model_name label
    series: dict[str, dict[str, list[tuple[float, float]]]] = field(default_factory=dict)  # figure → instance → points
    scalars: dict[str, dict[str, float]] = field(default_factory=dict)  # figure → instance → value over the range
    info: dict[str, dict[str, str]] = field(default_factory=dict)  # instance → info labels / constants
    warnings: list[str] = field(default_factory=list)

    def source(self, instance: str) -> str:
        return f"prometheus {self.url} instance={instance}"


def iso(t: float) -> str:
    try:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):  # a timestamp no calendar holds, from a damaged answer
        return f"{t:g}"


def _count(v: float | None) -> int | None:
    return int(round(v)) if v is not None and v >= 0 else None


def trace(a: Answers, instance: str) -> ServerTrace:
    """One instance's steps as a server trace. Steps where nothing runs or waits are
    counted but not sampled, as vLLM's own stats logger skips idle intervals
    (vllm/v1/metrics/loggers.py: `engine_is_idle` → debug level), so a long quiet
    range does not dilute the share of time requests queued."""
    engine = a.engine[instance]
    by_t: dict[float, dict[str, float]] = {}
    for figure in ("running", "waiting", "kv_cache_usage", "prompt_tps", "gen_tps"):
        for t, v in a.series.get(figure, {}).get(instance, []):
            by_t.setdefault(t, {})[figure] = v
    stats, kept, idle = SampleStats(), [], 0
    for t in sorted(by_t):
        f = by_t[t]
        s = Sample(time=iso(t), kind="stats", running=_count(f.get("running")), queued=_count(f.get("waiting")),
                   token_usage=f.get("kv_cache_usage"), gen_throughput=f.get("gen_tps"),
                   prompt_throughput=f.get("prompt_tps"))
        if not s.running and not s.queued:
            idle += 1
            continue
        stats.observe(s)
        kept.append(s)
    source = a.source(instance)
    events = EventLog(source)
    n = _count(a.scalars.get("preemptions", {}).get(instance))
    if n:
        kind = "retract" if engine == "sglang" else "preempt"
        name = present(a.names, engine, "preemptions")
        events.add(kind, 0, f"{n} {kind} events between {iso(a.start)} and {iso(a.end)} "
                            f"(increase of {name} on {instance})")
        events.counts[kind] = n  # one line stands for n events
    d = stats.as_dict()
    d.update(events=dict(sorted(events.counts.items())), origin=KIND, instance=instance, steps=len(by_t),
             idle_steps=idle, step_s=a.step, window_s=a.window)
    for figure in ("requests", "prefix_hit_rate"):
        v = a.scalars.get(figure, {}).get(instance)
        if v is not None:
            d[figure] = round(v, 4)
    latency = {}
    for h in HISTOGRAMS:
        for q in ("p50", "p99"):
            v = a.scalars.get(f"{h}_{q}", {}).get(instance)
            if v is not None:
                latency[f"{h}_{q}_ms"] = round(v * 1000, 2)
    d["latency"] = latency
    args, startup = _info(a, instance, engine)
    return ServerTrace(engine=engine, engine_version=None, source=source, startup=startup, server_args=args,
                       samples=kept, stats=d, events=events.events, lines=len(by_t))


def _info(a: Answers, instance: str, engine: str) -> tuple[dict, dict]:
    labels = a.info.get(instance) or {}
    if engine == "vllm" and labels:
        return vllm_cache_config(Scrape({"vllm:cache_config_info": [(dict(labels), 1.0)]}))
    if engine == "sglang":
        return {}, {k: _count(float(v)) for k, v in labels.items() if k in SGLANG_CONSTANTS and v is not None}
    return {}, {}
