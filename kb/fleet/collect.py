"""Ask Prometheus for every vLLM / sglang instance's load, latency and configuration
over a time range: the PromQL kb sends and the bounds that keep a huge fleet from
exhausting memory.

Bounds (docs/CLI.md, "Fleets from Prometheus"):
- points per series: the step is raised so a range query returns at most
  MAX_POINTS points per series (Prometheus itself refuses more than 11,000);
- series per query: every query is aggregated `by (instance)`, and at most
  MAX_INSTANCES instances are read (the first ones by name; the rest are named in a
  warning and left out by an `instance=~…` matcher on every query);
- bytes per answer: kb/live/promapi.ANSWER_CAP (16 MiB), read as a stream.
"""

from __future__ import annotations

import math
import re
import time as _time
from datetime import datetime

from ingest.prometheus import ENGINES, HISTOGRAMS, SGLANG_CONSTANTS, Answers, iso, present
from kb.errors import ServerError, UsageError
from kb.live.promapi import PromApi, number

MAX_POINTS = 1000
MAX_INSTANCES = 200
MIN_STEP = 1.0
QUANTILES = {"p50": 0.5, "p99": 0.99}
GROUP = "instance"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(text: str, option: str) -> float:
    """Prometheus-style durations: 30s, 5m, 1h30m, 2d (a bare number is seconds)."""
    t = (text or "").strip()
    try:
        v = float(t)
        if v > 0 and math.isfinite(v):
            return v
    except ValueError:
        pass
    parts = _DURATION.findall(t)
    if not t or "".join(n + u for n, u in parts) != t:
        raise UsageError(f"{option}: expected a duration such as 30s, 5m, 1h or 1h30m, got {text!r}")
    total = sum(float(n) * _UNIT[u] for n, u in parts)
    if total <= 0:
        raise UsageError(f"{option}: the duration must be positive")
    return total


def timestamp(text: str, option: str) -> float:
    """RFC 3339 (2026-12-01T15:00:00Z) or Unix seconds."""
    t = (text or "").strip()
    try:
        return float(t)
    except ValueError:
        pass
    try:
        d = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option}: expected RFC 3339 time (2026-12-01T15:00:00Z) or Unix seconds, "
                         f"got {text!r}") from None
    if d.tzinfo is None:
        raise UsageError(f"{option}: give the time zone (e.g. a trailing Z for UTC): {text!r}")
    return d.timestamp()


def time_range(since: str | None, start: str | None, end: str | None, now: float | None = None) -> tuple[float, float]:
    now = _time.time() if now is None else now
    if since and (start or end):
        raise UsageError("since cannot be combined with start/end")
    if start or end:
        if not (start and end):
            raise UsageError("start and end go together")
        s, e = timestamp(start, "start"), timestamp(end, "end")
        if e <= s:
            raise UsageError("end must be after start")
        return s, e
    return now - duration(since or "1h", "since"), now


def selector_matchers(selector: str | None) -> str:
    """`{job="vllm"}` (or `job="vllm"`) → `job="vllm"`, the matchers kb adds to every metric."""
    s = (selector or "").strip()
    if s.startswith("{") != s.endswith("}"):
        raise UsageError(f"selector: expected label matchers in braces, e.g. '{{job=\"vllm\"}}', got {selector!r}")
    if s.startswith("{"):
        s = s[1:-1].strip()
    if s and not re.match(r'^[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*["\'`]', s):  # PromQL's three string quotes
        raise UsageError(f"selector: expected label matchers such as '{{job=\"vllm\"}}', got {selector!r}")
    return s.rstrip(",")


def _promql_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _re2_literal(value: str) -> str:
    return re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", value)


class _Plan:
    """Query texts for one selector."""

    def __init__(self, matchers: str):
        self.matchers = matchers

    def sel(self, name: str, extra: str = "") -> str:
        m = ", ".join(x for x in (self.matchers, extra) if x)
        return f"{name}{{{m}}}" if m else name


