"""The vLLM findings from 2026 threads, third round (findings/serving-limits-2026d-v.md),
reach thin evidence: a paragraph a user would write (worded here, not the finding's symptom
text and not the thread's evidence used to check it) or one pasted line makes `kb diagnose`
rank the finding in its top 3. The quiet side: healthy or unrelated evidence proposes none
of them, and a launch that already applies the fix does not re-propose it."""

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

PREFIX = "v26d-"



# (finding id, evidence files, GPUs, engine): what someone would post, written here, nothing more
CASES = [
    ("v26d-kv-pool-null-block-silent-hang",
     {NOTES: "Our agent sessions on vLLM 0.24 freeze once the conversation gets near the context limit: "
             "that request never finishes and everyone behind it waits too. We pin the KV cache with "
             "--num-gpu-blocks-override. No error anywhere, 0 tokens/s, the metrics show one request "
             "waiting and KV cache usage at 0.0%.\n"}, "1x H100", "vllm"),
    ("v26d-kv-pool-null-block-silent-hang",
     {LOG: "(EngineCore_DP0 pid=311) INFO 08-20 10:02:11 [kv_cache_utils.py:1302] Maximum concurrency for "
           "106496 tokens per request: 1.00x\n"
           "(APIServer pid=1) INFO 08-20 10:20:41 [loggers.py:259] Engine 000: Avg prompt throughput: 0.0 "
           "tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 1 reqs, GPU KV cache "
           "usage: 0.0%, Prefix cache hit rate: 0.0%\n"}, None, "vllm"),
    ("v26d-qwen3-coder-parser-stream-think-boundary",
     {NOTES: "Qwen3.6-27B behind OpenCode, vLLM with --tool-call-parser qwen3_coder and --reasoning-parser qwen3. "
             "With stream=true the tool call shows up as plain text (<tool_call><function=read_file>...) inside "
             "the message content and the finish reason is stop, so the agent never runs the tool. stream=false "
             "is fine.\n"}, None, "vllm"),
    ("v26d-dynamo-prefill-needs-kv-transfer-config",
     {LOG: "ValueError: --connector is deprecated and the default is no longer nixl. When using "
           "--disaggregation-mode prefill, you must explicitly provide --kv-transfer-config. Example:\n"},
     None, "vllm"),
    ("v26d-dynamo-prefill-needs-kv-transfer-config",
     {NOTES: "After moving our DynamoGraphDeployment to the 1.0 vllm-runtime image the prefill pods crash-loop "
             "right after start; decode and frontend are healthy. The worker args are just --model, -tp 4 and "
             "--disaggregation-mode prefill, exactly what worked on 0.9.\n"}, "8x H100", "vllm"),
    ("v26d-ray-serve-vllm-v1-ray-executor-placement-group",
     {NOTES: "Ray Serve LLM app on a KubeRay cluster: with tensor_parallel_size 4 in engine_kwargs the replica "
             "never gets healthy and the log ends with ValueError: Current node has no GPU available. "
             "TP 1 deploys fine.\n"}, "8x H100", "vllm"),
    ("v26d-mm-item-larger-than-batched-tokens",
     {LOG: "(EngineCore_DP0 pid=9) ValueError: Chunked MM input disabled but max_tokens_per_mm_item (3136) is "
           "larger than max_num_batched_tokens (2048). Please increase max_num_batched_tokens.\n"},
     "1x L40S", "vllm"),
    ("v26d-flashinfer-jit-no-nvcc",
     {NOTES: "Built a slim python:3.12 image, pip installed vllm, and the server never comes up on our L4: "
             "Engine core initialization failed, and above it ninja fails with /usr/local/cuda/bin/nvcc: not found "
             "while building the sampling extension. The same model runs in the vllm-openai image.\n"},
     "1x L4", "vllm"),
]


def test_every_finding_in_the_file_has_a_case(shipped):
    findings = {f.id for f in shipped[0] if f.id.startswith(PREFIX)}
    assert findings == {c[0] for c in CASES}


@pytest.mark.parametrize("finding_id,files,gpu,engine", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_thin_evidence_ranks_the_findings_fix_in_the_top_3(shipped, tmp_path, finding_id, files, gpu, engine):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu, engine=engine)
    assert_fix_in_top_3(dx, finding_id, shipped[0])


# healthy launches and unrelated complaints: none of these findings belongs in the top 3
QUIET = [
    ({LAUNCH: "vllm serve Qwen/Qwen3-8B --max-model-len 16384 --enable-prefix-caching\n"}, "1x H100"),
    ({LAUNCH: "vllm serve google/gemma-3-27b-it --tensor-parallel-size 2 --max-num-batched-tokens 8192\n"},
     "2x A100"),
    ({NOTES: "Our Llama 3.3 70B service on four H200s answers quickly; TTFT is flat up to 32 users and tool "
             "calls parse. We only want to know whether FP8 weights would let us drop to two GPUs.\n"}, "4x H200"),
]


@pytest.mark.parametrize("files,gpu", QUIET, ids=[f"quiet-{i}" for i in range(len(QUIET))])
def test_unrelated_evidence_proposes_none_of_them(shipped, tmp_path, files, gpu):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu, engine="vllm")
    assert not carrying(dx, PREFIX, 3), carrying(dx, PREFIX, 3)


def test_a_launch_that_already_applies_the_fix_does_not_repropose_it(shipped, tmp_path):
    # the qwen3_coder complaint above, but the launch already runs the qwen3_xml parser
    files = {NOTES: "Streaming tool calls from Qwen3.6 come through fine now.\n",
             LAUNCH: "vllm serve Qwen/Qwen3.6-35B-A3B --enable-auto-tool-choice --tool-call-parser qwen3_xml "
                     "--reasoning-parser qwen3\n"}
    dx = _diagnose(shipped, tmp_path, files, engine="vllm")
    assert _position(dx, "v26d-qwen3-coder-parser-stream-think-boundary") is None, \
        [r.rule for r in dx.recommendations[:5]]
