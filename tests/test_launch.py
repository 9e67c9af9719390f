"""`kb launch`: commands that start the first time, flags valid for their version,
memory arithmetic that never exceeds the GPUs."""

import json
import shlex

import pytest
from conftest import DATA
from hypothesis import given, settings, strategies as st

from kb.flags import catalog
from kb.launch import DoesNotFit, plan
from kb.records import ModelProfile

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


# ---------------------------------------------------------------- compressed-tensors weights


QUANT_BLOCKS = DATA / "quant_blocks"


def test_kimi_k25_int4_experts_are_sized_from_config_groups(kb):
    # text_config.quantization_config: int4 group-32 routed experts; attention, shared experts,
    # dense MLP and lm_head ignored (16-bit). The published checkpoint is about 595 GB.
    from ingest.hf_config import load_profile
    from kb.sizing import weight_bytes

    p = load_profile(CFG / "p3_moonshotai--Kimi-K2.5_config.json")
    assert p.quantization == "compressed-tensors" and p.quant_details["groups"][0]["bits"] == 4
    assert 585e9 < weight_bytes(p) < 600e9
    out = launch(kb, "p3_moonshotai--Kimi-K2.5_config.json", "moonshotai/Kimi-K2.5", "8x H200", "sglang")
    check_valid(out)
    assert out["memory"]["weights_total_gib"] < 560 and out["memory"]["kv_tokens"] > 0


@pytest.mark.parametrize("block,linear_bytes,lm_head_bytes", [
    ("nm-testing--DeepSeek-Coder-V2-Lite-Instruct-W8A8", 1.03, 2.0),   # int8 per channel, lm_head ignored
    ("nm-testing--Phi-3-mini-128k-instruct-FP8", 1.03, 2.0),           # FP8 per tensor, lm_head ignored
    ("BrainForge--Devstral-2-123B-Instruct-2512-NVFP4", 0.5625, 0.5625),  # FP4 + FP8 scale per 16, nothing ignored
])
def test_compressed_tensors_forms(block, linear_bytes, lm_head_bytes):
    # a real published quantization block on a real model's shapes (Llama-3.1-70B's config.json)
    from ingest.hf_config import profile_from_config
    from kb.sizing import weight_bytes

    cfg = json.loads((CFG / "p3_llama-3.1-70b-instruct.config.json").read_text())
    cfg["quantization_config"] = json.loads((QUANT_BLOCKS / f"{block}.quantization_config.json").read_text())
    p = profile_from_config(cfg)
    g = p.param_groups_b
    expected = (g["attention"] + g["dense_mlp"]) * linear_bytes + g["lm_head"] * lm_head_bytes + g["embed"] * 2.0
    assert weight_bytes(p) == pytest.approx(expected * 1e9, rel=1e-6)
    assert weight_bytes(p) < 0.6 * p.params_b * 2e9  # far below the 16-bit size


GIB = 2**30


@pytest.mark.parametrize("config,published_gib", [
    # OpenAI's gpt-oss model card (arXiv 2508.10925, Table 1) lists the checkpoint sizes:
    # gpt-oss-120b 60.8 GiB, gpt-oss-20b 12.8 GiB (MXFP4 experts, the rest BF16).
    ("p3_gpt-oss-120b.config.json", 60.8),
    ("kn_openai--gpt-oss-20b_config.json", 12.8),
])
def test_mxfp4_checkpoint_size_matches_the_published_one(config, published_gib):
    # `quant_method: mxfp4` (the native form; no compressed-tensors MXFP4 checkpoint with a
    # published size was found): experts at 4 bits + one E8M0 scale per 32, the rest 16-bit.
    from ingest.hf_config import load_profile
    from kb.sizing import weight_bytes

    p = load_profile(CFG / config)
    assert p.quantization == "mxfp4"
    assert weight_bytes(p) / GIB == pytest.approx(published_gib, rel=0.02)  # within 2%
    assert weight_bytes(p) < 0.4 * p.params_b * 2e9  # far below the 16-bit size


