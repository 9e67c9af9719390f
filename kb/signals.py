"""Symptoms derived from a run's evidence, each with severity and evidence lines.

Each detector is a small function with its thresholds kept beside it (in
`THRESHOLDS`, overridable from a TOML file: `[throughput-plateau] knee_gain = 0.08`).
Severity bands follow Dr. Elephant: none, low, moderate, severe, critical; a
sample too small to judge lowers the band by one, it never raises an alarm.
"""

from __future__ import annotations

import copy
import tomllib
from itertools import pairwise
from typing import Callable

from kb.errors import ODD_VALUE, InputError
from kb.evidence import RunEvidence, gain_per_doubling
from kb.records import SEVERITY_ORDER, Evidence, Signal, Where, shift_severity
from kb.textfile import read_text

THRESHOLDS: dict[str, dict[str, float]] = {
    "throughput-plateau": {"knee_gain": 0.10, "severe_efficiency": 0.35, "min_points": 3},
    "low-single-stream-decode": {"severe_tok_s": 20, "moderate_tok_s": 40, "low_tok_s": 70, "max_concurrency": 4},
    "running-cap-with-queue": {"pinned_fraction": 0.8, "min_samples": 5, "queue_fraction": 0.3},
    "kv-cache-pressure": {"usage": 0.95, "severe_events": 10},
    "cuda-graph-exceeded": {"min_samples": 3, "cap_ratio": 2.0},
    "moe-default-config": {},
    "ttft-queueing": {"ttft_ratio": 5.0, "ttft_ms": 2000, "wait_share": 0.3, "wait_ms": 5000},
    "tp-over-pcie": {},
    "gpu-idle": {"util_pct": 30},
    "low-load": {"max_concurrency": 8},
}


def _ev(text: str, where: Where | None = None) -> Evidence:
    return Evidence(text=text, where=where)


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:,.2f}".rstrip("0").rstrip(".")


# ------------------------------------------------------------------ detectors


def throughput_plateau(ev: RunEvidence, t: dict) -> Signal | None:
    """The knee: the load after which more load adds under `knee_gain` per doubling."""
    pts = ev.curve()
    pts = [p for p in pts if p.level > 0]
    if len(pts) < 2:
        return None
    knee = None
    for a, b in pairwise(pts):
        g = gain_per_doubling(a.throughput, b.throughput, a.level, b.level)
        if g < t["knee_gain"]:
            knee = a
            break
    if knee is None:
        return None
    first, last = pts[0], pts[-1]
    efficiency = (last.throughput / first.throughput) / (last.level / first.level) if first.throughput else 0
    beyond = [p for p in pts if p.level > knee.level]
    best = max(pts, key=lambda p: p.throughput)
    sev = "severe" if beyond and best.throughput <= knee.throughput * (1 + 2 * t["knee_gain"]) else "moderate"
    if len(pts) < t["min_points"]:
        sev = shift_severity(sev, -1)  # two points show a slope, not a curve
    evidence = [_ev(f"{_fmt(p.level)} concurrency: {_fmt(p.throughput)} tok/s"
                    + (f" (median of {p.runs} runs, spread {p.spread:.0%})" if p.runs > 1 else ""),
                    p.sources[0] if p.sources else None) for p in pts]
    nxt = beyond[0]
    gain = nxt.throughput / knee.throughput - 1
    return Signal(
        id="throughput-plateau", title="Throughput plateau", severity=sev,
        summary=(f"throughput stops scaling after {_fmt(knee.level)} concurrency: {_fmt(knee.level)} → "
                 f"{_fmt(nxt.level)} "
                 f"adds {gain:+.1%} ({_fmt(knee.throughput)} → {_fmt(nxt.throughput)} tok/s); "
                 f"scaling efficiency {efficiency:.0%} from {_fmt(first.level)} to {_fmt(last.level)}"),
        evidence=evidence,
        data={"knee": knee.level, "knee_throughput": knee.throughput, "next_level": nxt.level,
              "next_throughput": nxt.throughput, "gain_after_knee": round(gain, 4),
              "efficiency": round(efficiency, 4), "max_level": last.level, "points": len(pts)},
    )


