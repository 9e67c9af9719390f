"""KB105 moe-kernel-config

What it flags: the fused-MoE Triton kernel runs with its default tile config
(`Using default MoE kernel config ... Config file not found at .../E=..,N=..,
device_name=..`), so no tuned config exists for this expert count, shard size and
GPU. Without a server log, a MoE model on the Triton runner gets a low-severity
reminder to check for the warning; a reminder has no symptom behind it, so it ranks
after every recommendation this run's evidence supports.

Why it matters: MoE layers dominate decode time in large MoE models; untuned
tiles can leave much of the GPU idle. When another MoE runner backend is in use
(FlashInfer, CUTLASS, DeepGEMM), the Triton config is not on the hot path and the
warning is a red herring.

Evidence: the warning line, with E, N, device and dtype read from its path;
the model's routed experts and expert intermediate size; the TP size. Without a
log, for vLLM: the tuned configs the newest vLLM kb lists ships (kb/data/moe_configs):
a version known to ship one for this shape and GPU keeps the rule quiet.

Fix: run the engine's tuning script for exactly this E and N on this GPU and
put the file where the warning says it looked.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

from kb import launchcmd
from kb.flagdata import version_key
from kb.rules.base import Proposal, Rule, RuleContext

# the tuned configs vLLM ships (scripts/gen_moe_config_list.py lists an installed vLLM's
# fused_moe/configs): with no log, they say whether this shape on this GPU has one
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "data" / "moe_configs"

# architectures whose shared expert sglang fuses into the routed-expert kernel (E + 1)
FUSED_SHARED_EXPERT_ARCHS = {"DeepseekV3ForCausalLM", "GlmMoeDsaForCausalLM", "Glm4MoeLiteForCausalLM"}
TRITON_BACKENDS = (None, "auto", "triton", "triton_kernel")


def tuning_shape(ctx: RuleContext) -> dict | None:
    """E, N, dtype and device for the tuning run: from the warning when there is one
    (it names exactly the file the engine looked for), else from the model and TP."""
    sig = ctx.signals.get("moe-default-config")
    m = ctx.model
    shape: dict = {}
    if sig and sig.data.get("E") and sig.data.get("N"):
        shape.update(E=int(sig.data["E"]), N=int(sig.data["N"]), dtype=sig.data.get("dtype"),
                     device=sig.data.get("device_name"), block_shape=sig.data.get("block_shape"),
                     path=sig.data.get("path"), from_log=True)
    elif m and m.is_moe and m.experts and m.expert_intermediate_size:
        tp, ep = ctx.tp(), int(ctx.arg("ep") or 1) if ctx.engine == "sglang" else 1
        fused = (ctx.engine == "sglang" and m.architecture in FUSED_SHARED_EXPERT_ARCHS and m.shared_experts == 1
                 and m.experts in (256, 384) and ep <= 1)
        shape.update(E=m.experts // ep + (1 if fused else 0), N=m.expert_intermediate_size * ep // tp,
                     dtype={"fp8": "fp8_w8a8", "int8": "int8_w8a8"}.get(m.quantization or ""),
                     block_shape=(m.quant_details or {}).get("weight_block_size"), from_log=False, fused=fused)
    else:
        return None
    if not shape.get("from_log") and m.quantization == "fp8" and not m.quant_details:
        shape["block_unknown"] = True  # the format is known by the model's name only, not its block size
    if not shape.get("device") and ctx.hw:
        shape["device"] = ("NVIDIA " + ctx.hw.gpu if not ctx.hw.gpu.upper().startswith(("NVIDIA", "AMD"))
                           else ctx.hw.gpu).replace(" ", "_")
    return shape


def config_file_name(shape: dict) -> str:
    """The file the engine looks for; with the GPU or the FP8 block size unknown, the
    pattern every such file matches (the tuning script fills them in from where it runs)."""
    if not shape.get("device") or shape.get("block_unknown"):
        return f"E={shape['E']},N={shape['N']},*.json"
    name = f"E={shape['E']},N={shape['N']},device_name={shape['device']}"
    if shape.get("dtype"):
        name += f",dtype={shape['dtype']}"
    if shape.get("block_shape"):
        bs = shape["block_shape"]
        name += f",block_shape={bs}" if isinstance(bs, str) else f",block_shape=[{bs[0]}, {bs[1]}]"
    return name + ".json"


def tuning_commands(ctx: RuleContext, shape: dict) -> list[str]:
    model = launchcmd.known_model(ctx.ev) or launchcmd.MODEL
    tp = ctx.tp()
    fname = config_file_name(shape)
    dtype = shape.get("dtype") if shape.get("dtype") in ("fp8_w8a8", "int8_w8a8", "int8_w8a16") else "auto"
    if ctx.engine == "sglang":
        version = ctx.ev.engine_version or ctx.catalog.version
        tune = ["python", "benchmark/kernels/fused_moe_triton/tuning_fused_moe_triton.py", "--model", model,
                "--tp-size", str(tp)]
        ep = int(ctx.arg("ep") or 1)
        if ep > 1:  # the expert shard differs under EP: tune for the layout that runs
            tune += ["--ep-size", str(ep)]
        tune += ["--dtype", dtype, "--tune"]
        if shape.get("path"):
            dest = shape["path"].rsplit("/", 1)[0] + "/"
            copy = f"cp {_quote(fname)} {shlex.quote(dest)}"
        else:
            copy = ("cp " + _quote(fname) + ' "$(python -c \'import os, sglang, triton; '
                    'print(os.path.join(os.path.dirname(sglang.__file__), '
                    '"srt/layers/moe/moe_runner/triton_utils/configs", '
                    '"triton_" + triton.__version__.replace(".", "_")))\')"/')
        return [f"git clone --depth 1 --branch v{version} https://github.com/sgl-project/sglang.git sglang-src && cd "
                "sglang-src",
                shlex.join(tune) + f"  # writes {fname}", copy]
    save = "moe_configs"
    tune = ["python", "benchmarks/kernels/benchmark_moe.py", "--model", model, "--tp-size", str(tp), "--dtype", dtype,
            "--tune", "--save-dir", save]
    return [shlex.join(tune) + f"  # writes {save}/{fname}", f"export VLLM_TUNED_CONFIG_FOLDER=\"$PWD/{save}\""]


@cache
def shipped_lists() -> dict[str, tuple[str, ...]]:
    """{vLLM version: shipped config names}, from kb/data/moe_configs/vllm-*.txt."""
    return {p.stem.split("-", 1)[1]: tuple(p.read_text().split()) for p in sorted(SHIPPED_DIR.glob("vllm-*.txt"))}


def shipped_for(shape: dict, gpu: str) -> tuple[str, list[str]] | None:
    """(vLLM version, its shipped configs for this E and N on this GPU model), from the
    newest list kb has; None without a list. The GPU matches a device name's model part
    (`H100` matches NVIDIA_H100_80GB_HBM3, not H100's neighbours; `H20` is not H200)."""
    lists = shipped_lists()
    if not lists:
        return None
    version = max(lists, key=version_key)
    dev = re.compile(r"device_name=(?:NVIDIA_|AMD_)?" + re.escape(gpu.replace(" ", "_")) + r"(?![0-9A-Za-z])", re.I)
    head = f"E={shape['E']},N={shape['N']},"

    def same_format(name: str) -> bool:  # a bf16 model does not use an fp8 config, nor the reverse
        dtype = re.search(r",dtype=([^,]+)", name)
        return (dtype.group(1) if dtype else None) == shape.get("dtype")

    return version, [n for n in lists[version] if n.startswith(head) and dev.search(n) and same_format(n)]


def _quote(fname: str) -> str:
    """A file name for the shell; a pattern's `*` stays unquoted so the shell expands it."""
    return shlex.quote(fname) if "*" not in fname else "'" + fname[:-len("*.json")] + "'*.json"


def check(ctx: RuleContext) -> Proposal | None:
    sig = ctx.signals.get("moe-default-config")
    plateau = ctx.signals.get("throughput-plateau")
    unlogged = not ctx.ev.traces and ctx.model is not None and ctx.model.is_moe
    if not sig and not (plateau and ctx.model and ctx.model.is_moe) and not unlogged:
        return None
    shape = tuning_shape(ctx)
    if not shape:
        return None
    backend = ctx.arg("moe_runner_backend")
    red_herring = backend not in TRITON_BACKENDS
    notes = []
    if not shape.get("from_log"):
        notes.append(f"E={shape['E']} ({ctx.model.experts} routed experts"
                     + (" + 1 fused shared expert" if shape.get("fused") else "") + f"), N={shape['N']} "
                     f"(expert intermediate size {ctx.model.expert_intermediate_size} / TP {ctx.tp()})")
    if red_herring:
        notes.append(f"the server runs MoE on `{backend}`, not Triton: the Triton config is off the hot path")
    if unlogged and not sig and not plateau:
        notes.append("no server log was given: look for `Using default MoE kernel config` in it; tune only if it is "
                     "there")
        known = shipped_for(shape, ctx.hw.gpu) if ctx.engine == "vllm" and ctx.hw and not red_herring else None
        if known:
            version, names = known
            if names and ctx.ev.engine_version and version_key(ctx.ev.engine_version) >= version_key(version):
                return None  # this version ships a tuned config for the shape: nothing to check
            notes.append(f"vLLM {version} ships a tuned config for this shape on {ctx.hw.gpu} ({names[0]}.json): "
                         "an older version may lack it: its log says whether the kernel found one"
                         if names else
                         f"vLLM {version} ships no tuned config for E={shape['E']}, N={shape['N']} on {ctx.hw.gpu} "
                         "(kb's list of its fused_moe/configs): neither it nor an older version has one")
    return Proposal(
        title=("Default-MoE-config warning is a red herring here" if red_herring
               else f"Tune the fused-MoE kernel for E={shape['E']}, N={shape['N']} on this GPU" if sig or plateau
               else f"Check for a tuned fused-MoE config (E={shape['E']}, N={shape['N']}) on this GPU"),
        severity="low" if red_herring or not (sig or plateau) else ("severe" if sig and plateau else "moderate"),
        rationale=(f"no tuned config {config_file_name(shape)} exists, so the MoE layers run default tiles"
                   if not red_herring and (sig or plateau) else
                   f"unless a tuned config {config_file_name(shape)} ships for this GPU, the MoE layers run default "
                   "tiles" if not red_herring else "the warning concerns a kernel this server does not use"),
        commands=[] if red_herring else tuning_commands(ctx, shape),
        evidence=(sig.evidence if sig else []) + (plateau.evidence[-2:] if plateau else []),
        # a reminder (no warning, no plateau) is supported by nothing this run showed: an
        # unrelated symptom (slow single-stream decode) must not raise its confidence
        supporting=[s for s in ("moe-default-config", "throughput-plateau", "low-single-stream-decode")
                    if s in ctx.signals] if sig or plateau else [],
        reminder=not sig and not plateau,
        notes=notes)


RULE = Rule(id="KB105", name="moe-kernel-config", title="Untuned fused-MoE kernel config",
            fix_class="moe-kernel-config",
            signals=("moe-default-config", "throughput-plateau", "low-single-stream-decode"),
            needs=("server-log|model-config",), severity="severe",
            reads="the default-MoE-config warning, or a MoE model profile (experts, expert intermediate size) and TP",
            example=("`Using default MoE config. ... Config file not found at "
                     ".../E=256,N=128,device_name=NVIDIA_H800,dtype=fp8_w8a8...` → the tuning_fused_moe_triton.py "
                     "command for E=256, N=128 and where to put its file (tests/rules/KB105/fires)"),
            check=check, doc=__doc__)
