"""The gains a finding records, computed from the benchmark runs (never typed): the
median of each side's runs per paired level, and how far the comparison can be trusted."""

from __future__ import annotations

from statistics import median
from typing import Callable

from kb.compare import Level, Pair
from kb.evidence import spread
from kb.records import BenchRun, Gain

# (metric as FORMAT.md names it, unit, value of one run); latencies are per-request medians.
METRICS: list[tuple[str, str, Callable[[BenchRun], float | None]]] = [
    ("total throughput", "tok/s", lambda r: r.throughput()),
    ("output throughput", "tok/s", lambda r: r.output_throughput),
    ("TTFT", "ms", lambda r: r.ttft_ms.get("median")),
    ("TPOT", "ms", lambda r: r.tpot_ms.get("median")),
    ("ITL", "ms", lambda r: r.itl_ms.get("median")),
]
CONFIDENCE_ORDER = {"low": 0, "medium": 1, "high": 2}


def _metric_name(metric: str, lv: Level) -> str:
    kind, value = lv.key
    return f"{metric} ({value:g} req/s)" if kind == "rate" else metric


def _mid(values: list[float]) -> float:
    return round(median(values), 2)


def gains(pairs: list[Pair]) -> list[Gain]:
    rows = []
    for b, a in pairs:
        conc = int(b.key[1]) if b.key[0] == "concurrency" else None
        for metric, unit, get in METRICS:
            bv, av = b.values(get), a.values(get)
            if bv and av:
                rows.append(Gain(metric=_metric_name(metric, b), before=_mid(bv), after=_mid(av), unit=unit,
                                 concurrency=conc, runs=min(len(bv), len(av))))
    return rows


def observed(after: list[Level]) -> list[Gain]:
    """An observation without a comparison: the after values alone."""
    return [Gain(metric=_metric_name(metric, lv), after=_mid(v), unit=unit, runs=len(v),
                 concurrency=int(lv.key[1]) if lv.key[0] == "concurrency" else None)
            for lv in after for metric, unit, get in METRICS if (v := lv.values(get))]


def _throughputs(lv: Level) -> list[float]:
    return lv.values(METRICS[0][2]) or lv.values(METRICS[1][2])


def confidence(pairs: list[Pair]) -> tuple[str, str]:
    """(low|medium|high, why): repeated runs whose ranges do not overlap earn trust."""
    single = [b.label() for b, a in pairs if min(len(_throughputs(b)), len(_throughputs(a))) < 2]
    if single:
        return "low", (f"a single run on a side at {', '.join(single)}: cold-start effects (JIT compilation, "
                       "autotuning, cache warm-up) and run-to-run noise are not ruled out; repeat each side 2-3 times")
    overlap = [b.label() for b, a in pairs
               if not (min(_throughputs(a)) > max(_throughputs(b)) or max(_throughputs(a)) < min(_throughputs(b)))]
    if overlap:
        return "low", (f"the before and after runs overlap at {', '.join(overlap)}: the change is within "
                       "run-to-run noise")
    n = min(min(len(_throughputs(b)), len(_throughputs(a))) for b, a in pairs)
    return ("high" if n >= 3 else "medium"), (f"{n} or more runs per side at every level, and every after run "
                                              "differs from every before run in the same direction")


def _spread(values: list[float]) -> str:
    mid = median(values)
    return f"median {mid:,.1f} tok/s, spread {spread(values) or 0.0:.1%}" if mid else "no throughput"


def spread_notes(pairs: list[Pair]) -> list[str]:
    notes = []
    for b, a in pairs:
        tb, ta = _throughputs(b), _throughputs(a)
        if len(tb) > 1 or len(ta) > 1:
            notes.append(f"At {b.label()}: {len(tb)} runs before ({_spread(tb)}), {len(ta)} after ({_spread(ta)}); "
                         "each cell of the table is the median of the runs.")
    return notes
