"""`kb launch`: commands that start the first time, flags valid for their version,
memory arithmetic that never exceeds the GPUs."""

import json
import shlex

import pytest
from hypothesis import given, settings, strategies as st

from conftest import DATA
from kb.flags import catalog
from kb.launch import DoesNotFit, plan
from kb.records import Hardware, ModelProfile

CFG = DATA / "samples" / "model_configs"


def launch(kb, config, path, gpus, engine, *extra):
    return kb("launch", "--model", CFG / config, "--model-path", path, "--gpus", gpus, "--engine", engine,
              "--json", *extra, check_json=True)


def check_valid(out):
    cat = catalog(out["engine"], out["version"])
    argv = shlex.split(out["command"])
    assert argv == out["argv"]
    for word in argv:
        if word.startswith("--"):
            assert cat.check(word) is None, word
    for f in out["flags"]:
        assert f["why"] and f["source"]
        assert cat.check(f["flag"], f["value"]) is None


def flags(out):
    return {f["flag"]: f["value"] for f in out["flags"]}


def test_glm5_nvfp4_on_rtx_pro_6000_sglang(kb):
    out = launch(kb, "p3_nvidia--GLM-5-NVFP4_config.json", "lukealonso/GLM-5-NVFP4", "8x RTX PRO 6000", "sglang",
                 "--version", "0.5.8")
    check_valid(out)
    f = flags(out)
    assert f["--moe-runner-backend"] == "flashinfer_cutlass" and f["--quantization"] == "modelopt_fp4"
    assert (f["--tp-size"], f["--pp-size"]) == (4, 2)  # PCIe box: TP inside a NUMA half, PP across
    assert f["--cuda-graph-max-bs"] >= f["--max-running-requests"]
    m = out["memory"]
    assert m["weights_per_gpu_gib"] + m["kv_per_gpu_gib"] <= m["usable_per_gpu_gib"] + 1e-6
    assert m["max_running"] == f["--max-running-requests"] and m["full_context_requests"] >= 1


def test_deepseek_v3_on_8x_h200_sglang_uses_dp_attention(kb):
    out = launch(kb, "p3_deepseek-v3.config.json", "deepseek-ai/DeepSeek-V3", "8x H200", "sglang")
    check_valid(out)
    f = flags(out)
    assert f["--tp-size"] == 8 and f.get("--enable-dp-attention") is True
    assert "--moe-runner-backend" not in f  # Hopper: the default runner


@pytest.mark.parametrize("config,path,gpus", [
    ("p3_Qwen--Qwen3-30B-A3B-FP8_config.json", "Qwen/Qwen3-30B-A3B-FP8", "1x L40"),
    ("p3_llama-3.1-70b-instruct.config.json", "meta-llama/Llama-3.1-70B-Instruct", "4x H100"),
])
def test_vllm_commands(kb, config, path, gpus):
    out = launch(kb, config, path, gpus, "vllm")
    check_valid(out)
    f = flags(out)
    assert out["argv"][:3] == ["vllm", "serve", path]
    assert f["--max-cudagraph-capture-size"] >= f["--max-num-seqs"]


def test_model_that_cannot_fit_is_refused_with_numbers(kb):
    proc = kb("launch", "--model", CFG / "p3_deepseek-v3.config.json", "--gpus", "2x RTX 5090", "--engine", "sglang")
    assert proc.returncode == 1 and not proc.stdout
    assert "does not fit on 2x RTX 5090" in proc.stderr and "GiB" in proc.stderr
    proc = kb("launch", "--model", CFG / "p3_Qwen--Qwen3-30B-A3B_config.json", "--gpus", "1x L40", "--engine", "vllm")
    assert proc.returncode == 1 and "does not fit" in proc.stderr  # BF16 weights alone exceed 48 GB


def test_unknown_version_falls_back_and_says_so(kb):
    out = launch(kb, "p3_llama-3.1-70b-instruct.config.json", "m", "4x H100", "vllm", "--version", "0.12.5")
    assert out["version"] == "0.11.0" and "nearest" in out["catalog_note"]
    check_valid(out)


def test_hostile_model_path_stays_literal(kb):
    hostile = "models/x; rm -rf ~ $(touch /tmp/pwned) `id`\nnext"
    out = launch(kb, "p3_llama-3.1-70b-instruct.config.json", hostile, "4x H100", "vllm")
    assert shlex.split(out["command"])[2] == hostile


# ---------------------------------------------------------------- property


shapes = st.fixed_dictionaries({
    "layers": st.integers(2, 128), "hidden": st.sampled_from([1024, 2048, 4096, 5120, 7168, 8192]),
    "heads": st.sampled_from([8, 16, 32, 64, 128]), "kv_div": st.sampled_from([1, 2, 4, 8]),
    "moe": st.booleans(), "experts": st.sampled_from([8, 64, 128, 256, 384]),
    "inter": st.sampled_from([512, 1024, 2048, 8192, 14336]), "mla": st.booleans(),
    "quant": st.sampled_from(["bf16", "fp8", "nvfp4", "mxfp4", "awq"]),
})


def profile(s) -> ModelProfile:
    h, heads = s["hidden"], s["heads"]
    attn_params = s["layers"] * 4 * h * h
    experts = s["layers"] * s["experts"] * 3 * h * s["inter"] if s["moe"] else 0
    dense_mlp = 0 if s["moe"] else s["layers"] * 3 * h * s["inter"]
    params = (attn_params + experts + dense_mlp + 2 * 32000 * h) / 1e9
    mla = s["mla"] and s["moe"]
    return ModelProfile(name="m", is_moe=s["moe"], experts=s["experts"] if s["moe"] else None, experts_per_token=8,
                        expert_intermediate_size=s["inter"] if s["moe"] else None, dense_layers=0,
                        attention="MLA" if mla else "GQA", layers=s["layers"], heads=heads,
                        kv_heads=max(1, heads // s["kv_div"]), head_dim=h // heads, hidden_size=h, vocab_size=32000,
                        context_len=32768, kv_lora_rank=512 if mla else None, qk_rope_head_dim=64 if mla else None,
                        quantization=s["quant"], params_b=params)


@settings(max_examples=300, deadline=None)
@given(shapes, st.sampled_from(["H100", "H200", "B200", "RTX PRO 6000", "RTX 5090", "L40", "A100", "MI300X"]),
       st.sampled_from([1, 2, 4, 8]), st.sampled_from(["sglang", "vllm"]), st.sampled_from(["throughput", "latency"]),
       st.sampled_from([2048, 8192, 32768]))
def test_memory_never_exceeds_the_gpus(s, gpu, count, engine, goal, context):
    from ingest.nvidia_smi import hardware_from_string

    hw, _ = hardware_from_string(f"{count}x {gpu}")
    m = profile(s)
    try:
        p = plan(m, hw, engine, catalog(engine), "m", context, goal)
    except DoesNotFit:
        return
    mem = p.memory
    # independent recomputation: weights + KV pool within the fraction of each GPU
    gib = 2**30
    kv_pool = mem.kv_tokens / (mem.tp if mem.dp_attention else 1) * mem.kv_bytes_per_token_per_gpu / gib
    assert mem.weights_per_gpu_gib + kv_pool <= hw.memory_gb * mem.fraction + 1e-6
    assert mem.tp * mem.pp * max(1, mem.dp if not mem.dp_attention else 1) <= hw.count
    assert mem.kv_tokens >= context and mem.max_running >= 1
