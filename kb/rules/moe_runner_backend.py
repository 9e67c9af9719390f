"""KB106 moe-runner-backend

What it flags: a MoE model in NVFP4 (or FP8/MXFP4 on B200-class GPUs) served on
Blackwell (SM100/SM103/SM120) with the default or Triton MoE runner.

Why it matters: Blackwell has native FP4 tensor cores that the FlashInfer MoE
kernels (CUTLASS on SM120, TRT-LLM on SM100) use; the generic path leaves them
idle, so MoE-heavy decode runs far below the hardware's rate.

Evidence: GPU architecture (nvidia-smi or --gpu), model quantization
(hf_quant_config.json / quantization_config), the current MoE runner backend.

Fix: sglang `--moe-runner-backend flashinfer_cutlass` (SM120) or
`flashinfer_trtllm` (SM100); vLLM `--moe-backend` with the same choice where the
version has it. FlashInfer autotunes these kernels at start-up.
"""

from kb.moebackend import BLACKWELL, pick_backend
from kb.rules.base import Proposal, Rule, RuleContext, change


def check(ctx: RuleContext) -> Proposal | None:
    m, arch = ctx.model, ctx.arch()
    if not m or not m.is_moe or arch not in BLACKWELL:
        return None
    want = pick_backend(arch, m.quantization)
    current = ctx.arg("moe_runner_backend")
    if not want or current == want or (current not in (None, "auto", "triton")):
        return None
    flag = ctx.catalog.flag_for("moe_runner_backend")
    if not flag or want not in (ctx.catalog.choices(flag) or []):
        return None  # this engine version has no such backend
    c = change(ctx, "moe_runner_backend", want, f"{m.quantization.upper()} MoE on {arch}: FlashInfer kernels use the "
                                                 "Blackwell FP4/FP8 tensor cores")
    c.current = current
    hot = [s for s in ("throughput-plateau", "moe-default-config", "low-single-stream-decode") if s in ctx.signals]
    return Proposal(title=f"Run MoE on {want} ({arch}, {m.quantization})", severity="severe" if hot else "low",
                    rationale=f"the MoE runner is `{current or 'auto'}`; on {arch} with {m.quantization} weights "
                              f"{want} is the path built for this hardware.",
                    changes=[c], supporting=hot or ["context"],
                    notes=["FlashInfer autotunes at start-up: the first launch takes longer"])


RULE = Rule(id="KB106", name="moe-runner-backend", title="MoE runner backend not suited to Blackwell",
            fix_class="moe-runner-backend",
            signals=("throughput-plateau", "moe-default-config", "low-single-stream-decode"),
            needs=("model-config", "gpu-arch"), severity="severe",
            reads="GPU architecture, MoE model with its quantization, current MoE backend",
            example=("nvidia/GLM-5-NVFP4 (MoE, NVFP4) on 8x B200 with the MoE runner on auto → --moe-runner-backend "
                     "flashinfer_trtllm (tests/rules/KB106/fires)"),
            check=check, doc=__doc__)
