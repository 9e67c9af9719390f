"""Bytes per weight of a compressed-tensors checkpoint, module kind by module kind.

compressed-tensors (llm-compressor's format, read by vLLM and sglang) describes its
quantization as `config_groups`: each group says which modules it `targets` (a class
name such as `Linear`, a module name, or `re:` + a regular expression) and how their
weights are stored (`num_bits`, `type` int/float, `strategy` tensor/channel/group/
tensor_group/block, `group_size`); `ignore` lists modules left in 16 bits. Kimi-K2.5,
for example, packs only the routed experts to int4 (group 32) and ignores attention,
shared experts, the dense MLP and lm_head — sizing it as 16-bit overstates it 3×.
Format reference: https://github.com/neuralmagic/compressed-tensors (QuantizationArgs,
QuantizationScheme) and vLLM's compressed_tensors.py (how targets/ignore are matched).
"""

from __future__ import annotations

import re

# One representative module name per kind, in Hugging Face's naming (DeepSeek/Qwen/Llama
# style), against which targets and ignore patterns are matched.
# DeepSeek-V4 checkpoints name them `layers.N.attn.wq_b` / `layers.N.ffn.experts.M.gate_proj`
# (sglang's deepseek_v4.py maps ".attn." and ".ffn." onto self_attn/mlp when loading).
MODULES = {
    "attention": ["model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.q_a_proj",
                  "model.layers.1.self_attn.o_proj", "model.layers.1.attn.wq_b", "model.layers.1.attn.wo_a"],
    "dense_mlp": ["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.down_proj"],
    "experts": ["model.layers.1.mlp.experts.0.gate_proj", "model.layers.1.mlp.experts.0.down_proj",
                "model.layers.1.ffn.experts.0.gate_proj"],
    "shared_experts": ["model.layers.1.mlp.shared_experts.gate_proj", "model.layers.1.mlp.shared_expert.gate_proj",
                       "model.layers.1.ffn.shared_experts.gate_proj"],
    "lm_head": ["lm_head"],
}
LINEAR = {"Linear", "nn.Linear", "torch.nn.Linear"}
SCALE_BITS = {"int": 16, "float": 8}  # int groups keep a 16-bit scale; FP4 groups an FP8 (NVFP4) or E8M0 (MXFP4) one
CONSERVATIVE = 1.03  # per-channel/tensor/block scales and packing slack, as kb's FP8 figure


def _matches(pattern: str, names: list[str]) -> bool:
    if pattern.startswith("re:"):
        try:
            rx = re.compile(pattern[3:])
        except re.error:
            return False
        return any(rx.match(n) for n in names)
    return pattern in LINEAR or any(n == pattern or n.endswith("." + pattern) for n in names)


def bytes_per_param(group: dict) -> float:
    """Storage per weight: the packed bits plus, for grouped strategies, one scale per group."""
    bits = group["bits"] / 8
    size = group.get("group_size")
    if group.get("strategy") in ("group", "tensor_group") and size:
        scale = SCALE_BITS.get(group.get("type"), 16) / 8
        zero = 0 if group.get("symmetric", True) else group["bits"] / 8
        return bits + (scale + zero) / size
    return bits * CONSERVATIVE


def scheme_for(kind: str, groups: list[dict], ignore: list[str]) -> dict | None:
    """The config group that stores this kind of module, or None (16-bit)."""
    names = MODULES[kind]
    if any(_matches(p, names) for p in ignore):
        return None
    for g in groups:
        if any(_matches(t, names) for t in g.get("targets") or []):
            return g
    return None


def compressed_tensors_bytes(params_b: dict[str, float], groups: list[dict], ignore: list[str]) -> float:
    """Total weight bytes: quantized kinds at their group's size, the rest (embeddings,
    router, ignored modules) at 16 bits."""
    total = 0.0
    for kind, billions in params_b.items():
        if kind == "experts_active":
            continue
        g = scheme_for(kind, groups, ignore) if kind in MODULES else None
        total += billions * 1e9 * (bytes_per_param(g) if g else 2.0)
    return total
