"""KB101 running-request-cap

What it flags: the server runs at most N requests at once (sglang
`--max-running-requests`, vLLM `--max-num-seqs`) and the load asks for more:
running requests pinned at the cap while the queue grows, or a throughput knee
at the cap.

Why it matters: requests beyond the cap wait in the queue; the GPUs decode a
batch no larger than the cap however much load arrives, so throughput plateaus
and TTFT grows with queueing.

Evidence: `#running-req` / `Running: N reqs` at the cap with `#queue-req` /
`Waiting` > 0 in the server log or /metrics; a plateau whose knee sits at the cap;
or a benchmark offering more concurrency than the cap while TTFT shows queueing.
Without the queueing symptom, a cap set in the launch line below the benchmark's
concurrency is a low-severity check: the excess requests wait by arithmetic.

Fix: raise the cap to the load you serve, within the KV capacity the start-up
log reports; raise the CUDA-graph batch ceiling with it (KB102).
"""

from kb.rules.base import Proposal, Rule, RuleContext, Threshold, change, kv_fit, target_running_cap


def check(ctx: RuleContext) -> Proposal | None:
    sig = ctx.signals.get("running-cap-with-queue")
    plateau = ctx.signals.get("throughput-plateau")
    cap = ctx.arg("max_running_requests") or (sig.data["cap"] if sig else None)
    binds_at_knee = bool(plateau and cap and int(cap) <= plateau.data["knee"] * ctx.limit("knee_margin"))
    queueing = ctx.signals.get("ttft-queueing")
    below_load = bool(queueing and cap and int(cap) < ctx.max_level())  # offered more than it may run
    # without a queueing symptom, a cap set below the benchmark's concurrency is arithmetic
    # only (the excess requests wait), not a measured slowdown: a low-severity check
    offered_more = bool(not sig and not binds_at_knee and not below_load and _given(ctx.arg("max_running_requests"))
                        and cap and int(cap) < ctx.max_level())
    if not sig and not binds_at_knee and not below_load and not offered_more:
        return None
    new = target_running_cap(ctx)
    if not new:
        return None
    tested = f"highest load tested {ctx.max_level()}, " if ctx.max_level() else ""  # none: a trace without a benchmark
    flag = change(ctx, "max_running_requests", new, f"evidence asks for {new} running requests ({tested}cap {cap})")
    if not flag:
        return None
    flag.current = cap
    supporting = [s for s in ("running-cap-with-queue", "throughput-plateau", "ttft-queueing") if s in ctx.signals]
    if offered_more:
        return Proposal(
            title=f"Raise {flag.flag} from {cap} to {new}",
            severity="low",
            rationale=(f"the benchmark offers {ctx.max_level():g} concurrent requests to a server that runs at most "
                       f"{cap}: up to {ctx.max_level() - int(cap):g} wait in the queue and their TTFT includes "
                       "the wait."),
            changes=[flag], supporting=supporting or ["server-args"],
            notes=["kb's running cap stays within the KV capacity only when the start-up log gives it: check the "
                   "log's KV cache size before raising the cap this far"] if not kv_fit(ctx) else [])
    return Proposal(
        title=f"Raise {flag.flag} from {cap} to {new}",
        severity=sig.severity if sig else "moderate",
        rationale=(f"running requests stop at {cap} while requests wait; a larger running batch lets the GPUs "
                   f"work on more sequences per decode step."),
        changes=[flag], evidence=(sig or plateau or queueing).evidence[:3], supporting=supporting,
    )


def _given(value) -> bool:
    """A cap the user set (a number), not one the evidence inferred."""
    return value not in (None, "", True, False) and str(value).isdigit()


RULE = Rule(id="KB101", name="running-request-cap", title="Running-request cap binds under load",
            fix_class="max-running-requests", signals=("running-cap-with-queue", "throughput-plateau", "ttft-queueing"),
            needs=("server-log|benchmark",), severity="severe",
            reads="the current cap (launch command, server_info or start-up log) or the pinned-at-cap signal",
            thresholds=(Threshold("knee_margin", 1.1, "the cap binds when it is at most this times the plateau's "
                                                      "knee concurrency"),),
            example=("sglang with --max-running-requests 128; every stats line shows `#running-req: 128` with 64 "
                     "waiting; 500,000 KV tokens and 2,000-token requests → --max-running-requests 250 "
                     "(tests/rules/KB101/fires)"),
            check=check, doc=__doc__)
