"""The statistics of a sweep level's figures, as the serving benchmarks compute them
(vLLM's `benchmarks/serve.py`, sglang's `bench_serving`: numpy on milliseconds)."""

from __future__ import annotations

import math


def percentile(sorted_vals: list[float], p: float) -> float:
    """numpy.percentile's default (linear interpolation) on a sorted list."""
    if not sorted_vals:
        return 0.0
    k = (len(sorted_vals) - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


def ms_stats(metric: str, vals_s: list[float], pcts: tuple[int, ...]) -> dict[str, float]:
    """Mean, median, standard deviation and the percentiles `pcts` of `vals_s` (seconds),
    in ms, under sglang's keys (`median_ttft_ms`, `p99_ttft_ms`, ...)."""
    v = sorted(x * 1000.0 for x in vals_s)
    n = len(v)
    mean = sum(v) / n if n else 0.0
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / n) if n else 0.0
    out = {f"mean_{metric}_ms": mean, f"median_{metric}_ms": percentile(v, 50), f"std_{metric}_ms": std}
    for p in pcts:
        out[f"p{p}_{metric}_ms"] = percentile(v, p)
    return out
