"""The deployment / kernel-backend findings from 2026 vLLM threads
(findings/deploy-kernels-2026b-v.md) reach thin evidence: a sentence a user would write (not
the finding's own symptom text) or one pasted error line makes `kb diagnose` rank the finding
in its top 3. The quiet side: healthy or unrelated evidence proposes none of them, and a
launch that already applies the fix does not re-propose it."""

from __future__ import annotations

import pytest
from thin_evidence import (
    LAUNCH,
    LOG,
    NOTES,
    assert_in_top_3,
    carrying,
    diagnose_files as _diagnose,
    position as _position,
)

PREFIX = "v26b-"



# (finding id, evidence files, GPUs, engine): what someone would post, written here, nothing more
CASES = [
    ("v26b-openshift-getpwuid-user-env",
     {LOG: "Traceback (most recent call last):\n"
           "  File \"/usr/lib/python3.12/getpass.py\", line 169, in getuser\n"
           "    return pwd.getpwuid(os.getuid())[0]\n"
           "KeyError: 'getpwuid(): uid not found: 1000650000'\n"}, None, "vllm"),
    ("v26b-openshift-getpwuid-user-env",
     {NOTES: "Our vLLM pods crash-loop on the cluster since we moved to the 0.23 image: the container exits "
             "at import time complaining the uid is not found in the password database. The same image runs "
             "fine on my laptop with docker.\n"}, None, "vllm"),
    ("v26b-rocm-aiter-fmoe-untuned-shape-fault",
     {LOG: "Memory access fault by GPU node-3 (Agent handle: 0x5566aa00) on address 0x7f00c0000000. "
           "Reason: Page not present or supervisor privilege.\n",
      LAUNCH: "VLLM_ROCM_USE_AITER=1 vllm serve MiniMaxAI/MiniMax-M2.5 --tensor-parallel-size 8 "
              "--enable-expert-parallel --trust-remote-code\n"}, "8x MI355X", None),
    ("v26b-rocm-aiter-fmoe-untuned-shape-fault",
     {LOG: "[aiter] Fmoe tuning not support for ('gfx950', 256, 8192, 4096, 192, 192, 8)\n"
           "RuntimeError: ck_moe_stage2 device_gemm does not support this GEMM problem\n"}, "8x MI355X", "vllm"),
    ("v26b-rocm-fp4bmm-gfx942-crash",
     {LOG: "RuntimeError: MXFP4 quantization is not supported on gfx942\n",
      LAUNCH: "VLLM_ROCM_USE_AITER=1 vllm serve deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8\n"},
     "8x MI300X", None),
    ("v26b-gemma4-flashinfer-head512-triton",
     {LOG: "ValueError: Selected backend AttentionBackendEnum.FLASHINFER is not valid for this configuration. "
           "Reason: ['head_size not supported']\n",
      LAUNCH: "vllm serve google/gemma-4-31B-it --attention-backend FLASHINFER\n"}, "1x RTX PRO 6000", None),
    ("v26b-gemma4-flashinfer-head512-triton",
     {NOTES: "Adding the gemma-4-31B-it-assistant drafter for MTP makes our B200 server die while it captures "
             "graphs; the traceback ends inside trtllm_batch_decode_with_kv_cache. Plain Gemma 4 boots.\n"},
     "1x B200", "vllm"),
    ("v26b-kserve-hfserver-vllm-025-renderer",
     {LOG: "ModuleNotFoundError: No module named 'vllm.entrypoints.serve.render'\n"}, None, "vllm"),
    ("v26b-vllm-enable-metrics-unrecognized",
     {LOG: "vllm: error: unrecognized arguments: --enable-metrics --port 8080\n"}, None, "vllm"),
    ("v26b-hybrid-mtp-prefix-cache-corruption",
     {LAUNCH: "vllm serve Qwen/Qwen3.6-27B --enable-prefix-caching "
              "--speculative-config '{\"method\":\"mtp\",\"num_speculative_tokens\":3}'\n",
      NOTES: "After a few agent loops the model starts dropping tool calls and answering from nowhere; a "
             "restart makes it behave again for a while. Turning MTP off makes it go away.\n"}, "1x H100", None),
    ("v26b-llmd-precise-producer-scorer-unbound",
     # pasted into prose: a file holding only the EPP's JSON log line is skipped as "not a recognised format"
     {NOTES: "Our llm-d scheduler keeps logging this for every pod and routing looks random:\n"
             "{\"level\":\"error\",\"caller\":\"prefix/plugin.go:113\",\"msg\":\"PrefixCacheMatchInfo not found "
             "for endpoint, assigning score 0\"}\n"}, None, "vllm"),
    ("v26b-vllm-dp-dense-lb-imbalance",
     {LAUNCH: "vllm serve Qwen/Qwen3-8B --data-parallel-size 8\n",
      NOTES: "After an hour most requests are concentrated on engine 0 and 1 while the other six ranks "
             "do nothing; restarting spreads them out again for a while.\n"}, "8x H100", None),
    ("v26b-vllm-fp8-moe-lora",
     {LOG: "  File \"/usr/local/lib/python3.12/dist-packages/triton/language/semantic.py\", line 1490, in dot\n"
           "AssertionError: Unsupported lhs dtype fp8e4nv\n",
      LAUNCH: "vllm serve Qwen/Qwen3-30B-A3B-FP8 --enable-lora --lora-modules sql=/adapters/sql\n"},
     "1x H100", None),
    ("v26b-gptoss-harmony-start-token-error",
     {NOTES: "gpt-oss-120b behind our agent framework: roughly one streamed answer in ten breaks off and the "
             "server log shows openai_harmony.HarmonyError: Unexpected token 200003 while expecting start "
             "token 200006.\n"}, None, "vllm"),
    ("v26b-vllm-all2all-backend-flag-vs-env",
     {LOG: "WARNING 11-28 19:08:15 [parallel.py:470] VLLM_ALL2ALL_BACKEND environment variable is deprecated "
           "and will be removed in a future release. Please use the --all2all-backend command-line argument "
           "instead.\n"}, None, "vllm"),
    ("v26b-sm121-flashinfer-cutlass-relu2-mtp",
     {NOTES: "Spark box (GB10). Nemotron 3 Super NVFP4 boots without speculative decoding, but as soon as we add "
             "the MTP method the engine core exits during memory profiling with RuntimeError: Invalid activation "
             "type.\n"}, "1x DGX Spark", "vllm"),
    ("v26b-v100-custom-allreduce-hang",
     {NOTES: "Two V100 SXM2 cards, tensor parallel 2: the server never finishes warming up, both GPUs sit at full "
             "utilization with low power draw, and py-spy shows every rank waiting inside custom_all_reduce.\n"},
     "2x V100", "vllm"),
    ("v26b-hybrid-max-num-seqs-mamba-blocks",
     {LOG: "(EngineCore pid=88) ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (600). Each "
           "decode sequence requires one Mamba cache block, so CUDA graph capture cannot proceed.\n"},
     "1x B200", "vllm"),
    ("v26b-vllm-c-abi-undefined-symbol",
     {LOG: "ImportError: /usr/local/lib/python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: "
           "_ZN3c1017RegisterOperatorsD1Ev\n"}, None, "vllm"),
]