def low_single_stream_decode(ev: RunEvidence, t: dict) -> Signal | None:
    """Per-stream decode speed (1000 / TPOT) at low load: at concurrency ≤ 4 the
    server is latency-bound, so each stream's speed is what a user sees."""
    runs = [r for r in ev.bench if r.concurrency and r.concurrency <= t["max_concurrency"]]
    if not runs:
        return None
    speeds = []
    for r in runs:
        tpot = r.tpot_ms.get("median") or r.tpot_ms.get("mean")
        speed = 1000.0 / tpot if tpot else r.output_throughput
        if speed:
            speeds.append((speed, r))
    if not speeds:
        return None
    speed, run = max(speeds, key=lambda x: x[0])
    if speed >= t["low_tok_s"]:
        return None
    sev = "severe" if speed < t["severe_tok_s"] else "moderate" if speed < t["moderate_tok_s"] else "low"
    return Signal(id="low-single-stream-decode", title="Slow single-stream decode", severity=sev,
                  summary=f"each stream decodes at {_fmt(speed)} tok/s at concurrency {run.concurrency}",
                  evidence=[_ev(f"concurrency {run.concurrency}: {_fmt(speed)} tok/s per stream"
                                + (f" (TPOT {_fmt(1000 / speed)} ms)" if run.tpot_ms else ""), run.source)],
                  data={"tok_s": round(speed, 2)})


def running_cap_with_queue(ev: RunEvidence, t: dict) -> Signal | None:
    """Running requests pinned at the cap while requests wait. Every source that
    shows it (a server log, live /metrics samples) adds its own evidence line."""
    cap = ev.arg("max_running_requests", "max_num_seqs")
    found = []
    for tr in ev.traces:
        s = tr.stats
        cap_here = tr.startup.get("max_running_requests") or tr.startup.get("max_num_seqs") or cap
        n = (s.get("samples") or 0)
        max_run = s.get("running_max")
        if not n or not max_run:
            continue
        queued_frac = (s.get("queue_nonzero_frac") or 0)
        if queued_frac < t["queue_fraction"]:
            continue
        cap_used = int(cap_here) if cap_here else int(max_run)
        if max_run < cap_used * 0.9:
            continue  # queueing below the cap is a KV or scheduler matter, not this one
        example = next((x for x in tr.samples if x.running and x.running >= cap_used and x.queued), None)
        found.append((tr, cap_used, max_run, queued_frac, n, example))
    if not found:
        return None
    best = max(found, key=lambda c: (c[3], c[4]))
    tr, cap_used, max_run, queued_frac, n, example = best
    sev = "severe" if queued_frac >= t["pinned_fraction"] else "moderate"
    if n < t["min_samples"]:
        sev = shift_severity(sev, -1)
    by_origin: dict[str, tuple] = {}
    for c in found:  # the strongest case from each kind of source, the best one first
        origin = c[0].stats.get("origin") or "log"
        if origin not in by_origin or (c[3], c[4]) > (by_origin[origin][3], by_origin[origin][4]):
            by_origin[origin] = c
    shown = sorted(by_origin.values(), key=lambda c: c is not best)
    evidence = []
    for c_tr, c_cap, c_run, c_frac, c_n, c_ex in shown:
        origin = c_tr.stats.get("origin")
        metrics = origin == "metrics"
        what = (f"/metrics samples at concurrency {c_tr.stats.get('level')}" if metrics
                else f"busy Prometheus steps of {c_tr.stats.get('step_s'):g} s" if origin == "prometheus"
                else "stats lines")
        evidence.append(_ev(f"running requests reach {c_run} (cap {c_cap}) while {c_frac:.0%} of {c_n} {what} "
                            f"show a waiting queue (max {c_tr.stats.get('queued_max')})", Where(path=c_tr.source)))
        if c_ex:
            head = "/metrics: " if metrics else f"Prometheus at {c_ex.time}: " if origin == "prometheus" else ""
            evidence.append(_ev(head + f"running {c_ex.running}, queued {c_ex.queued}"
                                + (f", token usage {c_ex.token_usage:.2f}" if c_ex.token_usage is not None else ""),
                                Where(path=c_tr.source, line=c_ex.line)))
    return Signal(id="running-cap-with-queue", title="Running requests pinned at the cap while requests queue",
                  severity=sev, summary=f"the server runs at most {cap_used} requests and queues the rest",
                  evidence=evidence,
                  data={"cap": cap_used, "running_max": max_run, "queue_nonzero_frac": round(queued_frac, 3),
                        "queued_max": max(c[0].stats.get("queued_max") or 0 for c in found),
                        "token_usage_max": tr.stats.get("token_usage_max"),
                        "sources": sorted(by_origin)})


