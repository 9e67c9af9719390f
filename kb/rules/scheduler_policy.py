"""KB104 scheduler-conservativeness

What it flags: requests wait while the running batch is below its cap and the
KV cache is far from full (sglang reserves KV for future decode tokens too
conservatively), or TTFT grows with load because long prefills hold up decode.

Why it matters: the scheduler keeps the batch smaller than memory allows, so
throughput plateaus below what the hardware can do; or prompts queue behind
long prefills and TTFT grows.

Evidence: `#queue-req` > 0 with `token usage` well under 0.9 and running below
the cap; TTFT rising steeply with concurrency.

Fix: sglang `--schedule-conservativeness 0.3` (admit more requests); for TTFT,
a smaller prefill chunk (`--chunked-prefill-size` / vLLM
`--max-num-batched-tokens`) so decode steps interleave with long prompts.
"""

from kb.rules.base import Proposal, Rule, RuleContext, Threshold, change


def check(ctx: RuleContext) -> Proposal | None:
    changes, evidence, supporting = [], [], []
    for tr in ctx.ev.traces:
        s = tr.stats
        cap = tr.startup.get("max_running_requests") or ctx.arg("max_running_requests")
        usage = s.get("token_usage_max")
        if (ctx.engine == "sglang" and (s.get("queue_nonzero_frac") or 0) >= ctx.limit("queue_fraction")
                and usage is not None and usage < ctx.limit("kv_usage_max")
                and cap and (s.get("running_max") or 0) < int(cap) * ctx.limit("cap_fraction")):
            c = change(ctx, "schedule_conservativeness", 0.3,
                       f"requests queue while KV usage peaks at {usage:.0%} and running stays below the cap {cap}")
            if c:
                changes.append(c)
                supporting.append("throughput-plateau" if "throughput-plateau" in ctx.signals else "queue")
            break
    ttft = ctx.signals.get("ttft-queueing")
    long_inputs = max((r.input_len or 0 for r in ctx.ev.bench), default=0)
    if ttft and long_inputs >= ctx.limit("long_input_tokens"):
        current = ctx.arg("chunked_prefill")
        new = 4096 if ctx.engine == "sglang" else 2048
        if not current or int(current) > new:
            c = change(ctx, "chunked_prefill", new, f"prompts average {long_inputs:.0f} tokens: smaller prefill chunks "
                                                    "let decode steps run between them")
            if c:
                c.current = current
                changes.append(c)
                evidence += ttft.evidence
                supporting.append("ttft-queueing")
    if not changes:
        return None
    return Proposal(title="Let the scheduler admit more work" if changes[0].setting == "schedule_conservativeness"
                    else "Interleave long prefills with decode", severity="moderate",
                    rationale="the scheduler, not memory or compute, is holding requests back.",
                    changes=changes, evidence=evidence, supporting=supporting)


RULE = Rule(id="KB104", name="scheduler-conservativeness", title="Scheduler holds requests back",
            fix_class="scheduler-policy", signals=("ttft-queueing", "throughput-plateau"),
            needs=("server-log|benchmark",), severity="moderate",
            reads="server log with queue, running and token usage; benchmark TTFT per level",
            thresholds=(Threshold("queue_fraction", 0.3, "share of stats lines with a waiting queue"),
                        Threshold("kv_usage_max", 0.7, "peak KV token usage below which memory is not the limit"),
                        Threshold("cap_fraction", 0.9, "running requests below this share of the cap: the cap "
                                                      "is not the limit"),
                        Threshold("long_input_tokens", 2048, "benchmark input length from which prefill chunks "
                                                             "are made smaller")),
            example=("half of sglang's stats lines show 30 waiting requests while 40 of 128 run at KV usage 0.31 → "
                     "--schedule-conservativeness 0.3 (tests/rules/KB104/fires)"),
            check=check, doc=__doc__)
