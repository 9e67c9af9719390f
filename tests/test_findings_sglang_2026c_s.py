"""The third-pass sglang findings (findings/sglang-2026c-s.md) reach thin evidence (issue 13): a
paragraph written here in a user's words (not the finding's symptom sentence, not the source
thread's text) or a launch line makes `kb diagnose` rank the finding's fix in its top 3. The quiet
side: healthy or unrelated evidence proposes none of them."""

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

PREFIX = "s26c-"



# (finding id, evidence files, GPUs, engine): what someone would post, nothing more
CASES = [
    ("s26c-eagle3-draft-max-position-embeddings",
     {NOTES: "Our home-trained EAGLE3 head for Llama-3.1-8B is useless past short prompts: accept length drops "
             "to about 1.1 and spec decoding ends up slower than no speculation. Someone said to look at "
             "max_position_embeddings in the draft config, it says 2048.\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
              "--speculative-algorithm EAGLE3 --speculative-draft-model-path /models/llama31-eagle3 "
              "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4\n"},
     "1x H100", "sglang"),
    ("s26c-llguidance-multi-eos-glm",
     {NOTES: "Tool calls with GLM-4.6 through sglang hang until the token limit whenever we use llguidance for "
             "the JSON schema; the model clearly finished but the request never terminates.\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path zai-org/GLM-4.6 --tp-size 8 "
              "--grammar-backend llguidance\n"}, "8x H200", "sglang"),
    ("s26c-mi355x-glm52-topk-v2-off",
     {NOTES: "GLM-5.2 MXFP4 on our MI355X node: per-user speed at low concurrency trails the AMD recipe by "
             "roughly ten percent. Our env file sets SGLANG_OPT_USE_TOPK_V2=true as an older recipe said.\n"},
     "8x MI355X", "sglang"),
    ("s26c-sm120-mla-triton-fp8-kv",
     {NOTES: "DeepSeek-V3 style MLA model on four RTX 5090s: we need an fp8 kv cache to fit long contexts, but "
             "flashinfer has no FP8 attention on these cards and the triton backend slow beyond 32k tokens.\n"},
     "4x RTX 5090", "sglang"),
    ("s26c-sglang-0512-nixl-pd-dense-hang",
     {NOTES: "Upgraded our PD pair to sglang 0.5.12 and now requests stall: prefill logs the transfer, but the "
             "decode never produces tokens for Llama-3.1-8B. Rolling back fixes it.\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
              "--disaggregation-mode decode --disaggregation-transfer-backend nixl\n"}, "2x H100", "sglang"),
    ("s26c-sglang-moe-lora-partial-rank",
     {NOTES: "Our rank-8 adapter on Qwen3-30B-A3B outputs nonsense in sglang, yet the same adapter merged offline "
             "is fine. The server was started with max-lora-rank 32 so bigger adapters fit too.\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --enable-lora "
              "--lora-paths support=/adapters/support --max-lora-rank 32\n"}, "1x H100", "sglang"),
    ("s26c-ascend-pd-uint64-bootstrap-room",
     {LOG: "[2026-02-20 08:00:01 TP0] RuntimeError: Tensor self not implemented for DT_UINT64\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3.1 --device npu "
              "--attention-backend ascend --disaggregation-mode decode\n"}, None, "sglang"),
    ("s26c-sglang-059-qwen35-dense-tp-precision",
     {NOTES: "On sglang 0.5.9 our Qwen3.5-27B across two GPUs answers with garbled nonsense half the time; "
             "the identical checkpoint under vLLM is fine.\n",
      LAUNCH: "python3 -m sglang.launch_server --model-path Qwen/Qwen3.5-27B --tp-size 2\n"}, "2x H100", "sglang"),
    ("s26c-sglang-vit-cuda-graph-env",
     {NOTES: "Screenshots to Qwen2.5-VL-7B on sglang take about a second before any text appears; nsys shows the "
             "ViT as a long train of tiny kernel launches with idle gaps between them.\n"}, "4x H100", "sglang"),
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
    ({NOTES: "Throughput on our 70B deployment looks as expected after the upgrade; latency percentiles are "
             "flat and nothing in the logs stands out.\n"}, None, "sglang"),
    ({LAUNCH: "python3 -m sglang.launch_server --model-path zai-org/GLM-4.6 --tp-size 8 "
              "--grammar-backend xgrammar\n"}, "8x H200", "sglang"),
    ({NOTES: "DeepSeek-V3 on 8x H200 with sglang: TTFT spikes whenever a burst of long prompts arrives.\n"},
     "8x H200", "sglang"),
]


@pytest.mark.parametrize("files,gpu,engine", QUIET, ids=[f"quiet-{i}" for i in range(len(QUIET))])
def test_unrelated_evidence_proposes_none_of_them(shipped, tmp_path, files, gpu, engine):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu, engine=engine)
    assert not carrying(dx, PREFIX), carrying(dx, PREFIX)


def test_the_topk_fix_stays_off_nvidia(shipped, tmp_path):
    # the same complaint on NVIDIA Blackwell: the ROCm top-k switch is for gfx950 only
    dx = _diagnose(shipped, tmp_path, {NOTES: "GLM-5.2 on B200: per-user speed at low concurrency trails the "
                                               "recipe by ten percent.\n"}, gpu="8x B200", engine="sglang")
    assert _position(dx, "s26c-mi355x-glm52-topk-v2-off") is None
