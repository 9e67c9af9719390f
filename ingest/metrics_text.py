"""Prometheus /metrics text → the load figures kb reads, for vLLM and sglang.

Parsed with prometheus_client's own text parser (never by hand). Names checked
against the engines' sources:

- vLLM (v1/metrics/loggers.py, 0.32.0): gauges `vllm:num_requests_running`,
  `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc` (0..1; called
  `vllm:gpu_cache_usage_perc` before 0.10), counters `vllm:num_preemptions`
  (`_total`), `vllm:generation_tokens` (`_total`), `vllm:prompt_tokens`
  (`_total`), and the info gauge `vllm:cache_config_info` whose labels hold the
  cache configuration (block size, memory fraction, KV size in tokens, ...).
- sglang (srt/metrics/collector.py, with --enable-metrics): gauges
  `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:token_usage`
  (0..1), `sglang:gen_throughput`, counters `sglang:generation_tokens_total`,
  `sglang:prompt_tokens_total`, `sglang:num_retracted_requests_total` (0.5.23).

A series with several label sets (one per engine or DP rank) is summed, except
for fractions, where the maximum is kept.
"""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

from kb.errors import ServerError

# figure → candidate sample names, first present wins
NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "preemptions_total": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
        "generation_tokens_total": ("vllm:generation_tokens_total", "vllm:generation_tokens"),
        "prompt_tokens_total": ("vllm:prompt_tokens_total", "vllm:prompt_tokens"),
    },
    "sglang": {
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
        "preemptions_total": ("sglang:num_retracted_requests_total", "sglang:num_retractions_total"),
        "generation_tokens_total": ("sglang:generation_tokens_total", "sglang:generation_tokens"),
        "prompt_tokens_total": ("sglang:prompt_tokens_total", "sglang:prompt_tokens"),
        "gen_throughput": ("sglang:gen_throughput",),
    },
}
FRACTIONS = {"kv_cache_usage"}
COUNTERS = {"preemptions_total", "generation_tokens_total", "prompt_tokens_total"}


class Scrape:
    """One parsed /metrics answer: sample name → [(labels, value)]."""

    def __init__(self, series: dict[str, list[tuple[dict, float]]]):
        self.series = series

    @classmethod
    def parse(cls, text: str, where: str = "/metrics", only: tuple[str, ...] | None = None) -> "Scrape":
        """`only`: metric-name prefixes to keep; other lines are dropped before the parser
        sees them (a vLLM scrape is ~90 families, a sweep samples six of them)."""
        if only:
            text = "\n".join(ln for ln in text.splitlines() if _name_of(ln).startswith(only)) + "\n"
        series: dict[str, list[tuple[dict, float]]] = {}
        try:
            for fam in text_string_to_metric_families(text):
                for s in fam.samples:
                    if s.name.endswith("_created"):
                        continue
                    series.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
        except (ValueError, TypeError, IndexError) as e:
            raise ServerError(f"{where}: not Prometheus text ({str(e)[:120]})") from None
        return cls(series)

    def engine(self) -> str | None:
        """vllm or sglang by metric prefix, None when neither is present."""
        if any(n.startswith("vllm:") for n in self.series):
            return "vllm"
        if any(n.startswith("sglang:") for n in self.series):
            return "sglang"
        return None

    def value(self, figure: str, engine: str) -> float | None:
        for name in NAMES.get(engine, {}).get(figure, ()):
            rows = self.series.get(name)
            if rows:
                vals = [v for _, v in rows if math.isfinite(v)]
                if not vals:
                    return None
                return max(vals) if figure in FRACTIONS else sum(vals)
        return None

    def figures(self, engine: str) -> dict[str, float | None]:
        out = {}
        for figure in NAMES.get(engine, {}):
            v = self.value(figure, engine)
            if v is not None and figure not in FRACTIONS and figure != "gen_throughput":
                v = int(v) if float(v).is_integer() else v
            out[figure] = v
        return out

    def names(self, engine: str) -> dict[str, str]:
        """figure → the metric name this server actually exports."""
        return {fig: next(n for n in cands if n in self.series)
                for fig, cands in NAMES.get(engine, {}).items() if any(n in self.series for n in cands)}

    def info(self, name: str) -> dict[str, str]:
        """Labels of an info-style gauge (value 1), e.g. vllm:cache_config_info."""
        rows = self.series.get(name) or []
        return dict(rows[0][0]) if rows else {}


def _name_of(line: str) -> str:
    """The metric name a text-format line is about ('# TYPE name gauge', 'name{...} 1')."""
    if line.startswith("#"):
        parts = line.split(None, 3)
        return parts[2] if len(parts) > 2 and parts[1] in ("HELP", "TYPE") else ""
    end = len(line)
    for ch in "{ \t":
        i = line.find(ch)
        if 0 <= i < end:
            end = i
    return line[:end]


def prefixes(engine: str) -> tuple[str, ...]:
    """Name prefixes covering every figure of `engine` (counters with and without _total)."""
    out = set()
    for cands in NAMES.get(engine, {}).values():
        for n in cands:
            out.add(n[: -len("_total")] if n.endswith("_total") else n)
    return tuple(sorted(out))


_NONE = {"None", "none", "null", ""}


def label_value(v: str):
    """A label's text as a Python value: 'True' → True, '128' → 128, '0.92' → 0.92, 'None' → None."""
    if v in _NONE:
        return None
    if v in ("True", "true"):
        return True
    if v in ("False", "false"):
        return False
    try:
        return int(v)
    except ValueError:
        pass
    try:
        f = float(v)
        return f if math.isfinite(f) else v
    except ValueError:
        return v


def vllm_cache_config(scrape: Scrape) -> tuple[dict, dict]:
    """(server args, start-up facts) from `vllm:cache_config_info`."""
    labels = {k: label_value(v) for k, v in scrape.info("vllm:cache_config_info").items()}
    if not labels:
        return {}, {}
    # only what the launch command could have set and differs from vLLM's own behaviour,
    # so a command rebuilt from these arguments stays the one that is running
    args: dict = {}
    if labels.get("gpu_memory_utilization") is not None:
        args["gpu_memory_utilization"] = labels["gpu_memory_utilization"]
    if labels.get("enable_prefix_caching") is False:
        args["enable_prefix_caching"] = False
    dtype = labels.get("cache_dtype", labels.get("kv_cache_dtype"))
    if dtype not in (None, "auto"):
        args["kv_cache_dtype"] = dtype
    if labels.get("user_specified_block_size") is True and labels.get("block_size") is not None:
        args["block_size"] = labels["block_size"]
    startup = {k: labels[k] for k in ("num_gpu_blocks", "block_size", "enable_prefix_caching", "kv_cache_memory_bytes")
               if labels.get(k) is not None}
    if labels.get("kv_cache_size_tokens") is not None:
        startup["kv_cache_tokens"] = labels["kv_cache_size_tokens"]
    if labels.get("kv_cache_max_concurrency") is not None:
        startup["max_concurrency"] = labels["kv_cache_max_concurrency"]
    return args, startup