def kv_cache_pressure(ev: RunEvidence, t: dict) -> Signal | None:
    usage, events, evidence = 0.0, 0, []
    for tr in ev.traces:
        u = tr.stats.get("token_usage_max") or 0.0
        usage = max(usage, u)
        for kind in ("retract", "preempt"):
            n = tr.stats.get("events", {}).get(kind, 0)
            events += n
            first = next((e for e in tr.events if e.kind == kind), None)
            if first:
                evidence.append(_ev(f"{n} {kind} events; first: {first.text[:160]}", first.where))
        if u >= t["usage"]:
            evidence.append(_ev(f"KV cache usage peaks at {u:.0%}", Where(path=tr.source)))
    if not events and usage < t["usage"]:
        return None
    sev = "severe" if events >= t["severe_events"] else "moderate" if events else "low"
    return Signal(id="kv-cache-pressure", title="KV cache near full, retractions or preemptions", severity=sev,
                  summary=f"KV cache usage up to {usage:.0%}, {events} retraction/preemption events",
                  evidence=evidence, data={"max_usage": usage, "events": events})


def cuda_graph_exceeded(ev: RunEvidence, t: dict) -> Signal | None:
    """Decode batches larger than the largest captured CUDA-graph batch run eagerly."""
    for tr in ev.traces:
        s = tr.stats
        off = (s.get("cuda_graph_false") or 0)
        captured = tr.startup.get("cuda_graph_max_bs") or ev.arg("cuda_graph_max_bs")
        max_run = s.get("running_max") or 0
        cap = tr.startup.get("max_running_requests") or ev.arg("max_running_requests")
        if not off and not (captured and max_run > int(captured)):
            if captured and cap and int(cap) >= t["cap_ratio"] * int(captured) and not max_run:
                # no decode lines yet: the start-up facts alone show the gap
                return Signal(id="cuda-graph-exceeded", title="CUDA-graph ceiling far below the running cap",
                              severity="low",
                              summary=f"graphs captured up to batch {captured} while up to {cap} requests may run: "
                                      f"batches above {captured} will decode without CUDA graphs",
                              evidence=[_ev(f"capture list up to {captured}; max_running_requests={cap}",
                                            Where(path=tr.source))],
                              data={"running_max": int(cap), "captured_max_bs": int(captured), "eager_samples": 0,
                                    "from_startup": True})
            continue
        max_off = s.get("cuda_graph_false_running_max") or max_run
        sev = "severe" if off >= t["min_samples"] else "low"
        evidence = []
        if off:
            first = next((x for x in tr.samples if x.cuda_graph is False), None)
            evidence.append(_ev(f"{off} decode lines with `cuda graph: False`, running up to {max_off}",
                                Where(path=tr.source, line=first.line if first else None)))
        if captured:
            evidence.append(_ev(f"largest captured CUDA-graph batch: {captured}; running batch reaches {max_run}",
                                Where(path=tr.source)))
        return Signal(id="cuda-graph-exceeded", title="Decode batches above the largest CUDA-graph batch",
                      severity=sev,
                      summary=f"decode batches up to {max_off} run without CUDA graphs"
                              + (f" (captured up to {captured})" if captured else ""),
                      evidence=evidence,
                      data={"running_max": max(max_run, max_off),
                            "captured_max_bs": int(captured) if captured else None,
                            "eager_samples": off})
    return None


def moe_default_config(ev: RunEvidence, t: dict) -> Signal | None:
    for tr in ev.traces:
        e = next((x for x in tr.events if x.kind == "moe-default-config"), None)
        if e:
            d = e.data
            return Signal(id="moe-default-config", title="Default (untuned) MoE kernel config in use",
                          severity="moderate",
                          summary=f"no tuned fused-MoE config for E={d.get('E')}, N={d.get('N')} on "
                                  f"{d.get('device_name')}"
                                  + (f" ({d.get('dtype')})" if d.get("dtype") else ""),
                          evidence=[_ev(e.text[:300], e.where)], data=dict(d))
    return None


