"""The second-pass sglang / ROCm / Ascend findings (findings/sglang-2026b-s.md) reach thin
evidence (issue 13): one verbatim engine line, or a paragraph written here in a user's words
(not the finding's own symptom sentence and not the thread the finding came from), makes
`kb diagnose` rank the finding's fix in its top 3. The quiet side: healthy or unrelated
evidence proposes none of them, and a vLLM run does not get these sglang-only fixes."""

from __future__ import annotations

import pytest
from thin_evidence import (
    LAUNCH,
    LOG,
    NOTES,
    assert_fix_in_top_3,
    carrying,
    diagnose_files as _diagnose,
    position as _position,
)

PREFIX = "s2b-"



# (finding id, evidence files, GPUs, engine): what someone would post, nothing more
CASES = [
    ("s2b-ascend-pd-mf-store-url",
     {LOG: "[2026-05-02 10:11:12 TP0] Ascend Transfer Engine initialization failed.\n"
           "RuntimeError: Ascend Transfer Engine initialization failed.\n"}, None, "sglang"),
    ("s2b-sm120-dsv41-sparse-mla-prefill-triton",
     {LOG: "tvm.error.InternalError: Check failed: (ok) is false: Unsupported sparse-MLA prefill "
           "configuration: model=DSV4 num_heads=16 topk=128 page_block_size=64 topk_extra=512 "
           "extra_page_block_size=256\n"}, "8x RTX PRO 6000", "sglang"),
    ("s2b-rocm630-image-old-aiter-grok-accuracy",
     {NOTES: "We moved Grok 2 onto our MI300X box with the sglang rocm630 container. Tokens come out as fast "
             "as we expected, but the gsm8k check prints Accuracy: 0.000 and every answer is counted as "
             "invalid.\n"}, "8x MI300X", "sglang"),
    ("s2b-pd-decode-oom-reserved-tokens",
     {LOG: "[2026-03-01 12:00:00 TP0] Decode out of memory. Try to lower your batch size.\n"
           "Try to allocate 2048 tokens.\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path Qwen/Qwen3-32B --disaggregation-mode decode "
              "--tp-size 4\n"}, None, "sglang"),
    ("s2b-deepep-max-dispatch-tokens-per-rank",
     {LOG: "Exception: Capture cuda graph failed: Failed: Assertion error /sgl-workspace/DeepEP/csrc/"
           "deep_ep.cpp:1030 'x.size(0) == topk_idx.size(0) and x.size(0) <= num_max_dispatch_tokens_per_rank'\n"},
     None, "sglang"),
    ("s2b-sglang-0517-dsv4-hicache-prefill-hang",
     {NOTES: "Since we moved DeepSeek-V4 to sglang 0.5.17 with the hierarchical cache on, the server dies "
             "every few hours: the log says Scheduler watchdog timeout and the last batch was a long "
             "prefill. Nothing else changed.\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V4-Flash --tp-size 8 "
              "--enable-hierarchical-cache --chunked-prefill-size 16384\n"}, "8x H20", "sglang"),
    ("s2b-rocm-aiter-allreduce-graph-capture",
     {LOG: "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016\n"},
     "8x MI300X", "sglang"),
    ("s2b-rocm-v0510-mi35x-aiter-dtypes",
     {LOG: '  File "aiter/ops/triton/quant/fused_fp8_quant.py", line 21, in <module>\n'
           "AttributeError: module 'aiter' has no attribute 'dtypes'\n"}, "8x MI355X", "sglang"),
    ("s2b-ascend-npu-graph-capture-eager",
     {NOTES: "On our 910B box sglang will not come up for Qwen3-32B: it fails while capturing the npu graph "
             "with AclmdlRICaptureEnd error code is 107033. Same container serves other models fine.\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path Qwen/Qwen3-32B --device npu --attention-backend ascend "
              "--tp-size 4\n"}, None, "sglang"),
    ("s2b-b200-nvfp4-flashinfer-trtllm-moe-cutlass",
     {NOTES: "Qwen3-235B NVFP4 on eight B200s: with the flashinfer_trtllm MoE runner every reply is mojibake, "
             "question marks and replacement characters, even with greedy sampling. Nothing in the log.\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path nvidia/Qwen3-235B-A22B-NVFP4 --tp-size 8 "
              "--moe-runner-backend flashinfer_trtllm\n"}, "8x B200", "sglang"),
    ("s2b-dsv4-h200-flashinfer-mxfp4-moe",
     {NOTES: "DeepSeek-V4-Flash on our H200 node decodes slower than we expected; the startup log says the "
             "routed experts run on marlin.\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V4-Flash --tp-size 8 "
              "--moe-runner-backend marlin\n"}, "8x H200", "sglang"),
    ("s2b-vllm-ascend-npu-graph-scatter-507011",
     {LOG: "(Worker_TP3 pid=4411) ERROR 07-06 10:02:11 [multiproc_executor.py:1055] RuntimeError: call "
           "aclnnScatterNdUpdate failed, detail:EZ9999: Inner Error! error code is 507011\n"}, None, "vllm"),
    ("s2b-vllm-ascend-mm-expandable-segments",
     {NOTES: "Qwen3-VL on our Atlas 800 box with vllm-ascend: every few hours of image traffic it dies with "
             "NPU out of memory, and npu-smi shows usage creeping up between requests.\n"}, None, "vllm"),
    ("s2b-rocm-aiter-on-triton-moe-garbage",
     {NOTES: "On the MI300X node the MoE model only produces word salad since we added the Triton MoE runner "
             "to the launch; our env file still has SGLANG_USE_AITER=1 and gsm8k accuracy is 0 now.\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp-size 8 "
              "--moe-runner-backend triton\n"}, "8x MI300X", "sglang"),
    ("s2b-rocm-aiter-ck-moe-jit-build-hang",
     {LOG: "[aiter] start build [module_moe_ck2stages_f8_f8_preshuffle_on_b16_silu_per_token_mulWeightStage2]\n"
           "[aiter] waiting for baton release at /sgl-workspace/aiter/aiter/jit/build/lock_module_moe_ck2stages\n"},
     "8x MI300X", "sglang"),
    ("s2b-pd-decode-mamba-pingpong-slots",
     {LOG: "AssertionError: Not enough space for mamba ping pong idx, try to increase "
           "--mamba-full-memory-ratio.\n"}, None, "sglang"),
]


