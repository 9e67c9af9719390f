"""ingest/hf_config.py against real config.json files (tests/data/samples/model_configs,
sources in SOURCES-p3.md) and fake hub-cache / flat layouts built in tmp_path."""

import json
import shutil

import pytest
from conftest import DATA

from ingest.hf_config import HfConfigReader, detect_quantization, load_profile, locate_config, profile_from_config
from kb.errors import InputError, NotFoundError
from kb.records import ModelProfile

SAMPLES = DATA / "samples" / "model_configs"
CONFIGS = sorted(p for p in SAMPLES.glob("*config.json") if not p.name.endswith("hf_quant_config.json"))


def sample(name: str) -> ModelProfile:
    return load_profile(SAMPLES / name)


def near(value, published, tol=0.05):
    return value is not None and abs(value - published) <= tol * published


@pytest.fixture(autouse=True)
def _no_real_hub_cache(tmp_path, monkeypatch):
    """Never look at the developer's own ~/.cache/huggingface."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)


# ------------------------------------------------------------ every sample file


def test_samples_are_present():
    assert len(CONFIGS) >= 15


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_sample_config_gives_a_consistent_profile(path):
    p = load_profile(path)
    assert p.layers and p.hidden_size and p.heads and p.vocab_size and p.context_len
    assert p.attention in ("MHA", "GQA", "MQA", "MLA")
    assert p.quantization and p.family and p.architecture
    assert 0 < p.active_params_b <= p.params_b
    if p.is_moe:
        assert p.experts > p.experts_per_token >= 1
        assert p.expert_intermediate_size and p.dense_layers is not None
        assert p.active_params_b < p.params_b / 2
    if p.attention == "MLA":
        assert p.kv_lora_rank and p.qk_rope_head_dim
    assert ModelProfile.model_validate_json(p.model_dump_json()) == p


# ------------------------------------------------- per model, against published


@pytest.mark.parametrize("name,total,active", [
    ("p3_deepseek-v3.config.json", 671, 37),
    ("p3_nvidia--DeepSeek-V3.1-NVFP4_config.json", 671, 37),
    ("p3_Qwen--Qwen3-235B-A22B_config.json", 235, 22),
    ("p3_Qwen--Qwen3-VL-235B-A22B-Instruct_config.json", 235, 22),  # language model only
    ("p3_mistralai--Mixtral-8x7B-v0.1_config.json", 46.7, 12.9),
    ("p3_llama-3.1-70b-instruct.config.json", 70.6, None),
    ("p3_gpt-oss-120b.config.json", 117, 5.1),
    ("kn_openai--gpt-oss-20b_config.json", 20.91, 3.61),  # model card: 20.91B total, 3.61B active
    ("p3_moonshotai--Kimi-K2-Instruct_config.json", 1040, 32),
    ("p3_glm-4.7-fp8.config.json", 355, 32),  # GLM-4.7 has GLM-4.5's shape (355B-A32B)
    ("p3_nvidia--GLM-5-NVFP4_config.json", 744, 40),
    ("p3_meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json", 109, None),
])
def test_parameter_estimates_match_published_sizes(name, total, active):
    p = sample(name)
    assert near(p.params_b, total), p.params_b
    if active:
        assert near(p.active_params_b, active), p.active_params_b


def test_qwen3_30b_a3b_active_count_excludes_the_input_embedding():
    # Qwen publishes 30.5B total / 3.3B activated, the latter counting the 0.31B
    # embedding table; kb's active figure leaves the table out (as DeepSeek and OpenAI do).
    p = sample("p3_Qwen--Qwen3-30B-A3B_config.json")
    assert near(p.params_b, 30.5)
    embedding = p.vocab_size * p.hidden_size / 1e9
    assert near(p.active_params_b + embedding, 3.3)
    assert (p.experts, p.experts_per_token, p.expert_intermediate_size) == (128, 8, 768)
    assert (p.attention, p.heads, p.kv_heads, p.head_dim) == ("GQA", 32, 4, 128)
    assert p.shared_experts == 0 and p.dense_layers == 0 and p.quantization == "bf16"


def test_deepseek_v3_mla_moe_fp8_block():
    p = sample("p3_deepseek-v3.config.json")
    assert (p.experts, p.experts_per_token, p.expert_intermediate_size) == (256, 8, 2048)
    assert (p.shared_experts, p.dense_layers, p.layers) == (1, 3, 61)
    assert p.attention == "MLA" and p.kv_lora_rank == 512 and p.qk_rope_head_dim == 64
    assert p.qk_nope_head_dim == 128 and p.v_head_dim == 128 and p.head_dim == 192
    assert p.mtp_layers == 1 and p.context_len == 163840 and p.intermediate_size == 18432
    assert p.quantization == "fp8" and p.quant_details["weight_block_size"] == [128, 128]
    assert p.family == "deepseek" and p.architecture == "DeepseekV3ForCausalLM" and p.dtype == "bfloat16"


def test_kimi_k2_is_family_kimi_with_one_dense_layer():
    p = sample("p3_moonshotai--Kimi-K2-Instruct_config.json")
    assert (p.experts, p.experts_per_token, p.dense_layers, p.heads) == (384, 8, 1, 64)
    assert p.family == "kimi" and p.attention == "MLA" and p.quantization == "fp8"


def test_kimi_k25_language_model_under_text_config():
    p = sample("p3_moonshotai--Kimi-K2.5_config.json")
    assert p.architecture == "KimiK25ForConditionalGeneration" and p.model_type == "kimi_k25"
    assert (p.experts, p.experts_per_token, p.layers, p.attention) == (384, 8, 61, "MLA")
    assert p.context_len == 262144 and p.family == "kimi"
    # INT4 QAT weights: compressed-tensors, 4-bit int, groups of 32, inside text_config
    assert p.quantization == "compressed-tensors"
    assert p.quant_details["scheme"] == "w4a16" and p.quant_details["group_size"] == 32


def test_kimi_k25_nvfp4_modelopt_block_in_config_json():
    p = sample("p3_nvidia--Kimi-K2.5-NVFP4_config.json")
    assert p.quantization == "nvfp4" and p.family == "kimi"
    assert p.quant_details["method"] == "modelopt" and p.quant_details["group_size"] == 16
    assert p.quant_details["kv_cache"] == "FP8"


def test_glm5_nvfp4_from_hf_quant_config_beside_it():
    p = sample("p3_nvidia--GLM-5-NVFP4_config.json")
    assert p.model_type == "glm_moe_dsa" and p.family == "glm"
    assert (p.experts, p.experts_per_token, p.expert_intermediate_size) == (256, 8, 2048)
    assert (p.shared_experts, p.dense_layers, p.attention, p.mtp_layers) == (1, 3, "MLA", 1)
    assert p.quantization == "nvfp4"
    d = p.quant_details
    assert d["source"].endswith("hf_quant_config.json") and d["quant_algo"] == "NVFP4"
    assert d["group_size"] == 16 and d["kv_cache"] == "FP8" and d["excluded_modules"] > 0


def test_glm5_fp8_and_glm45_shape():
    assert sample("p3_zai-org--GLM-5-FP8_config.json").quantization == "fp8"
    p = sample("p3_glm-4.7-fp8.config.json")
    assert (p.experts, p.experts_per_token, p.expert_intermediate_size, p.dense_layers) == (160, 8, 1536, 3)
    assert (p.attention, p.heads, p.kv_heads) == ("GQA", 96, 8)


def test_mixtral_expert_size_is_intermediate_size():
    p = sample("p3_mistralai--Mixtral-8x7B-v0.1_config.json")
    assert (p.experts, p.experts_per_token, p.expert_intermediate_size, p.shared_experts) == (8, 2, 14336, 0)
    assert p.attention == "GQA" and p.family == "mixtral"


def test_gpt_oss_mxfp4_local_experts():
    p = sample("p3_gpt-oss-120b.config.json")
    assert (p.experts, p.experts_per_token, p.expert_intermediate_size) == (128, 4, 2880)
    assert p.quantization == "mxfp4" and p.family == "gpt-oss"
    assert (p.attention, p.heads, p.kv_heads, p.head_dim) == ("GQA", 64, 8, 64)
    assert p.context_len == 131072


def test_llama4_scout_shared_expert_and_text_config():
    p = sample("p3_meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json")
    assert (p.experts, p.experts_per_token, p.shared_experts) == (16, 1, 1)
    assert p.expert_intermediate_size == 8192 and p.intermediate_size == 16384
    assert p.family == "llama" and p.attention == "GQA"


def test_dense_llama_and_its_modelopt_fp8_copy():
    p = sample("p3_llama-3.1-70b-instruct.config.json")
    assert not p.is_moe and p.experts is None and p.attention == "GQA"
    assert p.quantization == "bf16" and p.context_len == 131072 and p.head_dim == 128
    q = sample("p3_nvidia--Llama-3.1-70B-Instruct-FP8_config.json")
    assert q.quantization == "fp8" and q.quant_details["method"] == "modelopt"
    assert q.quant_details["kv_cache"] == "FP8" and q.params_b == p.params_b


def test_gptq_llama2():
    p = sample("p3_llama-2-13b-chat-gptq.config.json")
    assert p.quantization == "gptq" and p.attention == "MHA" and p.dtype == "float16"
    assert p.quant_details["bits"] == 4 and p.quant_details["group_size"] == 128


def test_qwen_nvfp4_and_fp8_block_variants():
    assert sample("p3_nvidia--Qwen3-235B-A22B-NVFP4_config.json").quantization == "nvfp4"
    p = sample("p3_Qwen--Qwen3-30B-A3B-FP8_config.json")
    assert p.quantization == "fp8" and p.quant_details["weight_block_size"] == [128, 128]


def test_modelopt_mixed_precision_names_its_4bit_part():
    p = sample("p3_nvidia--Qwen3.6-35B-A3B-NVFP4_config.json")
    assert p.quantization == "nvfp4" and p.quant_details["quant_algo"] == "MIXED_PRECISION"
    assert "W4A16_NVFP4" in p.quant_details["layer_algos"]


# ------------------------------------------- formats documented but not sampled

LLAMA2 = json.loads((SAMPLES / "p3_llama-2-13b-chat-gptq.config.json").read_text())


def with_quant(block: dict) -> dict:
    return {**LLAMA2, "quantization_config": block}


def test_awq_block_as_transformers_documents_it():
    # the quantization_config of TheBloke/zephyr-7B-alpha-AWQ, quoted in the
    # transformers AWQ guide
    p = profile_from_config(with_quant({"quant_method": "awq", "zero_point": True, "group_size": 128,
                                        "bits": 4, "version": "gemm"}))
    assert p.quantization == "awq" and p.quant_details["version"] == "gemm"


def test_bitsandbytes_block():
    p = profile_from_config(with_quant({"quant_method": "bitsandbytes", "load_in_4bit": True,
                                        "bnb_4bit_quant_type": "nf4", "bnb_4bit_compute_dtype": "bfloat16"}))
    assert p.quantization == "bitsandbytes"
    assert p.quant_details["bits"] == 4 and p.quant_details["quant_type"] == "nf4"
    legacy = profile_from_config(with_quant({"load_in_8bit": True, "llm_int8_threshold": 6.0}))
    assert legacy.quantization == "bitsandbytes" and legacy.quant_details["bits"] == 8


def test_compressed_tensors_fp4_and_fp8_schemes():
    def ct(weights):
        return {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": weights}}}

    fp4 = profile_from_config(with_quant(ct({"num_bits": 4, "type": "float", "group_size": 16})))
    assert fp4.quant_details["scheme"] == "nvfp4"
    fp8 = profile_from_config(with_quant(ct({"num_bits": 8, "type": "float"})))
    assert fp8.quant_details["scheme"] == "fp8"


def test_old_gptq_quantize_config_json(tmp_path):
    cfg = {k: v for k, v in LLAMA2.items() if k != "quantization_config"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "quantize_config.json").write_text(json.dumps({"bits": 4, "group_size": 128, "desc_act": False}))
    p = load_profile(tmp_path)
    assert p.quantization == "gptq" and p.quant_details["source"] == "quantize_config.json"


def test_attention_kinds_and_context_from_rope_scaling():
    mqa = profile_from_config({**LLAMA2, "num_key_value_heads": 1})
    assert mqa.attention == "MQA"
    qwen = json.loads((SAMPLES / "p3_Qwen--Qwen3-30B-A3B_config.json").read_text())
    yarn = {**qwen, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    assert profile_from_config(yarn).context_len == 131072


def test_unquantized_reports_dtype():
    assert detect_quantization({}, None, "bfloat16") == ("bf16", {})
    assert detect_quantization({}, None, None) == (None, {})


# ------------------------------------------------------------- locating configs


def make_cache(root, repo_id, snapshots=("abc123",), main="abc123", files=("p3_deepseek-v3.config.json",)):
    """A hub-cache tree as huggingface_hub writes it: blobs are real files, but
    plain copies in the snapshot work the same for reading."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    for snap in snapshots:
        d = repo / "snapshots" / snap
        d.mkdir(parents=True)
        shutil.copy(SAMPLES / files[0], d / "config.json")
        if len(files) > 1:
            shutil.copy(SAMPLES / files[1], d / "hf_quant_config.json")
    if main:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(main)
    return repo


