"""The request/API-side findings (findings/request-api-2026.md: chat templates, stop tokens,
tool and reasoning parsers, sampling, structured-output backends, LoRA limits, vision inputs)
reach thin evidence (issue 13): a paragraph written here in a user's words (not the finding's
own symptom sentence) or one verbatim engine error line makes `kb diagnose` rank the finding's
fix in its top 3. The quiet side: unrelated evidence proposes none of them, and a launch that
already carries the fix does not get it proposed again."""

from __future__ import annotations

from pathlib import Path

import pytest
from thin_evidence import LAUNCH, LOG, NOTES, diagnose_files as _diagnose, position as _position

FILE = Path(__file__).resolve().parent.parent / "findings" / "request-api-2026.md"



def _ours(dx) -> list[str]:
    return [r.rule for r in dx.recommendations if r.rule.startswith("finding rq-")]


# (finding id, evidence files, engine): what someone would post, in their words or the engine's
CASES = [
    ("rq-no-chat-template-base-model",
     {LOG: "ERROR 03-14 09:12:44 [serving.py:214] ValueError: Cannot use chat template functions because "
           "tokenizer.chat_template is not set and no template argument was passed! For information about "
           "writing templates and setting the tokenizer.chat_template attribute, please see the documentation "
           "at https://huggingface.co/docs/transformers/main/en/chat_templating\n"}, "vllm"),
    ("rq-eos-end-of-turn-missing",
     {NOTES: "Our Llama 3 fine-tune served with vLLM does not stop generating: every answer goes on until "
             "max_tokens, we can see <|eot_id|> printed in the text and then it writes another user turn.\n"},
     "vllm"),
    ("rq-vllm-override-generation-config-drops-eos",
     {NOTES: "Since we added --override-generation-config to lower the temperature, Gemma answers with tool "
             "calls and then generation never stops, it keeps going until the token limit.\n",
      LAUNCH: "vllm serve google/gemma-4-31b-it --override-generation-config '{\"temperature\": 0.3}'\n"}, "vllm"),
    ("rq-vllm-auto-tool-choice-flags",
     {LOG: "ERROR 08-21 11:02:13 [serving.py:180] Error with model error=ErrorInfo(message='\"auto\" tool "
           "choice requires --enable-auto-tool-choice and --tool-call-parser to be set', type='BadRequestError', "
           "param=None, code=400)\n"}, "vllm"),
    ("rq-tool-parser-format-mismatch",
     {NOTES: "OpenCode against our Qwen3-Coder endpoint: the model decides to call the terminal tool, but "
             "tool_calls is empty and finish_reason is stop; the <function=terminal> block just sits in the "
             "message content.\n",
      LAUNCH: "vllm serve Qwen/Qwen3-Coder-30B-A3B-Instruct --enable-auto-tool-choice --tool-call-parser hermes\n"},
     "vllm"),
    ("rq-reasoning-parser-absent",
     {NOTES: "Serving DeepSeek-R1 on eight GPUs. In every response reasoning_content comes back null and the "
             "whole chain of thought, think tags included, is in the message content, so OpenWebUI shows it "
             "as the answer.\n"}, "vllm"),
    ("rq-reasoning-parser-prefilled-think",
     {NOTES: "Qwen3-VL-30B-A3B-Thinking with --reasoning-parser qwen3: the response never starts with a think "
             "tag, we only get the closing </think> and the thinking part goes to the answer anyway.\n",
      LAUNCH: "vllm serve Qwen/Qwen3-VL-30B-A3B-Thinking-FP8 --reasoning-parser qwen3\n"}, "vllm"),
    ("rq-vllm-minimax-append-think-parser",
     {NOTES: "MiniMax-M2.5 on vLLM with the minimax_m2_append_think reasoning parser: streaming chunks carry "
             "the reasoning in content and the reasoning field stays empty.\n"}, "vllm"),
    ("rq-served-model-name-404",
     {LOG: "INFO:     10.0.0.7:51234 - \"POST /v1/chat/completions HTTP/1.1\" 404 Not Found\n"
           "{\"object\":\"error\",\"message\":\"The model `Qwen/Qwen2.5-7B-Instruct` does not exist.\","
           "\"type\":\"NotFoundError\",\"param\":null,\"code\":404}\n"}, "vllm"),
    ("rq-thinking-off-server-default",
     {NOTES: "We want to disable thinking for Qwen3.5 on our sglang server. Passing enable_thinking false in "
             "the request body does nothing and OpenWebUI cannot send extra fields; the model still reasons "
             "for a long time before every short answer.\n"}, "sglang"),
    ("rq-batch-invariant-determinism",
     {NOTES: "Our JSON classifier is non-deterministic on vLLM: the exact same request with seed 42 returns a "
             "different label from time to time, mostly when other traffic is running at the same time.\n"},
     "vllm"),
    ("rq-vllm-bench-greedy-default",
     {NOTES: "vllm bench serve reports noticeably higher throughput than we ever see in production; it turns "
             "out the benchmark used greedy sampling with temperature 0 by default while our clients send "
             "top_p and top_k.\n"}, "vllm"),
    ("rq-vllm-xgrammar-pinned-unsupported-schema",
     {LOG: "ERROR 10-08 14:20:31 [serving.py:214] vllm.exceptions.VLLMValidationError: The provided JSON schema "
           "contains features not supported by xgrammar.\n"}, "vllm"),
    ("rq-vllm-v0-xgrammar-fallback-outlines",
     {LOG: "WARNING 11-26 20:25:33 [__init__.py:34] xgrammar does not support advanced JSON schema features "
           "like string length, item limits, or property bounds. Falling back to use outlines instead.\n"}, "vllm"),
    ("rq-vllm-lora-rank-above-max",
     {LOG: "(EngineCore_DP0 pid=1789245) ERROR 11-19 12:54:26 [core.py:710] RuntimeError: Worker failed with "
           "error 'LoRA rank 32 is greater than max_lora_rank 16.', please check the stack trace above for the "
           "root cause\n"}, "vllm"),
    ("rq-vllm-lora-modules-to-save-unsupported",
     {LOG: "ERROR 07-24 13:45:59 [core.py:517] ValueError: base_model.model.lm_head.weight is unsupported "
           "LoRA weight\n"}, "vllm"),
    ("rq-sglang-max-loras-per-batch-base-slot",
     {NOTES: "sglang with four adapters and --max-loras-per-batch 4 dies under mixed traffic: an assertion in "
             "fetch_new_loras kills the scheduler when base-model requests arrive together with all four "
             "adapters.\n"}, "sglang"),
    ("rq-vlm-image-tokens-exceed-max-model-len",
     {LOG: "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'The decoder prompt "
           "(length 60025) is longer than the maximum model length of 32768. Make sure that `max_model_len` "
           "is no smaller than the number of text tokens plus multimodal tokens. For image inputs, the number "
           "of image tokens depends on the number of images, and possibly their aspect ratios as well.', "
           "'type': 'BadRequestError', 'param': None, 'code': 400}\n"}, "vllm"),
    ("rq-vlm-text-only-language-model-only",
     {NOTES: "We run Gemma 3 27B purely as a text-only chat model, no images ever, but vLLM start-up still "
             "profiles image inputs for the vision tower and leaves us less KV cache than the text model "
             "should get.\n"}, "vllm"),
    ("rq-vllm-limit-mm-per-prompt-one-image",
     {LOG: "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'At most 1 image(s) may be "
           "provided in one request.', 'type': 'BadRequestError', 'param': None, 'code': 400}\n"}, "vllm"),
    ("rq-qwen3-greedy-endless-repetition",
     {NOTES: "Qwen3-32B with temperature 0 in our eval harness keeps repeating the same paragraph until it "
             "hits the token limit, sometimes the thinking never closes.\n"}, "vllm"),
]


