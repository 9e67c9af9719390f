"""The platform a run executes on (cuda, rocm, npu, xpu, hpu, tpu, cpu) is a fact, and a
finding about another platform is excluded however close its words are (issue 13): an
Ascend NPU graph-capture finding is not advice for an RTX 5090, a ROCm image finding is not
advice for a gsm8k failure on NVIDIA nodes. An unknown platform never excludes. A CUDA
runtime message with an environment fix ("no kernel image is available") is not bound to
the engine it was first reported on."""

from __future__ import annotations

import pytest
from thin_evidence import LOG, NOTES, diagnose_files, position

from kb.conditions import engine_generic, finding_platform, infer, parse
from kb.diagnose import why
from kb.evidence import RunEvidence
from kb.hardware import gpu_platform, platforms_named
from kb.match import Facts, check
from kb.records import Condition, Finding

ASCEND = "s2b-ascend-npu-graph-capture-eager"
ROCM_IMAGE = "s2b-rocm630-image-old-aiter-grok-accuracy"
NO_KERNEL_IMAGE = "hw-rtx5090-sm120-no-kernel-image"

# user paragraphs and pasted lines as posted (sglang issue 7249, RLinf issue 92, sglang issue 12819)
SGLANG_5090 = ("RTX 5090 with sglang built from source: startup dies in CUDA graph init with\n"
               "RMSNorm failed with error code no kernel image is available for execution on the device\n")
RLINF_5090 = ('RTX 5090, sglang worker, during "Capturing batches (bs=64 avail_mem=11.08 GB)" the scheduler '
              "crashes:\nsubprocess.CalledProcessError: Command '/opt/conda/lib/python3.11/site-packages/triton/"
              "backends/nvidia/bin/ptxas -lineinfo -v --gpu-name=sm_120 /tmp/tmpb85wo12z.ptx -o "
              "/tmp/tmpb85wo12z.ptx.o 2> /tmp/tmp9opzz4lr.log' returned non-zero exit status 255.\n")
GROK_MI300X = ("Grok-2.5 (xai-org/grok-2) on MI300X with the rocm/sgl-dev v0.5.4.post2-rocm630-mi30x image: the "
               "server runs but gsm8k gives\nAccuracy: 0.000\nInvalid: 1.000\nOutput throughput: 8420.568 token/s\n")



def _check(dx, fid: str, key: str) -> tuple[str, str]:
    c = next(c for c in why(dx, fid)["checks"] if c["condition"].startswith(f"{key}:"))
    return c["state"], c["detail"]


# ------------------------------------------------------------------ the run's platform


@pytest.mark.parametrize("text, platform", [
    (SGLANG_5090, "cuda"),  # a GPU name
    ("the scheduler crashes when ptxas runs with --gpu-name=sm_120", "cuda"),  # an sm_ arch, no GPU name
    ("Our AMD EPYC 9654 host with 8x H100 SXM", "cuda"),  # an AMD CPU is not an AMD GPU
    ("docker run rocm/vllm:latest serve Qwen/Qwen3-8B", "rocm"),  # an image
    ("gfx942, ROCm 7.1.1, HIP graphs on", "rocm"),
    ("quay.io/ascend/vllm-ascend:v0.11.0rc0 on Atlas 800I A2 with torch_npu and CANN 8.2", "npu"),
    ("Intel Arc B580 with oneAPI 2025.1, vLLM XPU build", "xpu"),
    ("vllm-gaudi on Gaudi 3, hl-smi shows 8 cards", "hpu"),
    ("vLLM on a TPU v6e-8 pod with libtpu", "tpu"),
    ("vllm serve Qwen/Qwen3-0.6B --device cpu", "cpu"),
])
def test_the_run_platform_is_read_from_its_words(tmp_path, text, platform):
    from ingest.run import read_run

    p = tmp_path / "notes.txt"
    p.write_text(text + "\n")
    ev = read_run([p], engine="vllm")
    assert Facts.of(ev, "vllm", None, []).platform[0] == platform


