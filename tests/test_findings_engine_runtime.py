"""The engine-runtime findings (findings/engine-runtime-2026.md: engine-version, eager-mode,
torch-compile, cuda-graph-max-bs, quantization-kernel, kv-cache-dtype) reach thin evidence:
a sentence a user would write (not the finding's own symptom text), one pasted error line, or
a launch command makes `kb diagnose` rank the finding in its top 3. The quiet side: plain or
unrelated evidence does not propose them, and a launch that already applies the fix does not
re-propose it."""

from __future__ import annotations

import pytest
from thin_evidence import (
    LAUNCH,
    LOG,
    NOTES,
    assert_in_top_3,
    diagnose_files as _diagnose,
    position as _position,
)

# (finding id, evidence files, GPUs, engine): what someone would post, written here, nothing more
CASES = [
    ("er-vllm-mrv2-cudagraph-memory-oom",
     {NOTES: "Since going to vLLM 0.25.1 our Llama 3.1 70B FP8 deployment on 8 L40S won't come up anymore. It "
             "loads the weights, sizes the KV cache, then runs out of memory while capturing cuda graphs. "
             "Nothing changed in our config and 0.23 was fine.\n"}, None, "vllm"),
    ("er-vllm-mrv2-cudagraph-memory-oom",
     {LOG: "(EngineCore pid=412) ERROR 07-20 10:00:02 [core.py:1111]   File \"/usr/local/lib/python3.12/"
           "dist-packages/vllm/v1/worker/gpu/model_runner.py\", line 1053, in capture_model\n"
           "(EngineCore pid=412) ERROR 07-20 10:00:02 [core.py:1111] torch.OutOfMemoryError: CUDA out of "
           "memory. Tried to allocate 2.00 GiB.\n"}, None, "vllm"),
    ("er-vllm-sm120-gdn-nvfp4-cudagraph-crash",
     {NOTES: "Qwen3.6-35B-A3B NVFP4 on my RTX PRO 6000 with vLLM 0.27: after twenty minutes of steady agent "
             "traffic the engine segfaults in cudaGraphLaunch. Piecewise mode didn't help; only enforce_eager "
             "survives, which is a lot slower. 0.24 never did this.\n"}, None, "vllm"),
    ("er-vllm-eagle3-quantized-prefill-capture-ima",
     {LAUNCH: "vllm serve RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic --speculative-config "
              "'{\"method\": \"eagle3\", \"model\": \"nm-testing/SpeculatorLlama3-1-8B-Eagle3-converted-0717-"
              "quantized\", \"num_speculative_tokens\": 3}'\n",
      LOG: "Capturing prefill CUDA graphs (FULL):  90%|########9 | 44/49\n"
           "(EngineCore pid=1705) ERROR [core.py:1231] torch.AcceleratorError: CUDA error: an illegal memory "
           "access was encountered\n"}, "1x H100", None),
    ("er-sglang-eagle3-draft-graph-shrinking-batch-ima",
     {LAUNCH: "python -m sglang.launch_server --model-path openai/gpt-oss-120b --tp-size 4 "
              "--speculative-algorithm EAGLE3 --speculative-draft-model-path lmsys/EAGLE3-gpt-oss-120b-bf16 "
              "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4\n",
      NOTES: "Runs fine with 32 requests in flight, then as requests finish and the batch shrinks to about a "
             "dozen it dies with an illegal memory access. Turning off cuda graphs makes it go away.\n"},
     "4x H100", None),
    ("er-sglang-0512-deepgemm-b300-capture-ima",
     {LOG: "Exception: Capture cuda graph failed: CUDA driver error (/deepgemm/csrc/apis/../jit_kernels/impls/"
           "runtime_utils.hpp:143): 700 (CUDA_ERROR_ILLEGAL_ADDRESS, an illegal memory access was encountered)\n"},
     None, "sglang"),
    ("er-sglang-cutlass-dsl-mlir-capture-abort",
     {LOG: "Capturing batches (bs=512 avail_mem=19.45 GB):   0%|          | 0/52 [00:00<?, ?it/s]terminate "
           "called after throwing an instance of 'nanobind::builtin_exception'\n"
           "  what():  Expected an MLIR object (got [<cutlass._mlir._mlir_libs._cutlass_ir._mlir.ir.OpResult "
           "object at 0x7f72f4382db0>]).\n"
           "Fatal Python error: Aborted\n"}, None, "sglang"),
    ("er-vllm-0271-custom-allreduce-capture-ima",
     {LOG: "INFO 08-15 09:12:01 [vllm.py:819] Auto-enabling VLLM_USE_BREAKABLE_CUDAGRAPH=1. Set "
           "VLLM_USE_BREAKABLE_CUDAGRAPH=0 to opt out.\n"
           "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'an illegal memory access was "
           "encountered'\n"}, None, "vllm"),
    ("er-sglang-glm52-decode-regression-pr30924",
     {NOTES: "We pulled the latest sglang main for our GLM-5.2 deployment and per-request decode speed dropped "
             "to about a third of what it was, around 10 tok/s instead of 30, with the exact same launch "
             "command.\n"}, None, "sglang"),
    ("er-vllm-0112-inductor-get-raw-stream",
     {LOG: "(Worker_TP0 pid=26373) ERROR 12-17 13:32:44 [multiproc_executor.py:815] NameError: name "
           "'get_raw_stream' is not defined\n"}, None, "vllm"),
    ("er-vllm-aot-compile-failure",
     {NOTES: "Upgraded to a vLLM build with torch 2.10 and now startup dies inside torch.compile. Someone on "
             "Slack said to try turning off the AOT compile path, is that a real thing?\n"}, None, "vllm"),
    ("er-sglang-torch-compile-pytorch26-garbage",
     {LAUNCH: "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 "
              "--trust-remote-code --enable-torch-compile\n",
      NOTES: "With torch compile on, DeepSeek-V3 returns garbled output and sometimes never stops. Without the "
             "flag the answers are fine.\n"}, "8x H200", None),
    ("er-sglang-capture-failed-lower-max-bs",
     {LOG: "[2026-05-01 10:00:00] Capture cuda graph failed: CUDA out of memory. Tried to allocate 1.20 GiB\n"
           "Possible solutions:\n"
           "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
           "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"}, None, "sglang"),
    ("er-vllm-gb10-nvfp4-moe-marlin-fallback",
     {NOTES: "Trying the NVFP4 Qwen3 MoE on my DGX Spark with the nightly aarch64 image. The log picks "
             "MARLIN for the MoE and the model no longer fits in the 128 GB. Why doesn't it use the native "
             "FP4 path?\n"}, None, "vllm"),
    ("er-vllm-marlin-moe-invalid-thread-config",
     {LOG: "(EngineCore pid=586) RuntimeError: Invalid thread config: thread_m_blocks = 4, thread_k = -1, "
           "thread_n = -1, num_threads = -1 for MKN = [32768, 2880, 2880]\n"}, None, "vllm"),
    ("er-sglang-marlin-bf16-pre-sm90",
     {LOG: "[2026-04-12 12:53:32 TP7] You are running Marlin kernel with bf16 on GPUs before SM90. You can "
           "consider change to fp16 to achieve better performance if possible.\n"}, None, "sglang"),
    ("er-sglang-glm51-fp8-kv-accuracy",
     {LAUNCH: "python -m sglang.launch_server --model-path zai-org/GLM-5.1-FP8 --tp 8 --kv-cache-dtype fp8_e4m3 "
              "--trust-remote-code\n",
      NOTES: "Our eval numbers are way off: AIME about 77 where the model card says 95. Same model with the "
             "default cache dtype scores fine.\n"}, "8x B300", None),
    ("er-vllm-qwen-vl-fp8-e5m2-kv-corrupt",
     {LAUNCH: "vllm serve Qwen/Qwen2.5-VL-7B-Instruct --kv-cache-dtype fp8_e5m2\n",
      NOTES: "Image captions come back as nonsense with the e5m2 cache; no errors anywhere in the log.\n"},
     "1x L40S", None),
    ("er-vllm-rocm-minimax-m3-fp8-kv-fnuz",
     {LOG: "WARNING 06-14 10:00:01 [kv_cache.py:202] Using uncalibrated q_scale 1.0 and/or prob_scale 1.0 with "
           "fp8 attention. This may cause accuracy issues. Please make sure q/prob scaling factors are "
           "available in the fp8 checkpoint.\n",
      LAUNCH: "vllm serve MiniMaxAI/MiniMax-M3-MXFP8 --tensor-parallel-size 8 --kv-cache-dtype fp8\n"},
     "8x MI300X", None),
    ("er-vllm-fp8-kv-sleep-level2-gibberish",
     {NOTES: "In our RL loop we put vLLM to sleep at level 2 between rollouts and reload the new weights. With "
             "the FP8 KV cache the generations after wake_up are pure gibberish; sleep level 1 works.\n"},
     None, "vllm"),
    ("er-vllm-flashinfer-fp8-kv-hopper-jit",
     {LOG: "(EngineCore_DP0 pid=1127182) ERROR 10-27 20:12:32 [core.py:708] /root/.cache/flashinfer/90/"
           "generated/batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_e4m3_dtype_o_bf16_dtype_idx_i32_"
           "head_dim_qk_128_head_dim_vo_128_posenc_0_use_swa_False_use_logits_cap_False_f16qk_False_sm90/"
           "batch_prefill_ragged_sm90_kernel_mask_2.cu\n"
           "(EngineCore_DP0 pid=1127182) ERROR 10-27 20:12:32 [core.py:708] kernel_traits.cuh(74): error: no "
           "instance of overloaded function \"cute::make_tiled_mma\" matches the argument list\n"},
     "1x H100", "vllm"),
    ("er-vllm-gpt-oss-full-cudagraph-repetition",
     {LAUNCH: "vllm serve openai/gpt-oss-20b --tensor-parallel-size 2\n",
      NOTES: "On our two 3090s gpt-oss answers the first prompt fine, but every prompt after that loops the "
             "same sentence until max_tokens. 0.10.2 didn't do this.\n"}, "2x RTX 3090", None),
    ("er-sglang-piecewise-prefill-graph-failure",
     {LOG: "[2026-06-10 13:08:34 TP7] Piecewise CUDA Graph failed with error: 'TcPiecewiseForwardContext' object "
           "has no attribute 'num_tokens'\n"
           "Piecewise CUDA Graph is enabled by default as an experimental feature.\n"
           "To work around this error, add --disable-piecewise-cuda-graph to your launch command.\n"},
     None, "sglang"),
    ("er-sglang-glm53-flash-fp8-kv",
     {NOTES: "Trying to serve GLM-5.3-Flash on 8 H20 with an fp8 KV cache like we do for GLM-5.2, but sglang "
             "refuses the fp8 cache for this model, so we only get half the tokens.\n"}, None, "sglang"),
    ("er-vllm-081-qwen25vl-window-mask",
     {NOTES: "We upgraded to vLLM 0.8.1 and our Qwen2.5-VL OCR pipeline started dropping words from scanned "
             "invoices, maybe one word in ten, with nothing in the logs.\n"}, None, "vllm"),
]


