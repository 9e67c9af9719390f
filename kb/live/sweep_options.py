"""What a sweep runs: its options, their checks, the prompt and output lengths fitted
to the server's context, and what a sweep returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from kb.errors import KbError, UsageError
from kb.live import client as cl

DEFAULT_INPUT_LEN = 256
DEFAULT_OUTPUT_LEN = 256


@dataclass
class SweepOptions:
    levels: list[int]
    requests: int | None = None  # per level; default max(16, 4 × concurrency)
    duration: float | None = None  # seconds per level: stop sending after this
    input_len: int | None = None  # tokens; None: DEFAULT_INPUT_LEN, fitted to the server's context
    output_len: int | None = None  # tokens; None: DEFAULT_OUTPUT_LEN, fitted likewise
    max_level_time: float = 900.0  # hard cap on one level's wall time
    metrics_interval: float = 1.0  # a scrape costs the server: 4 a second slowed a CPU vLLM's decode ~15%
    first_sample: float = 0.25  # so that a short level still gets one sample
    timeouts: cl.Timeouts = field(default_factory=lambda: cl.Timeouts(connect=5.0, read=60.0))
    seed: int = 0
    progress: bool = False  # a progress bar on stderr
    rate: bool = False  # levels are request rates (req/s, Poisson arrivals), not concurrencies
    slo: list | None = None  # kb.live.slo objectives: each level gets its goodput and verdict
    # Requests sent at the highest level before the measured levels, not recorded: a fresh
    # CPU vLLM served its first sweep at 40-60% of the throughput of the next ones (measured
    # here: 902 then 2,305 and 2,165 output tok/s, same server and workload).
    warmup: int = 0

    def requests_for(self, c: float) -> int:
        if self.requests:
            return self.requests
        if self.duration:
            return 1_000_000  # the duration bounds the level
        return max(16, 4 * math.ceil(c))


@dataclass
class SweepResult:
    levels: list[dict] = field(default_factory=list)
    interrupted: bool = False
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    prompt_words: int = 0
    prompt_tokens: int | None = None
    input_len: int | None = None  # the lengths used, after fitting
    output_len: int | None = None


def check_levels(opts: SweepOptions) -> None:
    if opts.rate:
        if not opts.levels or any(not (0 < r <= 10_000) for r in opts.levels):
            raise UsageError("rate: expected request rates above 0 and at most 10000 req/s, e.g. 0.5,1,2,4")
    elif not opts.levels or any(c < 1 for c in opts.levels):
        raise UsageError("concurrency: expected positive levels, e.g. 1,8,32,128")
    elif max(opts.levels) > 4096:
        raise UsageError("concurrency: levels above 4096 are not supported")


def parse_rates(text: str) -> list[float]:
    try:
        rates = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UsageError(f"rate {text!r}: expected comma-separated request rates, e.g. 0.5,1,2,4") from None
    if not rates or any(not math.isfinite(r) for r in rates):
        raise UsageError(f"rate {text!r}: expected comma-separated finite request rates, e.g. 0.5,1,2,4")
    return rates


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UsageError(f"concurrency {text!r}: expected comma-separated whole numbers, e.g. 1,8,32,128") from None
    if not levels:
        raise UsageError("concurrency: no level given")
    return levels


def fit_lengths(opts: SweepOptions, ctx: int | None) -> tuple[SweepOptions, str | None]:
    """The prompt and output lengths to send, within the server's context `ctx` (its
    max_model_len; None when unknown): lengths the user gave are kept, or refused when they
    cannot fit (before any load is sent: vLLM answers HTTP 400 to a prompt longer than the
    context and silently shortens the output of one that fits without its max_tokens,
    sglang refuses both); a default is fitted into what is left, and the note says so."""
    given_in, given_out = opts.input_len, opts.output_len
    if (given_in is not None and given_in < 1) or (given_out is not None and given_out < 1):
        raise UsageError("input_len and output_len must be at least 1")
    if given_in is not None and given_out is not None:
        if ctx and given_in + given_out > ctx:
            raise KbError(f"input_len {given_in} + output_len {given_out} = {given_in + given_out} tokens do not "
                          f"fit the server's context of {ctx} tokens (max_model_len): give lengths that sum to at "
                          f"most {ctx}")
        return opts, None
    if given_in is not None or given_out is not None:  # one given: the default takes what is left
        given = given_in if given_in is not None else given_out
        name = "input_len" if given_in is not None else "output_len"
        default = DEFAULT_OUTPUT_LEN if given_in is not None else DEFAULT_INPUT_LEN
        room = ctx - given if ctx else default
        if room < 1:
            raise KbError(f"{name} {given} tokens leave no room in the server's context of {ctx} tokens "
                          f"(max_model_len): give at most {ctx - 1}")
        other = min(default, room)
        fitted = replace(opts, input_len=given if given_in is not None else other,
                         output_len=other if given_in is not None else given)
        what = "output" if given_in is not None else "input"
        note = (f"the server's context is {ctx} tokens (max_model_len): {what} length {other} tokens, not the default "
                f"{default}, beside {name} {given}") if other < default else None
        return fitted, note
    if not ctx or DEFAULT_INPUT_LEN + DEFAULT_OUTPUT_LEN <= ctx:
        return replace(opts, input_len=DEFAULT_INPUT_LEN, output_len=DEFAULT_OUTPUT_LEN), None
    if ctx < 2:
        raise KbError(f"the server's context of {ctx} tokens (max_model_len) holds no prompt and output")
    inp = ctx // 2  # the defaults' one-to-one split
    out = ctx - inp
    return replace(opts, input_len=inp, output_len=out), (
        f"the server's context is {ctx} tokens (max_model_len): input {inp} + output {out} tokens instead of the "
        f"default {DEFAULT_INPUT_LEN} + {DEFAULT_OUTPUT_LEN} (the input_len and output_len settings set them)")
