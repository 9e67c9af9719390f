"""An attention backend known to be slow or refused on an architecture (issue 13, item 3):
vLLM's log names the backend it chose, kb reads that as the run's attention backend, and the
findings in findings/attention-backend-arch.md apply through their conditions. Evidence is
verbatim text from the public threads named at each sample."""

import pytest

from ingest.markdown import read_findings
from ingest.run import read_run
from ingest.vllm_log import VllmLog
from kb.diagnose import diagnose, why
from kb.store import findings_files, shipped_findings_dir


def chosen_backend(lines: list[str]) -> str | None:
    p = VllmLog("test.log")
    for i, line in enumerate(lines, 1):
        p.feed(i, line)
    traces = p.results()
    return traces[0].startup.get("attention_backend") if traces else None


@pytest.mark.parametrize("lines,backend", [
    # vllm-project/vllm issue 40153 (auto-selected, vLLM >= 0.11 wording)
    (["INFO ... Using TRITON_ATTN attention backend out of potential backends: ['TRITON_ATTN']."], "TRITON_ATTN"),
    # vllm-project/vllm issue 56564
    (["Using FLASHINFER_MLA_SPARSE_SM90 attention backend out of potential backends: "
      "['FLASHINFER_MLA_SPARSE_SM90', 'FLASH_ATTN_MLA_SPARSE']"], "FLASHINFER_MLA_SPARSE_SM90"),
    # vllm-project/vllm issue 40677 (chosen with --attention-backend)
    (["Using AttentionBackendEnum.FLASHINFER backend.",
      "ValueError: Selected backend AttentionBackendEnum.FLASHINFER is not valid for this configuration. "
      "Reason: ['head_size not supported']"], "FLASHINFER"),
    # vllm-project/vllm PR 24577 (V0-era wording; the first line names a backend it did NOT use)
    (["INFO 09-10 13:32:59 [cuda.py:417] Cannot use FlashAttention backend for FP8 KV cache.",
      "INFO 09-10 13:32:59 [cuda.py:429] Using XFormers backend."], "XFORMERS"),
])
def test_vllm_log_names_the_attention_backend(lines, backend):
    assert chosen_backend(lines) == backend


def test_other_backend_lines_are_not_the_attention_backend():
    # vLLM's MLA prefill, MoE and GEMM kernel lines also say "Using ... backend"
    lines = ["INFO [mla_attention.py:1] Using FLASH_ATTN MLA prefill backend.",
             "INFO [fused_moe.py:1] Using Marlin backend",
             "INFO [fp8.py:1] Using 'MARLIN' WNA16 MoE backend."]
    assert chosen_backend(lines) is None


@pytest.fixture(scope="module")
def shipped():
    return [f for p in findings_files(shipped_findings_dir()) for f in read_findings(p)]


# vllm-project/vllm issue 56564, its environment and summary lines as posted
GLM53_ISSUE = """\
GPU                          : 8x NVIDIA H100 80GB HBM3 (single node, TP=8)
vLLM Version                 : 0.28.1rc1.dev580+g385dce36b (git sha: 385dce36b)

**Summary:** For `zai-org/GLM-5.3-Flash` on H100 the auto-selected sparse-MLA attention backend is \
`FLASHINFER_MLA_SPARSE_SM90` (log: `Using FLASHINFER_MLA_SPARSE_SM90 attention backend out of potential \
backends: ['FLASHINFER_MLA_SPARSE_SM90', 'FLASH_ATTN_MLA_SPARSE']`).
"""
GLM53 = "attn-vllm-glm53-flash-h100-sparse-mla"