def test_repo_id_found_in_hf_hub_cache(tmp_path):
    make_cache(tmp_path / "hub", "nvidia/GLM-5-NVFP4",
               files=("p3_nvidia--GLM-5-NVFP4_config.json", "p3_nvidia--GLM-5-NVFP4_hf_quant_config.json"))
    path = locate_config("nvidia/GLM-5-NVFP4")
    assert path.parts[-3:] == ("snapshots", "abc123", "config.json")
    p = load_profile("nvidia/GLM-5-NVFP4")
    assert p.name == "nvidia/GLM-5-NVFP4" and p.quantization == "nvfp4"
    assert p.quant_details["source"] == "hf_quant_config.json"


def test_hf_home_is_searched_too(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    make_cache(tmp_path / "hfhome" / "hub", "deepseek-ai/DeepSeek-V3")
    assert load_profile("deepseek-ai/DeepSeek-V3").experts == 256


def test_refs_main_picks_the_snapshot(tmp_path):
    make_cache(tmp_path / "hub", "org/model", snapshots=("old111", "new222"), main="old111")
    assert locate_config("org/model").parent.name == "old111"


def test_without_refs_main_the_newest_snapshot(tmp_path):
    import os

    repo = make_cache(tmp_path / "hub", "org/model", snapshots=("aaa", "bbb"), main=None)
    os.utime(repo / "snapshots" / "aaa" / "config.json", (1, 1))
    assert locate_config("org/model").parent.name == "bbb"


def test_cache_repo_folder_and_snapshot_folder_given_directly(tmp_path):
    repo = make_cache(tmp_path / "elsewhere", "deepseek-ai/DeepSeek-V3")
    assert locate_config(repo).name == "config.json"
    assert load_profile(repo).name == "deepseek-ai/DeepSeek-V3"
    snap = repo / "snapshots" / "abc123"
    assert locate_config(snap) == snap / "config.json"


def test_flat_layout_directory_and_file(tmp_path):
    d = tmp_path / "models" / "GLM-5-NVFP4"
    d.mkdir(parents=True)
    shutil.copy(SAMPLES / "p3_nvidia--GLM-5-NVFP4_config.json", d / "config.json")
    shutil.copy(SAMPLES / "p3_nvidia--GLM-5-NVFP4_hf_quant_config.json", d / "hf_quant_config.json")
    for spec in (d, d / "config.json", str(d), tmp_path / "models"):  # the parent is searched below
        assert locate_config(spec) == d / "config.json"
    p = load_profile(d)
    assert p.name == "GLM-5-NVFP4" and p.quantization == "nvfp4" and p.experts == 256


def test_several_configs_below_a_directory_is_not_guessed(tmp_path):
    for name in ("a", "b"):
        (tmp_path / "models" / name).mkdir(parents=True)
        shutil.copy(SAMPLES / "p3_deepseek-v3.config.json", tmp_path / "models" / name / "config.json")
    with pytest.raises(NotFoundError, match="several config.json"):
        locate_config(tmp_path / "models")


def test_not_found_lists_every_place_looked(tmp_path):
    with pytest.raises(NotFoundError) as e:
        locate_config("nobody/nothing")
    msg = str(e.value)
    assert "nobody/nothing (no such file or directory)" in msg
    assert str(tmp_path / "hub" / "models--nobody--nothing") in msg
    assert str(tmp_path / "home" / ".cache" / "huggingface" / "hub" / "models--nobody--nothing") in msg
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NotFoundError, match="looked in: .*empty/config.json"):
        locate_config(empty)