def test_every_engine_runtime_finding_has_a_case(shipped):
    findings = {f.id for f in shipped[0] if f.id.startswith("er-")}
    assert findings == {c[0] for c in CASES}


@pytest.mark.parametrize("finding_id,files,gpu,engine", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_thin_evidence_ranks_the_findings_fix_in_the_top_3(shipped, tmp_path, finding_id, files, gpu, engine):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu, engine=engine)
    assert_in_top_3(dx, finding_id)


# plain launches and unrelated complaints: none of these findings belongs in the top 3
QUIET = [
    ({LAUNCH: "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 8192\n"},
     "4x H100"),
    ({LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp-size 4 --context-length 8192\n"},
     "4x H100"),
    ({LAUNCH: "vllm serve Qwen/Qwen2.5-VL-7B-Instruct --kv-cache-dtype fp8_e4m3\n"}, "1x L40S"),
    ({NOTES: "Throughput on our 70B deployment looks as expected after the upgrade; latency percentiles are "
             "flat across the day and the queue never builds up.\n"}, None),
    ({NOTES: "Every request starts with the same 3000-token system prompt and time to first token never "
             "improves on repeats, even though prefix caching should be on.\n"}, None),
]


@pytest.mark.parametrize("files,gpu", QUIET, ids=[f"quiet-{i}" for i in range(len(QUIET))])
def test_unrelated_evidence_proposes_none_of_them(shipped, tmp_path, files, gpu):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu)
    fired = [r.rule for r in dx.recommendations[:3]
             if r.rule.startswith("finding er-") or any(c.id.startswith("er-") for c in r.findings)]
    assert not fired, fired