def test_every_finding_in_the_file_has_a_case(shipped):
    ids = {f.id for f in shipped[0] if f.id.startswith(PREFIX)}
    assert ids == {c[0] for c in CASES}


@pytest.mark.parametrize("finding_id,files,gpu,engine", CASES, ids=[c[0] for c in CASES])
def test_thin_evidence_ranks_the_findings_fix_in_the_top_3(shipped, tmp_path, finding_id, files, gpu, engine):
    assert_fix_in_top_3(_diagnose(shipped, tmp_path, files, gpu=gpu, engine=engine), finding_id, shipped[0])


# healthy or unrelated evidence: none of these findings is proposed
QUIET = [
    ({LAUNCH: "python3 -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp-size 2\n"}, "2x H100", "sglang"),
    ({LOG: "[2026-05-02 10:11:12 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, "
           "avail mem=41.20 GB, mem usage=61.03 GB.\n"
           "[2026-05-02 10:11:20 TP0] Decode batch, #running-req: 32, #token: 41210, token usage: 0.31, "
           "cuda graph: True, gen throughput (token/s): 2410.55, #queue-req: 0\n"}, "2x H100", "sglang"),
    ({NOTES: "Throughput on our 70B deployment looks as expected after the upgrade; latency percentiles are "
             "flat and nothing in the logs stands out.\n"}, None, "sglang"),
    ({NOTES: "Our chat frontend shows the reasoning text inside the answer instead of a separate panel.\n"},
     None, "sglang"),
    ({LAUNCH: "vllm serve Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 32768\n",
      LOG: "INFO 11-20 10:00:05 [gpu_model_runner.py:2000] Model loading took 15.6 GiB and 8.1 seconds\n"},
     "1x H100", "vllm"),
]


@pytest.mark.parametrize("files,gpu,engine", QUIET, ids=[f"quiet-{i}" for i in range(len(QUIET))])
def test_unrelated_evidence_proposes_none_of_them(shipped, tmp_path, files, gpu, engine):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu, engine=engine)
    assert not carrying(dx, PREFIX), carrying(dx, PREFIX)


def test_a_vllm_run_does_not_get_the_sglang_only_fix(shipped, tmp_path):
    # the decode-OOM words also fit vLLM prose, but the reserve flag is sglang's
    dx = _diagnose(shipped, tmp_path, {LAUNCH: "vllm serve Qwen/Qwen3-32B --tensor-parallel-size 4\n",
                                       NOTES: "vLLM keeps preempting requests when many long answers run.\n"},
                   engine="vllm")
    assert _position(dx, "s2b-pd-decode-oom-reserved-tokens") is None


def test_an_nvidia_graph_failure_does_not_get_the_ascend_fix(shipped, tmp_path):
    # graph-capture words on an NVIDIA card: the Ascend eager fallback is for NPUs only
    dx = _diagnose(shipped, tmp_path, {LOG: "Exception: Capture cuda graph failed: CUDA error: no kernel image is "
                                            "available for execution on the device\n"},
                   gpu="1x RTX 5090", engine="sglang")
    assert _position(dx, "s2b-ascend-npu-graph-capture-eager") is None
