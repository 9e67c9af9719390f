"""KB114 fp8-checkpoint

What it flags: a model served with 16-bit weights on a GPU with FP8 tensor cores
(Ada, Hopper, Blackwell; MI300-class), when its publisher ships an FP8 checkpoint.

Why it matters: FP8 weights halve the bytes read per decoded token and run the
GEMMs at the FP8 tensor-core rate; they also free memory for KV cache (the shipped
finding hw-quantization-h100-fp8-vs-a100-weight-only: static FP8 +26.7% ShareGPT
throughput over BF16 on H100, GPUStack). Qwen's FP8 model cards describe fine-grained
FP8 (block 128) with metrics nearly identical to BF16.

Evidence: config.json (no quantization, 16-bit dtype) or a served path that names no
quantization; the GPU architecture; the served path naming a publisher that ships
FP8 versions (Qwen3: `Qwen/<name>-FP8`; GLM-4.5 and later: `zai-org/<name>-FP8`, per
their model cards).

Fix: serve the FP8 checkpoint; check quality on your own evaluation. A check, not a
diagnosis, unless the run is throughput-bound.
"""

import re

from kb.launchcmd import render
from kb.rules.base import Proposal, Rule, RuleContext

FP8_ARCHS = ("SM89", "SM90", "SM100", "SM103", "SM120", "SM121", "gfx942", "gfx950")
# publisher repo names whose FP8 versions are the same name plus "-FP8" (model cards)
PUBLISHED_FP8 = [re.compile(r"^Qwen/Qwen3[\w.-]*$"), re.compile(r"^zai-org/GLM-4\.[5-9][\w.-]*$"),
                 re.compile(r"^zai-org/GLM-[5-9][\w.-]*$")]
QUANT_WORDS = re.compile(r"fp8|fp4|int4|int8|awq|gptq|w4a|w8a|nvfp|mxfp|gguf|bnb|quant", re.I)
SIXTEEN_BIT = (None, "bf16", "fp16", "bfloat16", "float16")


def check(ctx: RuleContext) -> Proposal | None:
    path = ctx.ev.model_path if isinstance(ctx.ev.model_path, str) else ""
    m = ctx.model
    if ctx.arch() not in FP8_ARCHS or not path or QUANT_WORDS.search(path) or ctx.arg("quantization"):
        return None
    if m is not None and (m.quantization not in SIXTEEN_BIT):
        return None
    if not any(rx.match(path) for rx in PUBLISHED_FP8):
        return None
    fp8 = f"{path}-FP8"
    hot = [s for s in ("throughput-plateau", "ttft-queueing", "running-cap-with-queue") if s in ctx.signals]
    argv = ctx.ev.launch_argv
    commands = []
    if argv and path in argv:
        commands.append(render([fp8 if w == path else w for w in argv], ctx.ev.launch_env))
    return Proposal(title=f"Serve the FP8 checkpoint {fp8} on {ctx.arch()}", severity="low",
                    rationale=f"{path} runs with 16-bit weights on {ctx.arch()}, which has FP8 tensor cores; its "
                              "publisher ships an FP8 version.",
                    commands=commands, supporting=hot or ["context"],
                    notes=["check output quality on your own evaluation before switching"])


RULE = Rule(id="KB114", name="fp8-checkpoint", title="16-bit weights on an FP8-capable GPU",
            fix_class="quantization", signals=("throughput-plateau", "ttft-queueing", "running-cap-with-queue"),
            needs=("gpu-arch", "model-path"), severity="low",
            reads="GPU architecture; the served model path (and config.json when present)",
            example=("Qwen/Qwen3-14B (BF16) served on an H100 (SM90) → the same launch command with --model-path "
                     "Qwen/Qwen3-14B-FP8 (tests/rules/KB114/fires)"),
            check=check, doc=__doc__)
