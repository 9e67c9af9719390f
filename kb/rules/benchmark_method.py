"""KB115 benchmark-method

What it flags: a serving benchmark whose set-up decides its numbers more than the
server does: fewer prompts than twice the concurrency, a run of a few seconds on a
server that got no warm-up (when every request was sent at once, with no concurrency
limit at request rate inf, such a run is one batch filled and drained), or random prompts on vLLM's
client without `--ignore-eos` (outputs stop at EOS: the lengths compared differ).

Why it matters: with fewer prompts than about twice the concurrency the load never
reaches steady state: the ramp-up and the drain tail are most of the run. A run of a
few seconds on a fresh server includes one-off costs (first-batch compilation and
allocation, cache warm-up). With every request in flight at once, TTFT is time spent
in the queue and throughput is that of one burst. InferenceX's benchmark recipes run
`--num-prompts` at 10 × `--max-concurrency` with a concurrency limit and
`--ignore-eos`; vLLM's `vllm bench serve` sends no warm-up unless `--num-warmups`
is given (sglang's bench_serving sends one request, at the measured concurrency).

Evidence: the benchmark command (`vllm bench serve`, `benchmark_serving.py`,
`python -m sglang.bench_serving`) and/or its result block (successful requests,
duration, peak concurrent requests).

Fix: the same benchmark with a concurrency limit, 10 × that many prompts, 2 × that
many warm-up requests and (vLLM, random data) `--ignore-eos`; the exact command is
written out with the values computed.
"""

from __future__ import annotations

from kb import benchcmd
from kb.records import BenchRun, Evidence, Where
from kb.rules.base import Proposal, Rule, RuleContext, Threshold

INF = float("inf")


def _command(ctx: RuleContext) -> tuple[benchcmd.BenchCommand | None, Where | None]:
    """The first benchmark command ingest found in the run's files (RunEvidence.bench_commands:
    found once, there, in every text file; read here, never searched for again), and where."""
    for c in ctx.ev.bench_commands:
        cmd = benchcmd.parse(c.text)
        if cmd:
            return cmd, c.where
    return None, None


# offline benchmarks (one static batch, the in-process throughput run) have no request
# stream to ramp up, queue or warm: only serving benchmarks are judged
OFFLINE = ("sglang-one-batch", "vllm-throughput")


def _top(runs: list[BenchRun]) -> BenchRun | None:
    return max((r for r in runs if r.tool not in OFFLINE), key=lambda r: r.level(), default=None)


def _fresh_command(ctx: RuleContext, tool: str, top: BenchRun | None) -> benchcmd.BenchCommand:
    """A benchmark command for this run when none was pasted: its model, and random prompts of
    the benchmark's mean lengths."""
    model = ctx.ev.model_path if isinstance(ctx.ev.model_path, str) else (top.model if top else None)
    words = (["vllm", "bench", "serve"] if tool == "vllm"
             else ["python3", "-m", "sglang.bench_serving", "--backend", "sglang"])
    if model:
        words += ["--model", model]
    if top and top.input_len and top.output_len:
        words += ["--dataset-name", "random", "--random-input-len", str(round(top.input_len)),
                  "--random-output-len", str(round(top.output_len))]
    return benchcmd.parse(" ".join(words)) or benchcmd.BenchCommand(tool, " ".join(words))