def collect(api: PromApi, selector: str | None, start: float, end: float, step: float) -> Answers:
    """Everything the fleet report needs, as Answers (ServerError when Prometheus fails
    or holds nothing for this selector and range)."""
    matchers = selector_matchers(selector)
    shown_sel = "{" + matchers + "}"
    span = end - start
    a = Answers(url=str(api.base), selector=shown_sel, start=start, end=end, step=step, window=0)
    wanted = max(step, MIN_STEP)
    a.step = max(wanted, math.ceil(span / (MAX_POINTS - 1) * 1000) / 1000)
    if a.step > wanted:
        a.warnings.append(f"step raised from {wanted:g} s to {a.step:g} s so no series has more than "
                          f"{MAX_POINTS:,} points")
    plan = _Plan(matchers)
    engine_re = "|".join(f"{e}:.+" for e in ENGINES)
    match = "{" + ", ".join(x for x in (f'__name__=~"{engine_re}"', matchers) if x) + "}"
    a.names = set(api.label_values("__name__", match, start, end))
    if not a.names:
        if not api.label_values("__name__", match):
            raise ServerError(f"{api.where}: the selector {shown_sel} matches no vLLM or sglang metric "
                              f"(no vllm:* or sglang:* series)")
        raise ServerError(f"{api.where}: no samples for {shown_sel} between {iso(start)} and {iso(end)}")
    rng = f"{max(1, math.ceil(span))}s"
    engines = [e for e in ENGINES if present(a.names, e, "running")]
    for e in engines:
        running = present(a.names, e, "running")
        for r in api.query(f"count by ({GROUP}, model_name) (count_over_time({plan.sel(running)}[{rng}]))", end):
            inst = str(r["metric"].get(GROUP, ""))
            a.engine.setdefault(inst, e)
            if r["metric"].get("model_name"):
                a.model.setdefault(inst, str(r["metric"]["model_name"]))
    if not a.engine:
        raise ServerError(f"{api.where}: no samples of running requests for {shown_sel} between "
                          f"{iso(start)} and {iso(end)}")
    extra = ""
    if len(a.engine) > MAX_INSTANCES:
        keep = sorted(a.engine)[:MAX_INSTANCES]
        a.warnings.append(f"{len(a.engine):,} instances match; the first {MAX_INSTANCES} by name are read "
                          f"(narrow selector to see the others)")
        a.engine = {i: a.engine[i] for i in keep}
        a.model = {i: m for i, m in a.model.items() if i in a.engine}
        extra = f"{GROUP}=~" + _promql_string("|".join(_re2_literal(i) for i in keep))
    a.window = _rate_window(api, plan, engines, a, extra, end, span)
    win = f"{math.ceil(a.window)}s"
    for e in engines:
        _collect_engine(api, plan, e, a, extra, rng, win)
    return a


def _rate_window(api, plan, engines, a, extra, end, span) -> float:
    """rate() needs two samples or more in its window: 4 scrape intervals (Prometheus's
    advice for rate windows), at least 4 steps. The scrape interval is measured, from how
    many samples of the running gauge the last few minutes hold."""
    look = min(span, 300.0)
    best = 0.0
    for e in engines:
        running = present(a.names, e, "running")
        for r in api.query(f"max(count_over_time({plan.sel(running, extra)}[{max(1, math.ceil(look))}s]))", end):
            best = max(best, _value(r) or 0)
    interval = look / best if best >= 2 else 15.0  # 15 s: a common scrape interval, when it cannot be measured
    return max(4 * interval, 4 * a.step)


def _value(row: dict) -> float | None:
    """An instant-vector sample's value: `"value": [t, "v"]`."""
    v = row.get("value")
    return number(v[1]) if isinstance(v, list) and len(v) == 2 else None


