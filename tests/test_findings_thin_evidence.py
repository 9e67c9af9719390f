"""The shipped findings reach thin evidence (issue 13): a launch line, one log warning or a
paragraph written here (not taken from any scenario set) makes `kb diagnose` rank the
finding's fix in its top 3; the quiet side: a launch without the problem proposes none
of them."""

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

# (finding id, evidence files, GPUs, engine): the evidence is what someone would post, nothing more
CASES = [
    ("tl-vllm-vlm-tp-encoder-weights",
     {LAUNCH: "vllm serve Qwen/Qwen2.5-VL-72B-Instruct --tensor-parallel-size 4 "
              "--limit-mm-per-prompt '{\"image\": 4}' --max-model-len 32768\n"}, "4x H100", None),
    ("tl-sglang-vlm-tp-dp-encoder",
     {LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-VL-32B-Instruct --tp-size 4 "
              "--mm-attention-backend fa3 --port 30000\n"}, "4x H100", None),
    ("tl-vlm-image-ttft-encoder",
     {NOTES: "We serve a Qwen2.5-VL model on four GPUs. Plain chat is snappy, but image requests sit for "
             "three or four seconds before the first token shows up, and it gets worse the more pictures a "
             "message carries. Profiling suggests the vision encoder is where the time goes.\n"}, None, "vllm"),
    ("tl-vllm-pp-async-scheduling-off",
     {LOG: "INFO 11-20 10:00:01 [config.py:100] Resolved architecture: Qwen3MoeForCausalLM\n"
           "WARNING 11-20 10:00:02 [vllm.py:1640] Async scheduling is disabled because the V1 model runner "
           "does not support it with pipeline parallelism.\n"}, None, "vllm"),
    ("tl-vllm-ray-executor-async-off",
     {LOG: "INFO 11-20 10:00:01 [config.py:100] Resolved architecture: LlamaForCausalLM\n"
           "WARNING 11-20 10:00:02 [vllm.py:1620] Async scheduling will be disabled because it is not "
           "supported with the `ray` distributed executor backend. \n"}, None, "vllm"),
    ("tl-sglang-small-model-overlap-off",
     {LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --disable-overlap-schedule\n"},
     "1x H100", None),
    ("tl-vllm-long-context-small-chunk-budget",
     {LAUNCH: "vllm serve Qwen/Qwen3-32B --tensor-parallel-size 4 --max-model-len 131072 "
              "--max-num-batched-tokens 2048\n"}, "4x H200", None),
    ("tl-sglang-long-input-small-chunk",
     {LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --context-length 65536 "
              "--chunked-prefill-size 2048\n"}, "1x H200", None),
    ("tl-vllm-kv-offload-evicted-sessions",
     {NOTES: "Our coding agent keeps a dozen long sessions open on one vLLM box. When a user comes back "
             "after a tool call, the first token takes almost a minute, because by then the other sessions "
             "have pushed its blocks out and the whole prompt has to re-prefill from scratch.\n"}, None, "vllm"),
    ("tl-vllm-long-context-single-gpu-no-offload",
     {LAUNCH: "vllm serve Qwen/Qwen3-32B-AWQ --max-model-len 196608 --gpu-memory-utilization 0.92\n"},
     "1x RTX 5090", None),
    ("tl-vllm-lora-enforce-eager",
     {LAUNCH: "vllm serve meta-llama/Llama-3.1-8B-Instruct --enable-lora --lora-modules sql=/adapters/sql "
              "--enforce-eager\n"}, "1x A100", None),
    ("tl-vllm-lora-modules-max-loras-default",
     {LAUNCH: "vllm serve meta-llama/Llama-3.1-8B-Instruct --enable-lora --lora-modules sql=/adapters/sql "
              "chat=/adapters/chat summ=/adapters/summ\n"}, "1x A100", None),
    ("tl-vllm-small-model-api-server-count",
     {LAUNCH: "vllm serve Qwen/Qwen3-4B --max-num-seqs 512\n"}, "1x H100", None),
    ("tl-api-server-cpu-bound-prose",
     {NOTES: "With 400 clients hammering a 1.5B model on an H100, throughput stops climbing. top shows the "
             "api server process pinned at 100% CPU while nvidia-smi reports the GPU at roughly half "
             "utilization.\n"}, None, "vllm"),
    ("tl-vllm-moe-tp-without-ep",
     {LAUNCH: "vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 4\n"}, "4x H100", None),
    ("tl-sglang-moe-tp-without-ep",
     {LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp-size 8\n"}, "8x H100", None),
    ("tl-sglang-mla-high-concurrency-no-dp-attention",
     {LAUNCH: "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 "
              "--max-running-requests 512 --trust-remote-code\n"}, "8x H200", None),
    ("tl-sglang-dp-attention-low-concurrency",
     {LAUNCH: "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 "
              "--enable-dp-attention --dp-size 8 --max-running-requests 32 --trust-remote-code\n"}, "8x H200", None),
    ("tl-sglang-small-model-small-batch-torch-compile",
     {LAUNCH: "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
              "--max-running-requests 8\n"}, "1x H100", None),
    ("tl-vllm-small-model-enforce-eager",
     {LAUNCH: "vllm serve Qwen/Qwen3-8B --enforce-eager --max-model-len 16384\n"}, "1x L40S", None),
    ("tl-sglang-small-model-disable-cuda-graph",
     {LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --disable-cuda-graph\n"}, "1x L40S", None),
    ("tl-sglang-mla-low-concurrency-no-mtp",
     {LAUNCH: "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-R1 --tp-size 8 "
              "--max-running-requests 16 --trust-remote-code\n"}, "8x H200", None),
    ("tl-vllm-spec-decode-high-concurrency",
     {LAUNCH: "vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config "
              "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4}' "
              "--max-num-seqs 512\n"}, "1x H100", None),
    ("tl-vllm-small-model-wide-tp",
     {LAUNCH: "vllm serve Qwen/Qwen3-4B --tensor-parallel-size 8\n"}, "8x A100", None),
    ("tl-sglang-small-model-wide-tp",
     {LAUNCH: "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp-size 4\n"},
     "4x A100", None),
    ("tl-vllm-low-gpu-memory-utilization",
     {LAUNCH: "vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.6 --max-num-seqs 256\n"},
     "1x H100", None),
    ("tl-vllm-kv-too-small-for-max-model-len",
     {LOG: "INFO 11-20 10:00:01 [gpu_worker.py:300] Available KV cache memory: 5.59 GiB\n"
           "ERROR 11-20 10:00:02 [core.py:700] ValueError: To serve at least one request with the model's max "
           "seq len (221000), (10.12 GiB KV cache is needed, which is larger than the available KV cache memory "
           "(5.59 GiB). Based on the available memory, the estimated maximum model length is 122080. Try "
           "increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
           "decreasing `max_model_len` when initializing the engine.\n"}, None, "vllm"),
    ("tl-sglang-low-mem-fraction",
     {LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-14B --mem-fraction-static 0.6 "
              "--max-running-requests 256\n"}, "1x H100", None),
    ("tl-vllm-long-context-bf16-kv",
     {LAUNCH: "vllm serve Qwen/Qwen3-32B --tensor-parallel-size 2 --max-model-len 131072\n"}, "2x H200", None),
    ("tl-sglang-long-context-bf16-kv",
     {LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --context-length 131072\n"},
     "1x H200", None),
    ("tl-sglang-prefill-worker-running-cap",
     {LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp-size 4 "
              "--disaggregation-mode prefill --max-running-requests 1024\n"}, "4x H200", None),
    ("tl-vllm-hopper-flashinfer-cutlass-moe",
     {LAUNCH: "vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 2 --moe-backend flashinfer_cutlass\n"},
     "2x H200", None),
    ("tl-sglang-deepseek-sm100-moe-runner",
     {LAUNCH: "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-R1-0528 --tp-size 8 "
              "--trust-remote-code\n"}, "8x B200", None),
    ("tl-prefix-caching-off-shared-prefix",
     {NOTES: "Every one of our requests starts with the same system prompt of about 3000 tokens, yet time to "
             "first token never improves on repeats.\n",
      LAUNCH: "vllm serve meta-llama/Llama-3.1-8B-Instruct --no-enable-prefix-caching\n"}, None, "vllm"),
    ("tl-prefix-cache-no-hits",
     {NOTES: "The usage block always says cached_tokens: 0 even though our agent resends an identical "
             "5k-token preamble on every call. A byte-identical second request is exactly as slow as the "
             "first one.\n"}, None, "vllm"),
    ("tl-sglang-hicache-multiturn-retention",
     {NOTES: "Running a chat product on sglang. With a few hundred conversations open, the cache hit rate "
             "drops below 20% and people coming back after lunch wait several seconds because their history "
             "was evicted from the radix cache.\n"}, None, "sglang"),
    ("tl-sglang-fa3-on-ampere",
     {LAUNCH: "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
              "--attention-backend fa3\n"}, "1x A100", None),
    ("tl-sglang-fa3-decode-h20",
     {LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp-size 8 --attention-backend fa3\n"},
     "8x H20", None),
    ("tl-vllm-marlin-fallback-warning",
     {LOG: "INFO 11-20 10:00:01 [config.py:100] Resolved architecture: DeepseekV2ForCausalLM\n"
           "WARNING 11-20 10:00:05 [auto_awq.py:325] Layer 'model.layers.0.mlp.down_proj' is not supported by "
           "AutoAWQMarlin. Falling back to unoptimized AWQ kernels.\n"}, None, "vllm"),
    ("tl-w4a16-no-speedup-at-high-batch",
     {NOTES: "I quantized Llama-3.1-8B to w4a16 with llm-compressor and ran the offline throughput benchmark "
             "with 1000 prompts on an H100. There is no speedup from quantization: the quantized model is not "
             "faster than the bf16 one at all.\n"}, None, "vllm"),
]


def test_every_launch_check_finding_has_a_case(shipped):
    findings = {f.id for f in shipped[0] if f.id.startswith("tl-")}
    assert findings == {c[0] for c in CASES}


@pytest.mark.parametrize("finding_id,files,gpu,engine", CASES, ids=[c[0] for c in CASES])
def test_thin_evidence_ranks_the_findings_fix_in_the_top_3(shipped, tmp_path, finding_id, files, gpu, engine):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu, engine=engine)
    assert_in_top_3(dx, finding_id)


# a plain launch of each engine for the same kind of setup: none of the launch checks applies
QUIET = [
    ({LAUNCH: "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 8192\n"},
     "4x H100"),
    ({LAUNCH: "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --tp-size 4 "
              "--context-length 8192\n"}, "4x H100"),
    ({LAUNCH: "vllm serve Qwen/Qwen2.5-VL-72B-Instruct --tensor-parallel-size 4 --mm-encoder-tp-mode data "
              "--limit-mm-per-prompt '{\"image\": 4}'\n"}, "4x H100"),
    ({LAUNCH: "vllm serve meta-llama/Llama-3.1-8B-Instruct --enable-lora --max-loras 4 "
              "--lora-modules sql=/adapters/sql chat=/adapters/chat\n"}, "1x A100"),
    ({LAUNCH: "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
              "--attention-backend flashinfer\n"}, "1x A100"),
    ({NOTES: "Throughput on our 70B deployment looks as expected after the upgrade; latency percentiles are "
             "flat across the day and the queue never builds up.\n"}, None),
]


@pytest.mark.parametrize("files,gpu", QUIET, ids=[f"quiet-{i}" for i in range(len(QUIET))])
def test_a_launch_without_the_problem_proposes_no_launch_check(shipped, tmp_path, files, gpu):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu)
    fired = [r.rule for r in dx.recommendations if r.rule.startswith("finding tl-")]
    assert not fired, fired


def test_the_problem_setting_flipped_silences_the_finding(shipped, tmp_path):
    # the same launches as above with the fix already applied: the finding that proposed it is gone
    pairs = [
        ("tl-vllm-small-model-enforce-eager", "vllm serve Qwen/Qwen3-8B --max-model-len 16384\n", "1x L40S"),
        ("tl-sglang-fa3-on-ampere", "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                                    "--attention-backend flashinfer\n", "1x A100"),
        ("tl-vllm-moe-tp-without-ep", "vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 4 "
                                      "--enable-expert-parallel\n", "4x H100"),
        ("tl-vllm-small-model-wide-tp", "vllm serve Qwen/Qwen3-4B --data-parallel-size 8\n", "8x A100"),
        ("tl-sglang-low-mem-fraction", "python -m sglang.launch_server --model-path Qwen/Qwen3-14B "
                                       "--mem-fraction-static 0.88 --max-running-requests 256\n", "1x H100"),
    ]
    for finding_id, launch, gpu in pairs:
        dx = _diagnose(shipped, tmp_path, {LAUNCH: launch}, gpu=gpu)
        assert _position(dx, finding_id) is None, (finding_id, [r.rule for r in dx.recommendations])
