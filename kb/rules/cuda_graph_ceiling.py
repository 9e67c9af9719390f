"""KB102 cuda-graph-ceiling

What it flags: decode batches larger than the largest captured CUDA-graph batch
(`cuda graph: False` at high load in sglang's Decode batch lines, or a running
batch above `--cuda-graph-max-bs` / vLLM's largest capture size).

Why it matters: batches above the ceiling run eagerly, paying kernel-launch
overhead on every layer; per-token latency jumps and throughput flattens exactly
where the load is highest.

Evidence: decode lines with `cuda graph: False`; the capture list in the start-up
log; the running batch the log reports. With no log, the launch line alone: a running
cap set above a capture ceiling also set (low severity, moderate when a benchmark ran
above the ceiling).

Fix: raise the ceiling to at least the running batch you serve (and the new
running-request cap, if KB101 raises it). Captured graphs cost memory: if start-up
then runs out of memory, lower the static memory fraction a little.
"""

import re

from kb.rules.base import Proposal, Rule, RuleContext, Threshold, change, round_up, target_running_cap


def _largest(value) -> int | None:
    """The largest batch a setting names: `64`, or vLLM 0.11's list `--cuda-graph-sizes 1 2 4 8`."""
    if value in (None, True, False):
        return None
    nums = [int(n) for n in re.findall(r"\d+", " ".join(map(str, value)) if isinstance(value, list) else str(value))]
    return max(nums) if nums else None


def from_launch(ctx: RuleContext) -> Proposal | None:
    """The launch line alone: a running cap set above a capture ceiling also set. Batches
    between the two run without graphs once the load gets there; a benchmark at a load
    above the ceiling shows it got there (moderate), without one it is a check (low)."""
    cap = _largest(ctx.arg("max_running_requests"))
    captured = _largest(ctx.arg("cuda_graph_max_bs"))
    level = ctx.max_level()
    if not cap or not captured or cap <= captured or (level and level <= captured):
        return None
    new = round_up(min(cap, level or int(ctx.limit("startup_batch"))), 8)
    if new <= captured:
        return None
    why = f"the running cap is {cap}" + (f", the benchmark ran {level:g} concurrent requests" if level else "")
    flag = change(ctx, "cuda_graph_max_bs", new, why)
    if not flag:
        return None
    flag.current = ctx.arg("cuda_graph_max_bs")
    return Proposal(
        title=f"Capture CUDA graphs up to batch {new} ({flag.flag})",
        severity="moderate" if level else "low",
        rationale=(f"graphs are captured up to batch {captured} while up to {cap} requests may run at once"
                   + (f" and the benchmark ran {level:g}" if level else "")
                   + "; batches above the ceiling run without CUDA graphs."),
        changes=[flag], supporting=["server-args"],
        notes=["captured graphs take GPU memory: if start-up fails with OOM, lower the static memory fraction by 0.02"]
        + ([] if level else [f"{new} covers the batches a busy server commonly runs (the `startup_batch` threshold); "
                             "raise it further if the running batch goes higher"]))


def check(ctx: RuleContext) -> Proposal | None:
    sig = ctx.signals.get("cuda-graph-exceeded")
    if not sig and not ctx.ev.traces:
        return from_launch(ctx)
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
            needs=("server-log|benchmark|server-args",), severity="severe",
            reads="sglang Decode batch lines with `cuda graph:`, or the captured maximum and the running batch",
            thresholds=(Threshold("startup_batch", 256, "with start-up facts only (no decode lines), capture graphs "
                                                        "up to at most this batch"),),
            example=("graphs captured up to batch 32 (`Capture cuda graph bs [1, ..., 32]`) while decode lines show "
                     "`#running-req: 64..71, cuda graph: False` under a running cap of 96 → capture up to batch 192 "
                     "(tests/rules/KB102/fires)"),
            check=check, doc=__doc__)