def test_a_launch_that_already_applies_the_fix_does_not_repropose_it(shipped, tmp_path):
    pairs = [
        # GLM-5.1 already on a BF16 KV cache: the FP8-KV accuracy finding no longer applies
        ("er-sglang-glm51-fp8-kv-accuracy",
         {LAUNCH: "python -m sglang.launch_server --model-path zai-org/GLM-5.1-FP8 --tp 8 --kv-cache-dtype bf16 "
                  "--trust-remote-code\n",
          NOTES: "Our eval numbers are way off: AIME about 77 where the model card says 95.\n"}, "8x B300"),
        # Qwen-VL already on E4M3: the E5M2 corruption finding no longer applies
        ("er-vllm-qwen-vl-fp8-e5m2-kv-corrupt",
         {LAUNCH: "vllm serve Qwen/Qwen2.5-VL-7B-Instruct --kv-cache-dtype fp8_e4m3\n",
          NOTES: "Image captions come back as nonsense; no errors anywhere in the log.\n"}, "1x L40S"),
        # already eager: the SM120 CUDA-graph crash finding has nothing left to propose
        ("er-vllm-sm120-gdn-nvfp4-cudagraph-crash",
         {LAUNCH: "vllm serve nvidia/Qwen3.6-35B-A3B-NVFP4 --enforce-eager\n"}, "1x RTX PRO 6000"),
        # sglang EAGLE3 already without CUDA graphs
        ("er-sglang-eagle3-draft-graph-shrinking-batch-ima",
         {LAUNCH: "python -m sglang.launch_server --model-path openai/gpt-oss-120b --tp-size 4 "
                  "--speculative-algorithm EAGLE3 --speculative-draft-model-path lmsys/EAGLE3-gpt-oss-120b-bf16 "
                  "--disable-cuda-graph\n"}, "4x H100"),
    ]
    for finding_id, files, gpu in pairs:
        dx = _diagnose(shipped, tmp_path, files, gpu=gpu)
        assert _position(dx, finding_id) is None, (finding_id, [r.rule for r in dx.recommendations[:5]])
