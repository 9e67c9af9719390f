"""KB102 cuda-graph-ceiling

What it flags: decode batches larger than the largest captured CUDA-graph batch
(`cuda graph: False` at high load in sglang's Decode batch lines, or a running
batch above `--cuda-graph-max-bs` / vLLM's largest capture size).

Why it matters: batches above the ceiling run eagerly, paying kernel-launch
overhead on every layer; per-token latency jumps and throughput flattens exactly
where the load is highest.

Evidence: decode lines with `cuda graph: False`; the capture list in the start-up
log; the running batch the log reports.

Fix: raise the ceiling to at least the running batch you serve (and the new
running-request cap, if KB101 raises it). Captured graphs cost memory: if start-up
then runs out of memory, lower the static memory fraction a little.
"""

from kb.rules.base import Proposal, Rule, RuleContext, Threshold, change, round_up, target_running_cap


def check(ctx: RuleContext) -> Proposal | None:
    sig = ctx.signals.get("cuda-graph-exceeded")
    captured = ctx.arg("cuda_graph_max_bs") or (sig.data.get("captured_max_bs") if sig else None)
    observed = max(ctx.max_running_seen(), sig.data.get("running_max", 0) if sig else 0)
    cap_target = target_running_cap(ctx) if ctx.signals.get("throughput-plateau") or sig else None
    need = max(observed, cap_target or 0)
    if not sig and not (captured and need > int(captured)):
        return None
    if sig and sig.data.get("from_startup"):
        # only the start-up facts are known: cover the batches a busy server commonly runs,
        # not the whole cap (graphs cost memory); decode lines will show if more is needed
        need = min(need, int(ctx.limit("startup_batch")))
    new = round_up(need, 8)
    if captured and new <= int(captured):
        return None
    flag = change(ctx, "cuda_graph_max_bs", new,
                  f"at least the running batch observed ({observed})"
                  + (f" and the proposed running cap ({cap_target})" if cap_target else ""))
    if not flag:
        return None
    flag.current = captured
    return Proposal(
        title=f"Capture CUDA graphs up to batch {new} ({flag.flag})",
        severity=sig.severity if sig else "moderate",
        rationale=(f"graphs are captured only up to batch {captured or 'the default'} while the running batch "
                   + (f"reaches {observed}" if observed > int(captured or 0) else f"is to grow to {cap_target}")
                   + "; larger batches run without CUDA graphs."),
        changes=[flag], evidence=sig.evidence if sig else [],
        supporting=[s for s in ("cuda-graph-exceeded", "throughput-plateau") if s in ctx.signals],
        notes=["captured graphs take GPU memory: if start-up fails with OOM, lower the static memory fraction by 0.02"],
    )


RULE = Rule(id="KB102", name="cuda-graph-ceiling", title="Decode batches exceed the CUDA-graph ceiling",
            fix_class="cuda-graph-max-bs", signals=("cuda-graph-exceeded", "throughput-plateau"),
            needs=("server-log|benchmark",), severity="severe",
            reads="sglang Decode batch lines with `cuda graph:`, or the captured maximum and the running batch",
            thresholds=(Threshold("startup_batch", 256, "with start-up facts only (no decode lines), capture graphs "
                                                        "up to at most this batch"),),
            example=("graphs captured up to batch 32 (`Capture cuda graph bs [1, ..., 32]`) while decode lines show "
                     "`#running-req: 64..71, cuda graph: False` under a running cap of 96 → capture up to batch 192 "
                     "(tests/rules/KB102/fires)"),
            check=check, doc=__doc__)
