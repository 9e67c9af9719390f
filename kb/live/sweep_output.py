"""A sweep level's figures: the JSON line (sglang's `bench_serving --output-file` shape,
plus kb's own keys) and the table the commands print.

Timing follows vLLM's `benchmarks/serve.py` so the figures compare: TPOT is
(latency − TTFT) / (output tokens − 1), percentiles interpolate linearly as numpy's do,
duration runs from the level's start to its last answer."""

from __future__ import annotations

import math
from typing import Any

from kb.live import slo
from kb.live.stats import ms_stats
from kb.live.stream import Outcome
from kb.live.sweep_options import SweepOptions

TOOL = "kb-sweep"
DATASET = "random-words"


def summarise(c: float, outcomes: list[Outcome], duration: float, opts: SweepOptions, model: str | None,
              engine: str | None, issued: int) -> dict[str, Any]:
    done = [o for o in outcomes if o.ok]
    total_in = sum(o.prompt_tokens for o in done)
    total_out = sum(o.output_tokens for o in done)
    d = duration if duration > 0 else float("nan")
    tpots = [(o.latency - o.ttft) / (o.output_tokens - 1) for o in done if o.output_tokens > 1]
    itls = [x for o in done for x in o.itl]
    errors: dict[str, int] = {}
    for o in outcomes:
        if not o.ok:
            errors[o.error or "failed"] = errors.get(o.error or "failed", 0) + 1
    row: dict[str, Any] = {
        "backend": engine or "openai", "dataset_name": DATASET,
        "request_rate": c if opts.rate else "inf", "max_concurrency": None if opts.rate else c,
        "num_prompts": issued, "random_input_len": opts.input_len, "random_output_len": opts.output_len,
        "model": model, "duration": duration, "completed": len(done), "failed": len(outcomes) - len(done),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(done) / d if done else 0.0,
        "input_throughput": total_in / d if done else 0.0,
        "output_throughput": total_out / d if done else 0.0,
        "total_throughput": (total_in + total_out) / d if done else 0.0,
    }
    row.update(ms_stats("ttft", [o.ttft for o in done], (90, 99)))
    row.update(ms_stats("tpot", tpots, (90, 99)))
    row.update(ms_stats("itl", itls, (90, 95, 99)))
    e2e = ms_stats("e2e_latency", [o.latency for o in done], (90, 99))
    row.update(e2e)
    row["concurrency"] = sum(o.latency for o in done) / d if done else 0.0  # sglang: mean in flight
    row["errors"] = errors
    return {k: (round(v, 4) if isinstance(v, float) and math.isfinite(v) else v) for k, v in row.items()}


def level_row(c: float, outcomes: list[Outcome], duration: float, issued: int, opts: SweepOptions, probe,
              truncated: bool, cpu: float, wall: float, km: dict) -> dict[str, Any]:
    """The level's JSON line: summarise's figures, its SLO verdict, whether it was cut at
    the level's time cap, the client's own CPU, the probe's server_info and the samples."""
    row = summarise(c, outcomes, duration, opts, probe.model, probe.engine, issued)
    if opts.slo:
        row["slo"] = slo.evaluate(opts.slo, outcomes, duration, row)
    row["tool"] = TOOL
    row["truncated"] = truncated
    row["client"] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
                     "cpu_fraction": round(cpu / wall, 4) if wall else None}
    row["server_info"] = probe.server_info()
    if km:
        row["kb_metrics"] = km
    return row


def level_of(row: dict) -> float:
    """A sweep row's load level: its concurrency, or its request rate in rate mode."""
    c = row.get("max_concurrency")
    return c if c is not None else float(row.get("request_rate") or 0)


def table(levels: list[dict]) -> str:
    rate = any(r.get("max_concurrency") is None for r in levels)
    has_slo = any(r.get("slo") for r in levels)
    head = (f"  {'rate' if rate else 'conc':>5}  {'done':>5}  {'fail':>4}  {'total tok/s':>11}  {'out tok/s':>9}  "
            f"{'TTFT p50':>9}  "
            f"{'TTFT p99':>9}  {'TPOT p50':>8}  {'ITL p95':>8}  {'running':>7}  {'waiting':>7}"
            + (f"  {'SLO met':>7}  {'goodput':>12}" if has_slo else ""))
    rows = [head]
    for r in levels:
        samples = (r.get("kb_metrics") or {}).get("samples") or []
        run = max((s.get("running") or 0 for s in samples), default=None)
        wait = max((s.get("waiting") or 0 for s in samples), default=None)
        lv = level_of(r)
        sl = r.get("slo")
        extra = (f"  {sl['met_share'] * 100:>6.1f}%  {sl['goodput_tok_s']:>8,.1f} tok/s"
                 + ("" if sl["meets"] else "  ✗")
                 if sl else "")
        rows.append(f"  {lv:>5g}  {r['completed']:>5}  {r['failed']:>4}  {r['total_throughput']:>11,.1f}  "
                    f"{r['output_throughput']:>9,.1f}  {r['median_ttft_ms']:>7,.1f}ms  {r['p99_ttft_ms']:>7,.1f}ms  "
                    f"{r['median_tpot_ms']:>6,.2f}ms  {r['p95_itl_ms']:>6,.2f}ms  "
                    f"{'-' if run is None else int(run):>7}  {'-' if wait is None else int(wait):>7}" + extra)
    return "\n".join(rows)