def test_every_finding_in_the_file_has_a_case(shipped):
    ids = {f.id for f in shipped[0] if f.id.startswith("rq-")}
    assert ids == {c[0] for c in CASES}
    assert len(ids) >= 20


@pytest.mark.parametrize("finding_id,files,engine", CASES, ids=[c[0] for c in CASES])
def test_thin_evidence_ranks_the_findings_fix_in_the_top_3(shipped, tmp_path, finding_id, files, engine):
    dx = _diagnose(shipped, tmp_path, files, engine=engine)
    pos = _position(dx, finding_id)
    top = [(r.fix_class, r.rule) for r in dx.recommendations[:5]]
    assert pos is not None and pos <= 3, (finding_id, top)
    rec = dx.recommendations[pos - 1]
    # the recommendation carries the finding's fix class and something to do
    finding = next(f for f in shipped[0] if f.id == finding_id)
    assert rec.fix_class in finding.fix_classes, (rec.fix_class, finding.fix_classes)
    assert rec.flags or rec.commands or rec.env or rec.title


# unrelated or healthy evidence: none of these findings is proposed
QUIET = [
    ({NOTES: "Throughput on our 70B deployment looks as expected after the upgrade; latency percentiles are "
             "flat across the day and the queue never builds up.\n"}, "vllm"),
    ({LAUNCH: "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 8192\n"},
     "vllm"),
    ({LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp-size 2\n"}, "sglang"),
    ({LOG: "INFO 11-20 10:00:01 [config.py:100] Resolved architecture: LlamaForCausalLM\n"
           "INFO 11-20 10:00:09 [gpu_worker.py:300] Available KV cache memory: 31.20 GiB\n"
           "INFO 11-20 10:01:02 [loggers.py:120] Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg "
           "generation throughput: 1650.2 tokens/s, Running: 48 reqs, Waiting: 0 reqs, GPU KV cache usage: "
           "41.0%, Prefix cache hit rate: 12.3%\n"}, "vllm"),
    ({NOTES: "Decode throughput at batch 64 dropped by a third after moving the MoE model from eight H100s "
             "to four; the nvidia-smi power draw is lower too.\n"}, "sglang"),
]


@pytest.mark.parametrize("files,engine", QUIET, ids=[f"quiet-{i}" for i in range(len(QUIET))])
def test_unrelated_evidence_proposes_none_of_them(shipped, tmp_path, files, engine):
    dx = _diagnose(shipped, tmp_path, files, engine=engine)
    assert not _ours(dx), _ours(dx)


# the same complaint with the fix already in the launch: the finding is not proposed again
FIXED = [
    ("rq-reasoning-parser-absent",
     {NOTES: "Serving DeepSeek-R1 on eight GPUs. In every response reasoning_content comes back null and the "
             "whole chain of thought is in the message content.\n",
      LAUNCH: "vllm serve deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8 --reasoning-parser deepseek_r1\n"},
     "vllm"),
    ("rq-vllm-auto-tool-choice-flags",
     {LOG: "ERROR 08-21 11:02:13 [serving.py:180] \"auto\" tool choice requires --enable-auto-tool-choice and "
           "--tool-call-parser to be set\n",
      LAUNCH: "vllm serve Qwen/Qwen3-32B --enable-auto-tool-choice --tool-call-parser hermes\n"}, "vllm"),
    ("rq-no-chat-template-base-model",
     {LOG: "ValueError: Cannot use chat template functions because tokenizer.chat_template is not set and no "
           "template argument was passed!\n",
      LAUNCH: "vllm serve meta-llama/Llama-3.2-1B --chat-template /srv/templates/llama3.jinja\n"}, "vllm"),
    ("rq-thinking-off-server-default",
     {NOTES: "We want to disable thinking for Qwen3.5; enable_thinking false in the body does nothing.\n",
      LAUNCH: "vllm serve Qwen/Qwen3.5-27B-FP8 --reasoning-parser qwen3 "
              "--default-chat-template-kwargs '{\"enable_thinking\": false}'\n"}, "vllm"),
]


@pytest.mark.parametrize("finding_id,files,engine", FIXED, ids=[c[0] for c in FIXED])
def test_a_launch_that_already_has_the_fix_does_not_get_it_again(shipped, tmp_path, finding_id, files, engine):
    dx = _diagnose(shipped, tmp_path, files, engine=engine)
    assert _position(dx, finding_id) is None, [r.rule for r in dx.recommendations[:5]]


def test_the_other_engine_does_not_get_an_engine_specific_finding(shipped, tmp_path):
    # the LoRA rank message is vLLM's; an sglang run with the same words gets no vLLM-only fix
    dx = _diagnose(shipped, tmp_path, {LOG: "LoRA rank 64 is greater than max_lora_rank 16.\n"}, engine="sglang")
    assert _position(dx, "rq-vllm-lora-rank-above-max") is None