def test_bad_json_is_an_input_error_with_line(tmp_path):
    (tmp_path / "config.json").write_text('{\n  "model_type": "llama",\n  oops\n}')
    with pytest.raises(InputError) as e:
        load_profile(tmp_path)
    assert e.value.line == 3


def test_json_reader_shape():
    reader = HfConfigReader()
    doc = json.loads((SAMPLES / "p3_deepseek-v3.config.json").read_text())
    [p] = reader.read(doc, str(SAMPLES / "p3_deepseek-v3.config.json"), None)
    assert p.experts == 256 and p.name == "p3_deepseek-v3"
    assert reader.read({"output_throughput": 1.0}, "x.json", None) is None
    assert reader.read(doc, "x.jsonl", 3) is None


# ------------------------------------------------------------------- robustness

from hypothesis import (  # noqa: E402
    HealthCheck,
    given,
    settings,
    strategies as st,  # noqa: E402
)

DOCS = [json.loads(p.read_text()) for p in CONFIGS]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(DOCS), st.data())
def test_any_subset_of_a_real_config_gives_a_profile(doc, data):
    keys = data.draw(st.lists(st.sampled_from(sorted(doc)), unique=True))
    p = profile_from_config({k: doc[k] for k in keys})
    assert isinstance(p, ModelProfile)
    if p.params_b is not None:
        assert p.params_b >= p.active_params_b >= 0
