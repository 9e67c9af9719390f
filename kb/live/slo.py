"""Service-level objectives for sweeps: which requests met them, the goodput, and the
highest load that still meets them.

An SLO is a list of objectives such as `ttft_p99<=2000ms,tpot_p50<=50ms`. Two views,
as the serving benchmarks use them:
- per request (vLLM's `bench serve --goodput`, after DistServe): a request is good when
  its own TTFT, TPOT, ITL (its own percentile of gaps) and end-to-end latency are within
  every objective's limit; goodput = good requests (and their output tokens) per second;
- per level: the level meets the SLO when each objective's percentile over the level's
  requests is within its limit (p99 TTFT ≤ 2 s, median TPOT ≤ 50 ms, …).
`--find-max` searches the highest concurrency (or request rate) whose level meets the
SLO: double from the first level until it breaks, then bisect between the last level
that met it and the first that did not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from kb.errors import UsageError
from kb.live.stats import percentile

METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2e_latency", "e2el": "e2e_latency",
           "latency": "e2e_latency"}
_OBJ = re.compile(r"^\s*(?P<metric>[a-z0-9]+)_(?:p(?P<pct>\d{1,2}(?:\.\d+)?)|(?P<stat>mean|median))\s*"
                  r"(?P<op><=|<)\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>ms|s)?\s*$", re.I)


@dataclass(frozen=True)
class Objective:
    metric: str  # ttft, tpot, itl, e2e_latency
    pct: float  # 50 for median
    limit_ms: float
    text: str

    def level_key(self) -> str:
        """The sweep row's key for this percentile (sglang bench_serving names)."""
        if self.pct == 50:
            return f"median_{self.metric}_ms"
        p = int(self.pct) if float(self.pct).is_integer() else self.pct
        return f"p{p}_{self.metric}_ms"


def parse(text: str) -> list[Objective]:
    """`ttft_p99<=2000ms,tpot_p50<=50ms` → objectives; a UsageError names the part it could not read."""
    out = []
    for part in [p for p in text.split(",") if p.strip()]:
        m = _OBJ.match(part)
        if not m or m["metric"].lower() not in METRICS:
            raise UsageError(f"SLO objective {part.strip()!r}: expected METRIC_PNN<=VALUE[ms|s] with METRIC one of "
                             f"ttft, tpot, itl, e2e, e.g. ttft_p99<=2000ms,tpot_p50<=50ms")
        pct = 50.0 if m["stat"] else float(m["pct"])
        if not 0 < pct < 100:
            raise UsageError(f"SLO objective {part.strip()!r}: the percentile must be between 1 and 99")
        limit = float(m["value"]) * (1000.0 if (m["unit"] or "ms").lower() == "s" else 1.0)
        out.append(Objective(METRICS[m["metric"].lower()], pct, limit, part.strip()))
    if not out:
        raise UsageError("SLO: no objective given, e.g. ttft_p99<=2000ms,tpot_p50<=50ms")
    return out


def _percentile(vals: list[float], p: float) -> float:
    return percentile(sorted(vals), p)  # numpy's default interpolation, as the sweep's own figures


def request_value_ms(o, metric: str, pct: float) -> float | None:
    """One request's own value for a metric (seconds in the outcome → ms)."""
    if metric == "ttft":
        return o.ttft * 1000.0
    if metric == "e2e_latency":
        return o.latency * 1000.0
    if metric == "tpot":
        return (o.latency - o.ttft) / (o.output_tokens - 1) * 1000.0 if o.output_tokens > 1 else None
    if metric == "itl":
        return _percentile(o.itl, pct) * 1000.0 if o.itl else None
    return None


def evaluate(objectives: list[Objective], outcomes: list, duration: float, row: dict) -> dict:
    """The level's SLO view: share of requests meeting every objective, goodput, and
    whether each objective's percentile over the level holds (with the violations)."""
    done = [o for o in outcomes if o.ok]
    good = []
    for o in done:
        vals = [(obj, request_value_ms(o, obj.metric, obj.pct)) for obj in objectives]
        if all(v is None or v <= obj.limit_ms for obj, v in vals):
            good.append(o)
    violations = []
    for obj in objectives:
        got = row.get(obj.level_key())
        if got is None:
            got = _percentile([v for o in done if (v := request_value_ms(o, obj.metric, 50)) is not None], obj.pct)
        if got > obj.limit_ms:
            violations.append(f"{obj.text}: {got:,.1f} ms")
    if len(done) < len(outcomes):
        violations.append(f"{len(outcomes) - len(done)} of {len(outcomes)} requests failed")
    d = duration if duration > 0 else float("nan")
    return {
        "objectives": [o.text for o in objectives],
        "met_share": round(len(good) / len(outcomes), 4) if outcomes else 0.0,
        "good_requests": len(good),
        "goodput_req_s": round(len(good) / d, 4) if good else 0.0,
        "goodput_tok_s": round(sum(o.output_tokens for o in good) / d, 2) if good else 0.0,
        "meets": not violations,
        "violations": violations,
    }


@dataclass
class FindMax:
    best: float | None  # the highest level that met the SLO
    broke_at: float | None  # the lowest level measured that did not
    why: list[str]  # the objectives it broke there
    tried: list[float]


def find_max(measure: Callable[[float], dict], start: float, ceiling: float, integer: bool = True,
             tolerance: float = 0.1, max_steps: int = 20) -> FindMax:
    """Bracket by doubling from `start`, then bisect. `measure(level)` runs one level and
    returns its row with an "slo" entry; a row of None (the level could not run) counts
    as broken. Bisection stops when the bracket is within `tolerance` of the level that
    met (each level is a real run: 10% is finer than run-to-run noise on most servers)
    or adjacent (integers)."""
    tried: list[float] = []
    rows: dict[float, dict | None] = {}

    def met(level: float) -> bool:
        row = measure(level)
        tried.append(level)
        rows[level] = row
        return bool(row and row.get("slo", {}).get("meets"))

    lo, hi = None, None
    level = start
    while len(tried) < max_steps:
        if met(level):
            lo = level
            if level >= ceiling:
                break
            level = min(ceiling, level * 2)
        else:
            hi = level
            break
    while lo is not None and hi is not None and len(tried) < max_steps:
        if hi - lo <= max(1 if integer else 0, tolerance * lo):
            break
        mid = (lo + hi) // 2 if integer else round((lo + hi) / 2, 3)
        if met(mid):
            lo = mid
        else:
            hi = mid
    why = []
    if hi is not None:
        row = rows.get(hi)
        why = (row or {}).get("slo", {}).get("violations") or ["the level could not run"]
    return FindMax(best=lo, broke_at=hi, why=why, tried=tried)