def test_kimi_k3_mxfp4_compressed_tensors_block_on_kimi_shapes():
    # moonshotai/Kimi-K3's real compressed-tensors block (mxfp4-pack-quantized: FP4 values,
    # one 8-bit scale per 32, targets Linear; ignores attention, shared experts, the dense MLP,
    # lm_head, vision) on Kimi-K2.5's shapes, which use the same module names. Kimi-K3's own
    # shapes (LatentMoE) are not modelled by kb, so its total is not checked here.
    from ingest.hf_config import profile_from_config
    from kb.sizing import expert_weight_bytes, weight_bytes

    cfg = json.loads((CFG / "p3_moonshotai--Kimi-K2.5_config.json").read_text())
    cfg["text_config"]["quantization_config"] = json.loads(
        (QUANT_BLOCKS / "moonshotai--Kimi-K3.quantization_config.json").read_text())
    p = profile_from_config(cfg)
    assert p.quant_details["scheme"] == "mxfp4" and p.quant_details["groups"][0]["group_size"] == 32
    g = p.param_groups_b
    experts = g["experts"] * (0.5 + 1 / 32)  # 4.25 bits per weight
    rest = sum(v for k, v in g.items() if k not in ("experts", "experts_active")) * 2.0
    assert weight_bytes(p) == pytest.approx((experts + rest) * 1e9, rel=1e-6)
    assert expert_weight_bytes(p) == pytest.approx(experts * 1e9, rel=1e-6)


def test_fp8_block_compressed_tensors_deepseek_v4_is_sized_per_group():
    # RedHatAI/DeepSeek-V4-Flash-NVFP4-FP8's real config.json: compressed-tensors "mixed-precision",
    # attention FP8 `strategy: block` [128, 128] (targets `re:.*attn.*(fused_wqa_wkv|wq_b|wo_a|wo_b)$`),
    # FFN experts NVFP4 (`re:.*ffn.*(gate|up|down)_proj$`). DeepSeek-V4 names its modules attn/ffn;
    # before kb knew those names every group missed and the model was sized as 16-bit (581.9 GB).
    from ingest.hf_config import load_profile
    from kb import quantsize
    from kb.sizing import weight_bytes

    p = load_profile(CFG / "kn_RedHatAI--DeepSeek-V4-Flash-NVFP4-FP8_config.json")
    groups, ignore = p.quant_details["groups"], p.quant_details["ignore"]
    att, exp = quantsize.scheme_for("attention", groups, ignore), quantsize.scheme_for("experts", groups, ignore)
    assert (att["bits"], att["type"], att["strategy"]) == (8, "float", "block")
    assert (exp["bits"], exp["type"], exp["group_size"]) == (4, "float", 16)
    g = p.param_groups_b
    expected = (g["attention"] * 1.03 + (g["experts"] + g["shared_experts"]) * 0.5625
                + (g["embed"] + g["lm_head"] + g["router"] + g["dense_mlp"]) * 2.0)
    assert weight_bytes(p) == pytest.approx(expected * 1e9, rel=1e-6)
    # No size of RedHat's own upload was found. canada-quant/DeepSeek-V4-Flash-NVFP4-FP8-MTP, "same
    # quantization scheme as RedHatAI/DeepSeek-V4-Flash-NVFP4-FP8" plus an MTP block kept in BF16
    # that RedHat's lacks, states "172 GB across 35 safetensors shards": an upper bound.
    assert 0.85 * 172e9 < weight_bytes(p) < 172e9


# ---------------------------------------------------------------- refusals and workload sizing


def test_refusal_says_what_would_fit(kb):
    proc = kb("launch", "--model", CFG / "p3_Qwen--Qwen3-30B-A3B_config.json", "--gpus", "1x L40", "--engine", "vllm")
    assert proc.returncode == 1 and not proc.stdout
    err = proc.stderr
    assert "does not fit on 1x L40" in err and "what would fit:" in err
    assert "2x L40: TP2" in err and "the FP8 checkpoint of the same model" in err and "4-bit checkpoint" in err
    import re
    kv = [int(x.replace(",", "")) for x in re.findall(r"KV ([\d,]+) tokens", err)]
    assert len(kv) >= 3 and all(k >= 32768 for k in kv)  # every alternative holds a full-context request