def ttft_queueing(ev: RunEvidence, t: dict) -> Signal | None:
    """TTFT growing with load across levels, or within one run, requests waiting for
    their first token a large share of their whole latency (they queued)."""
    pts = [p for p in ev.curve() if p.ttft_median_ms is not None]
    if len(pts) < 2:
        return _queueing_in_one_run(ev, t)
    lo, hi = pts[0], pts[-1]
    ratio = hi.ttft_median_ms / lo.ttft_median_ms if lo.ttft_median_ms else 0
    if ratio < t["ttft_ratio"] and hi.ttft_median_ms < t["ttft_ms"]:
        return None
    queued = any(tr.stats.get("queued_max") for tr in ev.traces)
    sev = "moderate" if queued or ratio >= 2 * t["ttft_ratio"] else "low"
    return Signal(id="ttft-queueing", title="TTFT grows with load (queueing)", severity=sev,
                  summary=f"median TTFT {_fmt(lo.ttft_median_ms)} ms at {_fmt(lo.level)} → {_fmt(hi.ttft_median_ms)} "
                          "ms "
                          f"at {_fmt(hi.level)} concurrency ({ratio:.1f}x)",
                  evidence=[_ev(f"{_fmt(p.level)} concurrency: median TTFT {_fmt(p.ttft_median_ms)} ms",
                                p.sources[0] if p.sources else None) for p in (lo, hi)],
                  data={"ratio": round(ratio, 2), "ttft_high_ms": hi.ttft_median_ms})


def _queueing_in_one_run(ev: RunEvidence, t: dict) -> Signal | None:
    for r in ev.bench:
        ttft = r.ttft_ms.get("median") or r.ttft_ms.get("mean")
        tpot = r.tpot_ms.get("median") or r.tpot_ms.get("mean")
        total = r.e2e_ms.get("median") or r.e2e_ms.get("mean") or (
            ttft + tpot * r.output_len if ttft and tpot and r.output_len else None)
        if not ttft or not total or ttft < t["wait_ms"] or ttft / total < t["wait_share"]:
            continue
        level = r.level()
        return Signal(id="ttft-queueing", title="Requests queue before their first token", severity="moderate",
                      summary=f"median TTFT {_fmt(ttft / 1000)} s is {ttft / total:.0%} of the request latency "
                              f"at load {_fmt(level)}: requests wait for a slot",
                      evidence=[_ev(f"load {_fmt(level)}: median TTFT {_fmt(ttft)} ms"
                                    + (f", TPOT {_fmt(tpot)} ms" if tpot else ""), r.source)],
                      data={"ttft_high_ms": ttft, "wait_share": round(ttft / total, 3), "level": level})
    return None


def tp_over_pcie(ev: RunEvidence, t: dict) -> Signal | None:
    hw = ev.hardware
    tp = ev.tp_size() or (hw.count if hw else None)
    if not hw or hw.interconnect != "PCIe" or not tp or tp < 2:
        return None
    sev = "moderate" if tp >= 4 else "low"
    evidence = [_ev(f"{hw.count}x {hw.gpu} ({hw.arch or 'unknown arch'}) joined by PCIe only"
                    + (f", {hw.numa_nodes} NUMA nodes" if hw.numa_nodes else ""),
                    Where(path=hw.source) if hw.source else None)]
    if ev.tp_size():
        evidence.append(_ev(f"tensor parallel size {tp}",
                            Where(path=ev.server_args_source) if ev.server_args_source else None))
    return Signal(id="tp-over-pcie", title="Tensor parallelism over PCIe only", severity=sev,
                  summary=f"TP{tp} all-reduces every layer over PCIe", evidence=evidence,
                  data={"tp": tp, "gpus": hw.count, "numa_nodes": hw.numa_nodes})


