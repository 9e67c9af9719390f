"""A finding's fix given as an environment variable (`VLLM_DISABLED_KERNELS=...`) is an
env change on the printed launch command, checked against what the run's version reads."""

from __future__ import annotations

import shlex

import pytest

from ingest.markdown import read_findings
from ingest.run import read_run
from kb.diagnose import diagnose
from kb.fixflags import env_for_version, env_names, env_of
from kb.records import Finding
from kb.store import findings_files, shipped_findings_dir


@pytest.fixture(scope="module")
def shipped():
    return {f.id: f for p in findings_files(shipped_findings_dir()) for f in read_findings(p)}


def test_generated_lists_hold_what_the_engines_read():
    vllm, sglang = env_names("vllm", "0.32.0"), env_names("sglang", "0.5.23")
    assert "VLLM_DISABLED_KERNELS" in vllm and "VLLM_SERVER_DEV_MODE" in vllm
    assert "SGLANG_FORCE_STREAM_INTERVAL" in sglang
    assert "VLLM_ATTENTION_BACKEND" not in vllm  # gone in 0.32: --attention-backend replaced it
    assert env_names("vllm", "0.11.0") is None  # no list for that version: nothing is checked


def test_shipped_fixes_become_env_changes(shipped):
    env, notes = env_for_version(shipped["sgl-nonstream-ttft-metric-bias"], "sglang", "0.5.23")
    assert env == {"SGLANG_FORCE_STREAM_INTERVAL": "1"} and notes == []
    env, _ = env_for_version(shipped["sc-vllm-sleep-mode-switching"], "vllm", "0.32.0")
    assert env == {"VLLM_SERVER_DEV_MODE": "1"}
    env, notes = env_for_version(shipped["hw-mi300x-aiter-attention-backend"], "vllm", "0.32.0")
    assert env["VLLM_ROCM_USE_AITER"] == "1" and env["NCCL_MIN_NCHANNELS"] == "112"  # runtime vars kept unchecked


def test_variable_the_version_does_not_read_is_left_out_and_said(shipped):
    f = shipped["hw-gpt-oss-hopper-mxfp4-marlin"]
    env, notes = env_for_version(f, "vllm", "0.32.0")
    assert env == {} and any("VLLM_MXFP4_USE_MARLIN is not read by vllm 0.32.0" in n for n in notes)
    env, notes = env_for_version(f, "vllm", "0.11.0")  # unlisted version: proposed as the fix says
    assert env == {"VLLM_MXFP4_USE_MARLIN": "1"}
    env, notes = env_for_version(shipped["amd-quick-reduce-int4"], "vllm", "0.32.0")
    assert env == {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "INT4"}  # the sglang spelling is not vLLM's
    assert any("ROCM_QUICK_REDUCE_QUANTIZATION is not read by vllm 0.32.0" in n for n in notes)


def test_other_engines_variable_is_not_proposed(shipped):
    env, notes = env_for_version(shipped["sc-yarn-context-extension"], "vllm", "0.32.0")
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" not in env
    assert any("is a sglang variable, not read by vllm" in n for n in notes)


def test_remove_unsets(shipped):
    env, notes = env_for_version(shipped["kv26-vllm-flashmla-hopper"], "vllm", "0.32.0")
    assert env == {"VLLM_ATTENTION_BACKEND": None} and any("unset VLLM_ATTENTION_BACKEND" in n for n in notes)


def test_examples_caveats_and_diagnostics_are_not_proposed(shipped):
    env, notes = env_of(shipped["amd-aiter-component-flags"])  # "(for example `A=0` or `B=0`)"
    assert env == {} and sum("as an example" in n for n in notes) == 2
    env, notes = env_of(shipped["m26-dsv32-deepgemm-required"])  # "try `VLLM_USE_DEEP_GEMM=0` only to ..."
    assert env == {} and any("VLLM_USE_DEEP_GEMM=0 only to shorten warm-up" in n for n in notes)
    env, notes = env_of(shipped["par-multinode-gdrdma-check"])
    assert "NCCL_DEBUG" not in env and any("NCCL_DEBUG=TRACE" in n for n in notes)


def test_launch_command_only_variables_are_the_deployments_own(shipped):
    f = shipped["sc-gaudi-long-context-buckets"]
    assert any("VLLM_DECODE_BLOCK_BUCKET_PAD_PERCENT=10" in c for c in f.commands)
    assert set(env_of(f)[0]) == {"VLLM_BUCKETING_STRATEGY"}


def test_two_values_for_one_variable_set_neither():
    f = Finding(id="fx-env-both", title="V1 engine", confidence="low", fix_classes=["engine-version"],
                fix="on 0.8 releases set `VLLM_USE_V1=0`; on later ones `VLLM_USE_V1=1` with `NCCL_MIN_NCHANNELS=16`")
    env, notes = env_of(f)
    assert env == {"NCCL_MIN_NCHANNELS": "16"}
    assert any("VLLM_USE_V1=0 and VLLM_USE_V1=1" in n and "set it by hand" in n for n in notes)


def test_credentials_are_never_proposed():
    f = Finding(id="fx-env-token", title="gated model", confidence="low", fix_classes=["model-loading"],
                fix="export `HF_TOKEN=hf_abc` and `HF_HUB_ENABLE_HF_TRANSFER=1`")
    assert env_of(f)[0] == {"HF_HUB_ENABLE_HF_TRANSFER": "1"}


def test_diagnose_prints_the_env_change_quoted(tmp_path, shipped):
    log = tmp_path / "server.log"
    log.write_text("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasLtMatmul`\n")
    ev = read_run([log], gpu="RTX 5090", engine="vllm",
                  launch="VLLM_CACHE_ROOT='/srv/vllm cache' vllm serve RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8")
    d = diagnose(ev, list(shipped.values()))
    rec = next(r for r in d.recommendations if r.rule == "finding sm-sm12x-fp8-bmm-cudnn-stalls")
    assert rec.env == {"VLLM_DISABLED_KERNELS": "FlashInferFP8ScaledMMLinearKernel"}
    for line in (rec.commands[0], d.combined):  # the finding alone changes no flag: the env change is the fix
        assert shlex.split(line)[:3] == ["VLLM_CACHE_ROOT=/srv/vllm cache",
                                         "VLLM_DISABLED_KERNELS=FlashInferFP8ScaledMMLinearKernel", "vllm"]


def test_diagnose_unsets_a_removed_variable(tmp_path, shipped):
    notes = tmp_path / "notes.txt"
    notes.write_text("DeepSeek-R1 on 8x H200 with vLLM: decode is slower than expected; the log says "
                     "Using TRITON_MLA backend.\n")
    ev = read_run([notes], gpu="H200", engine="vllm",
                  launch="VLLM_ATTENTION_BACKEND=TRITON_MLA HF_HOME='/data/my hf' vllm serve deepseek-ai/DeepSeek-R1 "
                         "-tp 8")
    d = diagnose(ev, list(shipped.values()))
    rec = next(r for r in d.recommendations if r.rule == "finding kv26-vllm-flashmla-hopper")
    assert rec.env == {"VLLM_ATTENTION_BACKEND": None}
    words = shlex.split(rec.commands[0])
    assert words[0] == "HF_HOME=/data/my hf" and not any(w.startswith("VLLM_ATTENTION_BACKEND") for w in words)
    assert "VLLM_ATTENTION_BACKEND" not in d.combined