def test_glm5_running_cap_is_sized_for_the_workload_not_half_the_context(kb):
    out = launch(kb, "p3_nvidia--GLM-5-NVFP4_config.json", "nvidia/GLM-5-NVFP4", "8x RTX PRO 6000", "sglang")
    m, f = out["memory"], flags(out)
    held = m["kv_tokens"] // 2048  # the assumed 1,024:1,024 workload
    assert m["workload_requests"] == held and f["--max-running-requests"] == min(held, 512)
    assert f["--max-running-requests"] >= 256  # the story benchmarks at 128-256 concurrency
    assert f["--cuda-graph-max-bs-decode"] >= f["--max-running-requests"]
    assert out["workload"]["input_len"] == 1024 and "assumed" in out["workload"]["source"]
    assert any(line.startswith("running cap: min(") for line in out["sizing"])


def test_asked_load_and_lengths_drive_the_flags(kb):
    out = launch(kb, "p3_llama-3.1-70b-instruct.config.json", "meta-llama/Llama-3.1-70B-Instruct", "4x H100", "vllm",
                 "--workload", "20000:500", "--concurrency", "16")
    f = flags(out)
    assert f["--max-num-seqs"] == 16 and f["--max-cudagraph-capture-size"] == 16
    assert f["--max-num-batched-tokens"] == 32768  # one 20,000-token prompt per step, rounded to a power of two


def test_load_that_cannot_be_held_says_what_would(kb):
    out = launch(kb, "p3_deepseek-v3.config.json", "deepseek-ai/DeepSeek-V3", "8x H200", "sglang",
                 "--workload", "4000:1000", "--concurrency", "2000")
    f = flags(out)
    assert f["--max-running-requests"] == out["memory"]["workload_requests"] < 2000
    note = next(n for n in out["notes"] if "fewer than the 2,000 asked" in n)
    assert "what would hold them" in note


def test_workload_read_from_a_benchmark_file(kb):
    bench = DATA / "samples" / "sglang_bench_text" / "run-sglang-0.5.5_random_c128.txt"
    out = launch(kb, "p3_llama-3.1-70b-instruct.config.json", "m", "4x H100", "sglang", "--workload", str(bench))
    assert "read from" in out["workload"]["source"] and out["workload"]["concurrency"] == 128


def test_bad_workload_is_one_line_usage_error(kb):
    proc = kb("launch", "--model", CFG / "p3_llama-3.1-70b-instruct.config.json", "--gpus", "4x H100", "--engine",
              "vllm", "--workload", "lots")
    assert proc.returncode == 2 and "expected INPUT:OUTPUT" in proc.stderr and "Traceback" not in proc.stderr


CONFIGS = sorted(p.name for p in CFG.glob("*config.json") if not p.name.endswith("hf_quant_config.json"))


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("config", CONFIGS)
def test_diagnose_does_not_undo_what_launch_chose(config, engine, shipped_records):
    # kb diagnose on kb launch's own command (no other evidence) must not change a value launch set.
    # In-process (the calls the CLI makes): 2 × configs × 2 commands as subprocesses cost a minute.
    from ingest.hf_config import load_profile
    from ingest.nvidia_smi import hardware_from_string
    from ingest.run import read_run
    from kb.diagnose import diagnose

    gpus = "8x B200"
    hw, _ = hardware_from_string(gpus)
    p = plan(load_profile(CFG / config), hw, engine, catalog(engine), "org/model")
    chosen = {f.flag: f.value for f in p.flags}
    ev = read_run([CFG / config], gpu=gpus, engine=engine, launch=p.command)
    d = diagnose(ev, shipped_records[0])  # the shipped findings, indexed once (tests/conftest.py)
    for rec in d.recommendations:
        for c in rec.flags:
            if c.flag in chosen and c.new is not None:
                assert str(c.new) == str(chosen[c.flag]), (rec.title, c, chosen[c.flag])

