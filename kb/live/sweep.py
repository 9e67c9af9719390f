"""`kb sweep URL`: an OpenAI-compatible streaming load generator over concurrency levels.

Per level, `c` workers send streaming `/v1/completions` requests back to back
(`stream: true`, `ignore_eos: true`, `max_tokens` = the output length, prompts of
the requested token length made of repeated words in a per-request order) until
the level's request count or duration is reached. Timing follows vLLM's
`benchmarks/serve.py` so the figures compare: TTFT is the first chunk carrying a
choice, ITL the gaps between later chunks, TPOT (latency − TTFT) / (output
tokens − 1), token counts from the `usage` chunk, duration from the level's start
to its last answer. While a level runs, `/metrics` is sampled (running, waiting,
KV-cache usage, preemptions, generated tokens).

Each finished level is one JSON line in the shape of sglang's
`bench_serving --output-file` plus `server_info` (from the probe) and
`kb_metrics` (the samples), written as soon as the level ends, so `kb diagnose`
and `ingest.run` read it like any other benchmark and a crash or Ctrl-C keeps
the finished levels.

Bounds: requests per level (`--requests`, default max(16, 4×c)), an optional
duration per level (`--duration`), a cap on a level's wall time
(`--max-level-time`), a read timeout per chunk; traffic goes only to the URL given.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Callable

from kb.live import slo
from kb.live.probe import ProbeResult
from kb.live.runner import run_sweep
from kb.live.sweep_options import (
    DEFAULT_INPUT_LEN,
    DEFAULT_OUTPUT_LEN,
    SweepOptions,
    SweepResult,
    check_levels,
    fit_lengths,
    parse_levels,
    parse_rates,
)
from kb.live.sweep_output import level_of, table

# What callers of the sweep use, wherever it is defined.
__all__ = ["DEFAULT_INPUT_LEN", "DEFAULT_OUTPUT_LEN", "SweepOptions", "SweepResult", "level_of", "parse_levels",
           "parse_rates", "sweep", "sweep_find_max", "table"]


def sweep(probe: ProbeResult, opts: SweepOptions, api_key: str | None = None, out: Path | None = None,
          on_level: Callable[[dict], None] | None = None) -> SweepResult:
    """Run the levels in order; stops at the first level the server cannot serve."""
    check_levels(opts)
    opts, note = fit_lengths(opts, probe.max_model_len)
    res = asyncio.run(run_sweep(probe, opts, api_key, out, on_level, [note] if note else []))
    res.input_len, res.output_len = opts.input_len, opts.output_len
    return res


def sweep_find_max(probe: ProbeResult, opts: SweepOptions, ceiling: float, api_key: str | None = None,
                   out: Path | None = None):
    """The highest level (concurrency, or request rate with opts.rate) whose level meets
    opts.slo, by doubling from opts.levels[0] and bisecting (kb.live.slo.find_max).
    Returns (FindMax, SweepResult with every level run, in the order run)."""
    check_levels(replace(opts, levels=[opts.levels[0], ceiling]))
    opts, note = fit_lengths(opts, probe.max_model_len)  # once: every level below runs these lengths
    res = SweepResult(warnings=[note] if note else [], input_len=opts.input_len, output_len=opts.output_len)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("")

    def measure(level: float) -> dict | None:
        if res.interrupted or res.error:
            return None
        one = sweep(probe, replace(opts, levels=[level if opts.rate else int(level)]), api_key)
        res.warnings += one.warnings
        res.prompt_words, res.prompt_tokens = one.prompt_words, one.prompt_tokens
        if one.interrupted:
            res.interrupted = True
        if not one.levels:
            res.error = one.error
            return None
        row = one.levels[0]
        res.levels.append(row)
        if out:
            with open(out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
        return row

    found = slo.find_max(measure, opts.levels[0], ceiling, integer=not opts.rate)
    return found, res