def check(ctx: RuleContext) -> Proposal | None:
    cmd, cmd_where = _command(ctx)
    top = _top(ctx.ev.bench)
    if not cmd and not top:
        return None
    tool = cmd.tool if cmd else ("sglang" if top and top.tool.startswith("sglang") else ctx.engine)
    n = cmd.number("--num-prompts") if cmd else None
    if n is None and top:
        n = top.num_prompts or ((top.completed or 0) + (top.failed or 0)) or None
    if n is None and cmd and tool == "vllm":
        n = 1000  # vllm bench serve's default
    conc = cmd.number("--max-concurrency") if cmd else None
    conc = conc or (top.concurrency if top else None)
    rate = cmd.number("--request-rate") if cmd and cmd.args.get("--request-rate") is not None else (
        top.request_rate if top else None)
    unbounded = not conc and (rate is None or rate == INF)
    peak = top.peak_concurrency if top else None
    warm = cmd.warmups if cmd else (0 if tool == "vllm" else 1)
    problems: list[str] = []
    evidence: list[Evidence] = []
    if cmd:
        evidence.append(Evidence(text=f"benchmark command: {cmd.text}", where=cmd_where))
    if top and top.source:
        evidence.append(Evidence(text=f"benchmark: {n and int(n)} requests, duration {top.duration_s} s, "
                                      f"peak concurrency {peak}", where=top.source))
    load = conc or (peak if unbounded and peak else None)

    if conc and n and n < ctx.limit("min_prompts_per_slot") * conc:
        problems.append(f"{int(n)} prompts for a concurrency of {int(conc)}: the load is still ramping up or "
                        "draining for most of the run")
    # of a sweep, only its top levels short of prompts: the curve below them stands, so this
    # is a check to make, ranked after what the evidence shows
    levels = {r.level() for r in ctx.ev.bench if r.tool not in OFFLINE}
    sweep_top_only = bool(problems) and not cmd and len(levels) >= 3
    # every request in flight at once: a throughput test at saturation when the run is long,
    # one batch filled and drained when it lasts seconds
    burst = unbounded and n and n >= ctx.limit("min_burst") and peak is not None and peak >= 0.9 * n
    short = top and top.duration_s is not None and top.duration_s < ctx.limit("min_duration_s")
    if short and (warm < 1 if cmd else burst):
        problems.append(f"a {top.duration_s:g} s run" + (f" with all {int(n)} requests in flight at once "
                                                         f"(peak {peak:g}, no concurrency limit)" if burst else "")
                        + " and no warm-up requests: it measures one batch of a fresh server, one-off costs "
                          "included, and its TTFT is mostly queueing")
    random_data = cmd and cmd.args.get("--dataset-name") == "random"
    if tool == "vllm" and random_data and not cmd.ignores_eos:
        problems.append("random prompts without --ignore-eos: each request stops at its first EOS, so output "
                        "lengths (and the work measured) differ between runs and servers")
    if not problems:
        return None

    base = cmd or _fresh_command(ctx, tool, top)
    changes: dict[str, object] = {}
    if load:
        c = int(load)
        changes["--max-concurrency"] = c
        changes["--num-prompts"] = max(int(n or 0), int(ctx.limit("prompts_per_slot")) * c)
        changes["--num-warmups" if tool == "vllm" else "--warmup-requests"] = int(
            ctx.limit("warmups_per_slot")) * c
        if tool == "vllm" and "--request-rate" in base.args:
            changes["--request-rate"] = "inf"
    if tool == "vllm" and (random_data or (not cmd and "--dataset-name" in base.args)) and not base.ignores_eos:
        changes["--ignore-eos"] = True
    notes = ["compare runs only when both used the same command: same prompts, lengths, concurrency and warm-up"]
    if top and top.output_len is not None and top.output_len <= 1:
        notes.append("one output token per request measures prefill only, not serving throughput")
    return Proposal(title="Fix the benchmark before tuning the server",
                    severity="low" if sweep_top_only and len(problems) == 1 else "moderate",
                    reminder=sweep_top_only and len(problems) == 1,
                    rationale="; ".join(problems) + ".",
                    commands=[base.with_args(changes)], evidence=evidence,
                    supporting=["ttft-queueing"] if "ttft-queueing" in ctx.signals else ["benchmark"],
                    notes=notes)


RULE = Rule(id="KB115", name="benchmark-method", title="Benchmark set-up distorts the measurement",
            fix_class="benchmark-method", signals=("ttft-queueing",), needs=(), severity="moderate",
            reads="the benchmark command and its result block",
            thresholds=(
                Threshold("min_prompts_per_slot", 2, "fewer prompts than this × the concurrency is too few"),
                Threshold("min_burst", 16, "an unlimited run of at least this many prompts sent at once is a burst"),
                Threshold("min_duration_s", 10, "a run shorter than this (s) without warm-up includes cold costs"),
                Threshold("prompts_per_slot", 10, "prompts per concurrency slot in the corrected command"),
                Threshold("warmups_per_slot", 2, "warm-up requests per concurrency slot in the corrected command"),
            ),
            example=("`vllm bench serve ... --num-prompts 50 --max-concurrency 64 --dataset-name random` → "
                     "--num-prompts 640 --num-warmups 128 --ignore-eos (tests/rules/KB115/fires)"),
            check=check, doc=__doc__)