def test_every_finding_in_the_file_has_a_case(shipped):
    findings = {f.id for f in shipped[0] if f.id.startswith(PREFIX)}
    assert findings == {c[0] for c in CASES}


@pytest.mark.parametrize("finding_id,files,gpu,engine", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_thin_evidence_ranks_the_findings_fix_in_the_top_3(shipped, tmp_path, finding_id, files, gpu, engine):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu, engine=engine)
    assert_in_top_3(dx, finding_id)


# healthy launches and unrelated complaints: none of these findings belongs in the top 3
QUIET = [
    ({LAUNCH: "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n"}, "1x H100"),
    ({LAUNCH: "vllm serve Qwen/Qwen3-30B-A3B-FP8 --tensor-parallel-size 2 --enable-expert-parallel\n"}, "2x H100"),
    ({LAUNCH: "vllm serve Qwen/Qwen3-8B --data-parallel-size 4\n",
      NOTES: "Load is spread evenly across the four engines; latency is flat all day.\n"}, "4x H100"),
    ({NOTES: "We run vLLM on Kubernetes behind a gateway; everything starts fine and the dashboards look "
             "healthy, we just want to know whether a larger batch would help throughput.\n"}, None),
    ({NOTES: "Time to first token grows with prompt length on our 70B deployment, roughly linearly, which "
             "seems expected.\n"}, None),
]


@pytest.mark.parametrize("files,gpu", QUIET, ids=[f"quiet-{i}" for i in range(len(QUIET))])
def test_unrelated_evidence_proposes_none_of_them(shipped, tmp_path, files, gpu):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu, engine="vllm")
    assert not carrying(dx, PREFIX, 3), carrying(dx, PREFIX, 3)


def test_a_launch_that_already_applies_the_fix_does_not_repropose_it(shipped, tmp_path):
    pairs = [
        # MTP already served without prefix caching: the corruption finding has nothing to change
        ("v26b-hybrid-mtp-prefix-cache-corruption",
         {LAUNCH: "vllm serve Qwen/Qwen3.6-27B --no-enable-prefix-caching "
                  "--speculative-config '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'\n"}, "1x H100"),
        # NCCL all-reduce already chosen on the V100 pair
        ("v26b-v100-custom-allreduce-hang",
         {LAUNCH: "vllm serve Qwen/Qwen3-32B-AWQ --tensor-parallel-size 2 --disable-custom-all-reduce\n"}, "2x V100"),
        # expert-parallel MoE data parallel: the dense-DP balancer finding does not apply
        ("v26b-vllm-dp-dense-lb-imbalance",
         {LAUNCH: "vllm serve Qwen/Qwen3-30B-A3B --data-parallel-size 4 --enable-expert-parallel\n"}, "4x H100"),
    ]
    for finding_id, files, gpu in pairs:
        dx = _diagnose(shipped, tmp_path, files, gpu=gpu)
        assert _position(dx, finding_id) is None, (finding_id, [r.rule for r in dx.recommendations[:5]])
