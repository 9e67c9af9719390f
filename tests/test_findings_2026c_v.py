"""The vLLM findings from 2026 threads, second round (findings/perf-regressions-2026c-v.md),
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
    assert_in_top_3,
    carrying,
    diagnose_files as _diagnose,
    position as _position,
)

PREFIX = "v26c-"



# (finding id, evidence files, GPUs, engine): what someone would post, written here, nothing more
CASES = [
    ("v26c-dsv4-a100-backport-deterministic-moe-align",
     {NOTES: "Ampere box, 8x A800. DeepSeek-V4-Flash runs on the vllm-backport docker image but one request "
             "only decodes at a bit over 100 tok/s; friends on a different SM80 branch report 150+. Same flags "
             "on both (TP8 + expert parallel).\n"}, "8x A800", "vllm"),
    ("v26c-minimax-m3-blackwell-deepgemm-low-batch-marlin",
     {NOTES: "Odd result: our new B300 node serves MiniMax-M3 FP8 slower per user than the old H200 node at "
             "2-8 concurrent chats; only when we push 64 users does Blackwell pull ahead. Plain TP8, no EP.\n",
      LAUNCH: "vllm serve MiniMaxAI/MiniMax-M3 --tensor-parallel-size 8 --block-size 128 --trust-remote-code\n"},
     "8x B300", None),
    ("v26c-minimax-m2-hopper-moe-deepgemm-off",
     {NOTES: "MiniMax-M2 FP8 on H20s with vLLM 0.11: we installed DeepGEMM like the recipe says and TPOT sits "
             "around 30 ms at ten users, which feels twice too slow for a 10B-active model.\n",
      LAUNCH: "vllm serve MiniMaxAI/MiniMax-M2 --tensor-parallel-size 4 --trust-remote-code\n"}, "4x H20", None),
    ("v26c-gemma4-a4b-stream-reasoning-leak-after-tool",
     {NOTES: "Gemma 4 26B A4B behind OpenCode (vLLM 0.19, gemma4 tool and reasoning parsers): right after a "
             "tool result the streamed answer begins with 'thought' and the whole chain of thought, and "
             "reasoning_content is empty. Turning streaming off fixes it.\n"}, None, "vllm"),
    ("v26c-thinking-kwarg-name-mismatch",
     {NOTES: "Our client turns reasoning off per request via chat_template_kwargs. For Kimi it works, for the "
             "Qwen3 deployment the reply has content: null and everything sits in reasoning_content. Both "
             "servers run with a reasoning parser.\n"}, None, "vllm"),
    ("v26c-nixl-side-channel-host-pod-ip",
     {LOG: "(EngineCore_DP0 pid=77) WARNING 09-02 11:40:19 [base_worker.py:3033] Releasing expired KV blocks for "
           "request chatcmpl-5d1e which were retrieved by 0 remote worker(s) before lease expired.\n"}, None, "vllm"),
    ("v26c-nixl-side-channel-host-pod-ip",
     {NOTES: "P/D split on two Kubernetes nodes with the NixlConnector: every request stalls for two minutes "
             "before decode gives up, although the same manifests work when both pods land on one node.\n"},
     None, "vllm"),
    ("v26c-nixl-asymmetric-tp-handshake",
     {LOG: "(Worker_TP2_EP2 pid=3101) ERROR 08-14 07:02:11 [worker.py:767] NIXL transfer failure: handshake_failed "
           "| Context: {'failure_type': 'handshake_failed', 'request_id': 'cmpl-9a1'}\n"}, "8x H200", "vllm"),
    ("v26c-nixl-asymmetric-tp-handshake",
     {NOTES: "We split a Qwen3.5 hybrid deployment into a TP4 prefill pool and a DP8 decode pool. Health checks "
             "pass, but decode rejects every transfer with: AssertionError: Local block size 16 is not "
             "divisible by remote block size 32 or vice versa.\n"}, "8x H200", "vllm"),
    ("v26c-sm120-fp8-block-deepgemm-sf-assert",
     {NOTES: "Two RTX 5090s: the NVFP4 build of our 30B model serves fine, but the FP8 block-quantized build "
             "never starts. Weight loading ends with: RuntimeError: Assertion error "
             "(deepgemm/csrc/apis/layout.hpp:60): Unknown SF transformation\n"}, "2x RTX 5090", "vllm"),
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
    ({LAUNCH: "vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --enable-expert-parallel\n"}, "8x H200"),
    ({NOTES: "Our Qwen3-32B chat service on two A100s streams answers fine; tool calls parse and latency is "
             "flat. We only want to know whether FP8 KV cache would let us raise max-num-seqs.\n"}, "2x A100"),
    ({NOTES: "TTFT grows with prompt length on our 70B deployment, roughly linearly, which seems expected.\n"}, None),
]


@pytest.mark.parametrize("files,gpu", QUIET, ids=[f"quiet-{i}" for i in range(len(QUIET))])
def test_unrelated_evidence_proposes_none_of_them(shipped, tmp_path, files, gpu):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu, engine="vllm")
    assert not carrying(dx, PREFIX, 3), carrying(dx, PREFIX, 3)


def test_a_launch_that_already_applies_the_fix_does_not_repropose_it(shipped, tmp_path):
    # the same complaint as the MiniMax-M3 case above, but the launch already runs the Marlin MoE backend
    files = {**CASES[1][1],
             LAUNCH: "vllm serve MiniMaxAI/MiniMax-M3 --tensor-parallel-size 8 --block-size 128 "
                     "--trust-remote-code --moe-backend marlin\n"}
    dx = _diagnose(shipped, tmp_path, files, gpu="8x B300")
    assert _position(dx, "v26c-minimax-m3-blackwell-deepgemm-low-batch-marlin") is None, \
        [r.rule for r in dx.recommendations[:5]]