def _points(values) -> list[tuple[float, float]]:
    """A range series' `"values": [[t, "v"], ...]`, at most MAX_POINTS, unreadable points skipped."""
    out = []
    for p in values[:MAX_POINTS] if isinstance(values, list) else ():
        if isinstance(p, list) and len(p) == 2 and (t := number(p[0])) is not None and (v := number(p[1])) is not None:
            out.append((t, v))
    return out


def _by_instance(rows: list[dict], a: Answers) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        inst = str(r["metric"].get(GROUP, ""))
        if inst in a.engine:
            out.setdefault(inst, []).append(r)
    return out


def _collect_engine(api: PromApi, plan: _Plan, engine: str, a: Answers, extra: str, rng: str, win: str) -> None:
    mine = {i for i, e in a.engine.items() if e == engine}

    def name(figure: str) -> str | None:
        return present(a.names, engine, figure)

    def range_figure(figure: str, expr: str) -> None:
        for inst, rows in _by_instance(api.query_range(expr, a.start, a.end, a.step), a).items():
            if inst in mine:
                a.series.setdefault(figure, {})[inst] = _points(rows[0].get("values"))

    def scalar(figure: str, expr: str) -> None:
        for inst, rows in _by_instance(api.query(expr, a.end), a).items():
            v = _value(rows[0])
            if inst in mine and v is not None:
                a.scalars.setdefault(figure, {})[inst] = v

    # gauges at each step: counts summed over an instance's engines / DP ranks, fractions their maximum
    range_figure("running", f"sum by ({GROUP}) ({plan.sel(name('running'), extra)})")
    if name("waiting"):
        range_figure("waiting", f"sum by ({GROUP}) ({plan.sel(name('waiting'), extra)})")
    if name("kv_cache_usage"):
        range_figure("kv_cache_usage", f"max by ({GROUP}) ({plan.sel(name('kv_cache_usage'), extra)})")
    for figure, src in (("prompt_tps", "prompt_tokens"), ("gen_tps", "generation_tokens")):
        if name(src):
            range_figure(figure, f"sum by ({GROUP}) (rate({plan.sel(name(src), extra)}[{win}]))")
    # over the whole range
    for figure in ("preemptions", "requests"):
        if name(figure):
            scalar(figure, f"sum by ({GROUP}) (increase({plan.sel(name(figure), extra)}[{rng}]))")
    for h in HISTOGRAMS:
        if name(h):
            for q, v in QUANTILES.items():
                scalar(f"{h}_{q}", f"histogram_quantile({v}, sum by ({GROUP}, le) "
                                   f"(increase({plan.sel(name(h) + '_bucket', extra)}[{rng}])))")
    if name("prefix_hits") and name("prefix_queries"):
        scalar("prefix_hit_rate", f"sum by ({GROUP}) (increase({plan.sel(name('prefix_hits'), extra)}[{rng}])) / "
                                  f"sum by ({GROUP}) (increase({plan.sel(name('prefix_queries'), extra)}[{rng}]))")
    elif name("prefix_hit_rate"):
        scalar("prefix_hit_rate",
               f"max by ({GROUP}) (avg_over_time({plan.sel(name('prefix_hit_rate'), extra)}[{rng}]))")
    # configuration
    if name("info"):
        for inst, rows in _by_instance(api.query(f"last_over_time({plan.sel(name('info'), extra)}[{rng}])", a.end),
                                       a).items():
            if inst in mine:
                a.info[inst] = {k: str(v) for k, v in rows[0]["metric"].items() if k not in (GROUP, "job")}
    for figure in SGLANG_CONSTANTS if engine == "sglang" else ():
        if name(figure):
            for inst, rows in _by_instance(api.query(
                    f"max by ({GROUP}) (last_over_time({plan.sel(name(figure), extra)}[{rng}]))", a.end), a).items():
                v = _value(rows[0])
                if inst in mine and v is not None:
                    a.info.setdefault(inst, {})[figure] = str(v)