def test_auto_selected_slow_backend_gets_the_fix_first(shipped, tmp_path):
    (tmp_path / "issue.txt").write_text(GLM53_ISSUE)
    dx = diagnose(read_run([tmp_path / "issue.txt"]), shipped)
    top = dx.recommendations[0]
    assert top.rule == f"finding {GLM53}" and top.basis == "symptom"
    assert [(f.flag, f.new) for f in top.flags] == [("--attention-backend", "FLASH_ATTN_MLA_SPARSE")]
    checks = {c["condition"]: c["state"] for c in why(dx, GLM53)["checks"]}
    assert checks["gpu arch: SM90"] == "held"
    assert checks["setting: attention-backend != FLASH_ATTN_MLA_SPARSE"] == "held"


def test_already_on_the_fast_backend_excludes_the_finding(shipped, tmp_path):
    # the same paste, but the server chose the fast backend (vLLM's own wording)
    text = GLM53_ISSUE.replace("Using FLASHINFER_MLA_SPARSE_SM90 attention backend",
                               "Using FLASH_ATTN_MLA_SPARSE attention backend")
    (tmp_path / "issue.txt").write_text(text)
    dx = diagnose(read_run([tmp_path / "issue.txt"]), shipped)
    assert not any(r.rule == f"finding {GLM53}" for r in dx.recommendations)
    assert why(dx, GLM53)["verdict"].startswith("excluded: setting: attention-backend != FLASH_ATTN_MLA_SPARSE")


def test_same_backend_on_blackwell_is_not_this_finding(shipped, tmp_path):
    (tmp_path / "issue.txt").write_text(GLM53_ISSUE.replace("8x NVIDIA H100 80GB HBM3", "8x NVIDIA B200"))
    dx = diagnose(read_run([tmp_path / "issue.txt"]), shipped)
    assert not any(r.rule == f"finding {GLM53}" for r in dx.recommendations)


# sgl-project/sglang issue 12360, its error and environment lines as posted
SGLANG_FA3_B200 = """\
Specifically on the B200, the Qwen3-VL models throw the following error when using the fa3 attention backend:
```ValueError: The 'fa3' backend is not supported on Blackwell GPUs```
Strangely, this works fine on the RTX PRO 6000 which is also Blackwell.

python3 -m sglang.launch_server \\
    --model-path Qwen/Qwen3-VL-4B-Instruct \\
    --host 0.0.0.0 \\
    --port 8000

GPU 0: NVIDIA B200
GPU 0 Compute Capability: 10.0
"""


def test_sglang_vision_fa3_on_b200_gets_a_backend_that_runs_there(shipped, tmp_path):
    (tmp_path / "issue.txt").write_text(SGLANG_FA3_B200)
    dx = diagnose(read_run([tmp_path / "issue.txt"]), shipped)
    fid = "attn-sglang-vit-fa3-refused-sm100"
    rec = next(r for r in dx.recommendations if r.rule == f"finding {fid}")
    assert dx.recommendations.index(rec) < 3 and rec.basis == "symptom"
    assert ("--mm-attention-backend", "triton_attn") in [(f.flag, f.new) for f in rec.flags]


def test_forced_slow_backend_in_a_launch_alone_is_a_low_context_check(shipped, tmp_path):
    # no log, no symptom: a launch that forces FlashMLA on Hopper is a reminder, ranked as context
    (tmp_path / "notes.txt").write_text(
        "vllm serve deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8 --attention-backend FLASHMLA\n\n"
        "GPU: 8x NVIDIA H200\n")
    dx = diagnose(read_run([tmp_path / "notes.txt"]), shipped)
    rec = next(r for r in dx.recommendations if r.rule == "finding attn-vllm-hopper-flashmla-vs-fa-mla")
    assert rec.basis == "context" and rec.severity == "low"
    assert any(f.flag == "--attention-backend" for f in rec.flags)
    # the same launch on Blackwell is not this finding's setup
    (tmp_path / "notes.txt").write_text(
        "vllm serve deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8 --attention-backend FLASHMLA\n\n"
        "GPU: 8x NVIDIA B200\n")
    dx = diagnose(read_run([tmp_path / "notes.txt"]), shipped)
    assert not any(r.rule == "finding attn-vllm-hopper-flashmla-vs-fa-mla" for r in dx.recommendations)