@pytest.mark.parametrize("text", [
    "gsm8k Accuracy: 0.000 after the upgrade, nothing else changed",  # no platform words at all
    "CUDA graph capture fails with --disable-cuda-graph unset",  # CUDA words are not a platform: NPUs print them
    "It works on H100 but on MI300X it crashes at start-up",  # two platforms: a comparison, unknown
    "the relationship between chunked prefill and TTFT; we shipped the CPU offload",  # hip/cpu inside other words
])
def test_no_platform_or_several_leave_it_unknown(tmp_path, text):
    from ingest.run import read_run

    p = tmp_path / "notes.txt"
    p.write_text(text + "\n")
    ev = read_run([p], engine="sglang")
    platform, said = Facts.of(ev, "sglang", None, []).platform
    assert platform is None, said
    assert check(Condition(key="platform", value="rocm"), Facts.of(ev, "sglang", None, [])).state == "unknown"


def test_stated_gpus_decide_before_words():
    ev = RunEvidence(engine="sglang", text_context={})
    from kb.records import Hardware

    ev.hardware = Hardware(gpu="MI300X", count=8, arch="gfx942")
    facts = Facts.of(ev, "sglang", None, [])
    assert facts.platform[0] == "rocm"
    assert check(Condition(key="platform", value="rocm"), facts).state == "held"
    assert check(Condition(key="platform", value="cuda, npu"), facts).state == "failed"


def test_gpu_names_map_to_platforms():
    assert [gpu_platform(g) for g in ("RTX 5090", "MI355X", "Ascend 910B", "Gaudi 3", "Arc B580", "TPU v5e",
                                      "no such card")] == ["cuda", "rocm", "npu", "hpu", "xpu", "tpu", None]
    assert platforms_named("plain prose about batch sizes") == set()


# ------------------------------------------------------------------ the finding's platform


def test_platform_condition_parses_and_rejects_unknown_names():
    assert parse("platform", "ROCm, Ascend").names == ("rocm", "npu")
    with pytest.raises(ValueError, match="platform: expected cuda, rocm, npu"):
        parse("platform", "quantum")


def _finding(**kw) -> Finding:
    base = dict(id="fx", title="t", fix="f", fix_classes=["eager-mode"], confidence="low")
    return Finding(**{**base, **kw})


def test_finding_platform_from_written_gpus_or_its_own_words():
    assert finding_platform(_finding(applies_when=[Condition(key="gpu arch", value="SM120")])) == "cuda"
    assert finding_platform(_finding(applies_when=[Condition(key="gpu", value="H100, MI300X")])) is None
    assert finding_platform(_finding(title="vllm-ascend: NPU graph replay crashes")) == "npu"
    assert finding_platform(_finding(title="AITER fused MoE on MI355X")) == "rocm"
    # measured on an NVIDIA GPU is not "only on CUDA": most findings are written for any GPU
    from kb.records import Context

    assert finding_platform(_finding(title="chunked prefill 8192 halves TTFT", context=Context(gpu="H100"))) is None
    # a written platform is not inferred again
    f = _finding(title="ROCm only", applies_when=[Condition(key="platform", value="rocm")])
    assert not [c for c in infer(f) if c.key == "platform"]


# ------------------------------------------------------------------ diagnoses on the evidence


def test_ascend_finding_is_excluded_on_an_rtx_5090_graph_capture_log(shipped, tmp_path):
    dx = diagnose_files(shipped, tmp_path, {NOTES: RLINF_5090}, engine="sglang")
    assert position(dx, ASCEND) is None
    state, detail = _check(dx, ASCEND, "platform")
    assert state == "failed" and "platform cuda" in detail
    assert "platform: npu" in why(dx, ASCEND)["verdict"]


def test_ascend_finding_is_excluded_when_only_the_arch_says_cuda(shipped, tmp_path):
    """No GPU name to fail the finding's gpu condition: the sm_120 target alone tells the platform."""
    log = ("Exception: Capture cuda graph failed: ptxas --gpu-name=sm_120 returned non-zero exit status 255\n"
           "Possible solutions: disable cuda graph by --disable-cuda-graph\n")
    dx = diagnose_files(shipped, tmp_path, {LOG: log}, engine="sglang")
    assert _check(dx, ASCEND, "gpu")[0] == "unknown"
    assert _check(dx, ASCEND, "platform")[0] == "failed"
    assert position(dx, ASCEND) is None


