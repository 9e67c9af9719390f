"""KB110 eager-mode

What it flags: CUDA graphs turned off (sglang `--disable-cuda-graph`, vLLM
`--enforce-eager`), usually left over from debugging a start-up problem.

Why it matters: without CUDA graphs every decode step launches each kernel from
Python; at small and medium batch that launch overhead dominates.

Evidence: the flag in the launch command or server arguments.

Fix: remove the flag; if it was added to save memory, lower the graph batch
ceiling instead.
"""

from kb.rules.base import Proposal, Rule, RuleContext, change


def check(ctx: RuleContext) -> Proposal | None:
    if not ctx.arg("disable_cuda_graph"):
        return None
    c = change(ctx, "disable_cuda_graph", None, "CUDA graphs remove per-kernel launch overhead from every decode step")
    if not c:
        return None
    c.current = True
    return Proposal(title=f"Remove {c.flag}", severity="severe",
                    rationale="the server runs every decode step eagerly.", changes=[c], supporting=["server-args"])


RULE = Rule(id="KB110", name="eager-mode", title="CUDA graphs disabled",
            fix_class="eager-mode", signals=(), needs=("server-args",), severity="severe",
            reads="the server arguments",
            example=("`python3 -m sglang.launch_server ... --disable-cuda-graph` → the same command without it "
                     "(tests/rules/KB110/fires)"),
            check=check, doc=__doc__)