def gpu_idle(ev: RunEvidence, t: dict) -> Signal | None:
    hw = ev.hardware
    util = hw.utilization_pct if hw else None
    if util is None or float(util) >= t["util_pct"] or not ev.bench:
        return None
    return Signal(id="gpu-idle", title="GPUs mostly idle under load", severity="moderate",
                  summary=f"GPU utilisation {util}% while the benchmark ran",
                  evidence=[_ev(f"utilisation {util}%", Where(path=hw.source) if hw.source else None)],
                  data={"util_pct": float(util)})


def offered_load(r) -> tuple[float | None, str]:
    """How many requests a benchmark kept in flight: its concurrency limit, else the peak
    it reports, else the mean by Little's law (request rate x mean latency, computed)."""
    if r.concurrency:
        return float(r.concurrency), "max concurrency"
    if r.peak_concurrency:
        return float(r.peak_concurrency), "peak concurrent requests"
    e2e = r.e2e_ms.get("mean")
    if r.request_throughput and e2e:
        return r.request_throughput * e2e / 1000, "mean in flight (request rate x mean latency, computed)"
    return None, ""


def low_load(ev: RunEvidence, t: dict) -> Signal | None:
    """Every benchmark run kept few requests in flight: a latency-bound load, where
    settings built for large batches (DP attention, wide EP) cost more than they give."""
    loads = [(offered_load(r), r) for r in ev.bench]
    loads = [(lv, how, r) for (lv, how), r in loads if lv is not None]
    if not loads or len(loads) < len(ev.bench):
        return None
    lv, how, r = max(loads, key=lambda x: x[0])
    if lv > t["max_concurrency"]:
        return None
    return Signal(id="low-load", title="Low load: few requests in flight", severity="low",
                  summary=f"the benchmark keeps at most {_fmt(lv)} requests in flight ({how})",
                  evidence=[_ev(f"{how}: {_fmt(lv)}", r.source)], data={"level": round(lv, 2)})


DETECTORS: dict[str, Callable[[RunEvidence, dict], Signal | None]] = {
    "throughput-plateau": throughput_plateau,
    "low-single-stream-decode": low_single_stream_decode,
    "running-cap-with-queue": running_cap_with_queue,
    "kv-cache-pressure": kv_cache_pressure,
    "cuda-graph-exceeded": cuda_graph_exceeded,
    "moe-default-config": moe_default_config,
    "ttft-queueing": ttft_queueing,
    "tp-over-pcie": tp_over_pcie,
    "gpu-idle": gpu_idle,
    "low-load": low_load,
}


def load_thresholds(path: str | None, defaults: dict[str, dict[str, float]] | None = None) -> dict[str,
                                                                                                   dict[str, float]]:
    """`defaults` (the signal thresholds unless given; kb.rules.registry adds the rules')
    with the TOML file's values over them: one table per signal id or rule id."""
    merged = copy.deepcopy(THRESHOLDS if defaults is None else defaults)
    if not path:
        return merged
    text = read_text(path, 2**20)  # never a FIFO or device, never more than 1 MiB
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(path, f"not valid TOML: {e}", getattr(e, "lineno", None)) from None
    for sig, values in data.items():
        if sig not in merged or not isinstance(values, dict):
            raise InputError(path, f"unknown signal or rule {sig!r}; known: {', '.join(merged)}")
        for k, v in values.items():
            if k not in merged[sig]:
                raise InputError(path, f"[{sig}] has no threshold {k!r}; known: {', '.join(merged[sig]) or 'none'}")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InputError(path, f"[{sig}] {k}: expected a number, got {v!r}"[:200])
            merged[sig][k] = float(v)
    return merged


def detect(ev: RunEvidence, thresholds: dict | None = None) -> list[Signal]:
    th = thresholds or THRESHOLDS
    found = []
    for name, fn in DETECTORS.items():
        try:
            s = fn(ev, th[name])
        except ODD_VALUE as e:  # a server argument of an unexpected shape: this signal is not judged
            ev.warnings.append(f"signal {name} not evaluated: a server argument has an unexpected value "
                               f"({type(e).__name__}: {str(e)[:120]})")
            continue
        if s and s.severity != "none":
            found.append(s)
    return sorted(found, key=lambda s: -SEVERITY_ORDER[s.severity])