def test_ascend_finding_still_holds_on_an_ascend_run(shipped, tmp_path):
    notes = ("sglang on Atlas 800I A2 (910B) with torch_npu: it fails while capturing the npu graph, "
             "AclmdlRICaptureEnd(capture_stream_, &model_ri), error code is 107033\n")
    dx = diagnose_files(shipped, tmp_path, {NOTES: notes}, engine="sglang")
    assert _check(dx, ASCEND, "platform")[0] == "held"
    assert position(dx, ASCEND) is not None and position(dx, ASCEND) <= 3


def test_rocm_image_finding_is_excluded_on_nvidia_accuracy_prose(shipped, tmp_path):
    notes = ("After moving our sglang deployment to the new image on the NVIDIA nodes (CUDA 12.8, driver 570), "
             "Grok-2 answers are garbage: the gsm8k check prints\nAccuracy: 0.000\nInvalid: 1.000\n")
    dx = diagnose_files(shipped, tmp_path, {NOTES: notes}, engine="sglang")
    assert _check(dx, ROCM_IMAGE, "platform")[0] == "failed"
    assert position(dx, ROCM_IMAGE) is None


def test_rocm_image_finding_competes_when_the_platform_is_unknown(shipped, tmp_path):
    notes = "Grok-2 with sglang: the gsm8k check prints\nAccuracy: 0.000\nInvalid: 1.000\n"
    dx = diagnose_files(shipped, tmp_path, {NOTES: notes}, engine="sglang")
    assert _check(dx, ROCM_IMAGE, "platform")[0] == "unknown"
    assert not why(dx, ROCM_IMAGE)["verdict"].startswith("excluded")


def test_rocm_image_finding_holds_on_the_mi300x_report(shipped, tmp_path):
    dx = diagnose_files(shipped, tmp_path, {NOTES: GROK_MI300X}, engine="sglang")
    assert _check(dx, ROCM_IMAGE, "platform")[0] == "held"
    assert position(dx, ROCM_IMAGE) == 1


# ------------------------------------------------------------------ problem 3: engine-generic messages


def test_no_kernel_image_finding_is_not_bound_to_vllm(shipped, tmp_path):
    """sglang issue 7249 prints the CUDA runtime's message that vLLM issue 16901 printed: the
    finding (reported on vLLM) is the answer for sglang too."""
    f = next(f for f in shipped[0] if f.id == NO_KERNEL_IMAGE)
    assert f.context.engine == "vllm" and engine_generic(f)
    assert not [c for c in infer(f) if c.key == "engine"]
    dx = diagnose_files(shipped, tmp_path, {NOTES: SGLANG_5090}, engine="sglang")
    assert position(dx, NO_KERNEL_IMAGE) == 1
    assert _check(dx, NO_KERNEL_IMAGE, "platform")[0] == "held"


def test_an_engine_kernel_crash_stays_engine_bound():
    """"CUDA error: an illegal memory access" from an engine's own kernel is fixed in the
    engine (a backend, a version), not the environment: the engine condition stays."""
    f = _finding(symptoms=['sglang crashes with "CUDA error: an illegal memory access was encountered"'],
                 fix_classes=["moe-runner-backend"], context={"engine": "sglang"})
    assert not engine_generic(f)
    assert [c.value for c in infer(f) if c.key == "engine"] == ["sglang"]


def test_the_other_engines_install_line_is_left_out(shipped, tmp_path):
    """The engine-generic finding keeps its arch check on sglang but not vLLM's install line."""
    dx = diagnose_files(shipped, tmp_path, {NOTES: SGLANG_5090}, engine="sglang")
    rec = dx.recommendations[position(dx, NO_KERNEL_IMAGE) - 1]
    assert any("get_arch_list" in c for c in rec.commands)
    assert not any("install vllm" in c for c in rec.commands)
    assert any("this run is sglang" in n for n in rec.notes)
    dx = diagnose_files(shipped, tmp_path, {NOTES: SGLANG_5090.replace("sglang", "vLLM")}, engine="vllm")
    rec = dx.recommendations[position(dx, NO_KERNEL_IMAGE) - 1]
    assert any("install vllm" in c for c in rec.commands)
