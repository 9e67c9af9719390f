"""KB111 async-scheduling

What it flags: a vLLM version whose `--async-scheduling` is off by default,
running without it.

Why it matters: without it the CPU schedules the next step only after the GPU
finishes the current one; on fast GPUs with small models that gap is a visible
share of every decode step.

Evidence: the vLLM version (flag catalog default) and the server arguments.

Fix: add `--async-scheduling`; measure, since gains depend on how host-bound the
deployment is.
"""

from kb.rules.base import FlagChange, Proposal, Rule, RuleContext


def check(ctx: RuleContext) -> Proposal | None:
    flag = "--async-scheduling"
    if ctx.engine != "vllm" or not ctx.catalog.has(flag) or ctx.ev.arg("async_scheduling"):
        return None
    if ctx.catalog.flags[flag].get("default") is not False:
        return None  # newer versions decide it themselves
    hot = [s for s in ("throughput-plateau", "ttft-queueing", "low-single-stream-decode") if s in ctx.signals]
    return Proposal(title="Turn on vLLM async scheduling", severity="low",
                    rationale="the scheduler waits for each GPU step before preparing the next one.",
                    changes=[FlagChange("async_scheduling", flag, True, None, "overlap CPU scheduling with GPU work")],
                    supporting=hot or ["server-args"])


RULE = Rule(id="KB111", name="async-scheduling", title="vLLM async scheduling off",
            fix_class="overlap-schedule", signals=("throughput-plateau", "ttft-queueing", "low-single-stream-decode"),
            needs=(), severity="low", engines=("vllm",), reads="vLLM version and server arguments",
            example=("`vllm serve Qwen/Qwen3-8B` on vLLM 0.11.0 (async scheduling off by default) → --async-scheduling"
                     " (tests/rules/KB111/fires)"),
            check=check, doc=__doc__)
