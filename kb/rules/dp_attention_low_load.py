"""KB113 dp-attention-low-load

What it flags: sglang serving with DP attention (`--enable-dp-attention`) under a
load of a few requests in flight.

Why it matters: DP attention splits the running batch across the attention ranks
and adds a gather/scatter around every MoE layer; it pays off when each rank has a
batch of its own. At low load the ranks idle and the extra communication shows up
in every decode step (sglang issue #2882: half the output throughput at a low
request rate with it on; the maintainer answer was that DP attention is for
large-QPS loads).

Evidence: `--enable-dp-attention` in the server arguments; the `low-load` signal.

Fix: remove `--enable-dp-attention` (and `--dp-size`) for latency-bound serving;
keep it for high-concurrency throughput.
"""

from kb.rules.base import Proposal, Rule, RuleContext, change


def check(ctx: RuleContext) -> Proposal | None:
    low = ctx.signals.get("low-load")
    if ctx.engine != "sglang" or not low or not ctx.arg("dp_attention"):
        return None
    changes = [change(ctx, "dp_attention", None, "each attention rank would get too small a batch at this load")]
    if ctx.arg("dp"):
        changes.append(change(ctx, "dp", None, "back to one attention group"))
    changes = [c for c in changes if c]
    if not changes:
        return None
    changes[0].current = True
    return Proposal(title="Turn DP attention off at this low load", severity="moderate",
                    rationale=low.summary + "; DP attention only pays when every attention rank has its own batch.",
                    changes=changes, evidence=low.evidence, supporting=["low-load"],
                    notes=["keep DP attention for high-concurrency throughput: measure both at the load you serve"])


RULE = Rule(id="KB113", name="dp-attention-low-load", title="DP attention at low load",
            fix_class="dp-attention", signals=("low-load",),
            needs=("server-args", "benchmark"), severity="moderate", engines=("sglang",),
            reads="sglang server arguments with --enable-dp-attention; a benchmark showing the load",
            example=("sglang with --enable-dp-attention --dp 8 and a benchmark keeping 2 requests in flight → drop "
                     "--enable-dp-attention and --dp (tests/rules/KB113/fires)"),
            check=check, doc=__doc__)
