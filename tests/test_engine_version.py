"""kb.engineversion: the engine version a run's text shows, and version-range conditions on it."""

import pytest

from kb.conditions import parse
from kb.engineversion import NIGHTLY, version_in
from kb.evidence import RunEvidence
from kb.flagdata import version_key
from kb.match import Facts, check
from kb.records import Condition


@pytest.mark.parametrize("text, want", [
    # vLLM's start-up line (format of vllm/entrypoints/openai/api_server.py)
    ("(APIServer pid=1) INFO 10-14 07:45:02 [api_server.py:1839] vLLM API server version 0.11.0", ("vllm", "0.11.0")),
    ("pip freeze | grep vllm\nvllm==0.10.2", ("vllm", "0.10.2")),
    ("uv pip install vllm==0.11.0 --torch-backend=auto", ("vllm", "0.11.0")),
    ("sglang: 0.5.4.post1", ("sglang", "0.5.4.post1")),  # python -m sglang.check_env
    ("docker run --gpus all vllm/vllm-openai:v0.11.0 --model Qwen/Qwen3-8B", ("vllm", "0.11.0")),
    ("docker run --gpus all lmsysorg/sglang:v0.5.4.post1-cu129 python3 -m sglang.launch_server",
     ("sglang", "0.5.4.post1")),
    ("image: lmsysorg/sglang:dev", ("sglang", NIGHTLY)),
    ("docker pull vllm/vllm-openai:nightly", ("vllm", NIGHTLY)),
    ("On vLLM v0.12.0 the decode speed halved.", ("vllm", "0.12.0")),
    ("I tried the vllm nightly and it is fixed", ("vllm", NIGHTLY)),
    ("Since upgrading vLLM to v0.23.0 throughput is lower", ("vllm", "0.23.0")),
    ("vllm 0.11.1.dev12+g1234abcd", ("vllm", "0.11.1")),  # a wheel from main before 0.11.1
    # an upgrade told in prose: the run is on the version upgraded to, not the first one named
    ("Since we moved from vLLM 0.19 to 0.24 the KV cache holds a third of the tokens", ("vllm", "0.24")),
    ("upgraded vllm from 0.10.1 to v0.11.0 and TTFT doubled", ("vllm", "0.11.0")),
    ("sglang 0.5.8 -> 0.5.9 made decode slower", ("sglang", "0.5.9")),
])
def test_version_in_reads_each_form(text, want):
    assert version_in(text) == want


@pytest.mark.parametrize("text", [
    'pip install -U "vllm>=0.11.0"',  # a requirement, not what is installed
    "throughput v0.23.0 vs v0.24.0",  # no engine named
    "rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909",  # ROCm images number their own releases
    "the sglang router listens on port 30000",
])
def test_version_in_reads_no_version(text):
    assert version_in(text) is None


def test_version_in_keeps_to_the_engine_asked():
    text = "vllm==0.11.0 and sglang==0.5.4"
    assert version_in(text, "sglang") == ("sglang", "0.5.4")
    assert version_in(text, "vllm") == ("vllm", "0.11.0")


def test_nightly_orders_after_every_release():
    assert version_key(NIGHTLY) > version_key("99.9.9")


def _engine_check(value: str, version: str | None) -> str:
    ev = RunEvidence(engine="vllm", engine_version=version)
    return check(Condition(key="engine", value=value), Facts.of(ev, "vllm", None, [])).state


def test_version_range_condition_holds_fails_or_is_unknown():
    parse("engine", "vllm >=0.24.0,<0.27.0")
    assert _engine_check("vllm >=0.24.0,<0.27.0", "0.25.1") == "held"
    assert _engine_check("vllm >=0.24.0,<0.27.0", "0.23.0") == "failed"
    assert _engine_check("vllm >=0.24.0,<0.27.0", "0.27.0") == "failed"
    assert _engine_check("vllm >=0.24.0,<0.27.0", None) == "unknown"
    # a build from main carries every released fix: "regressed before 0.27" does not hold for it
    assert _engine_check("vllm >=0.24.0,<0.27.0", NIGHTLY) == "failed"
    assert _engine_check("vllm >=0.27.0", NIGHTLY) == "held"


def test_run_reads_the_version_of_a_docker_launch(tmp_path):
    from ingest.run import read_run

    (tmp_path / "launch.sh").write_text(
        "docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.11.0 --model Qwen/Qwen3-8B --max-num-seqs 128\n")
    ev = read_run([tmp_path])
    assert (ev.engine, ev.engine_version) == ("vllm", "0.11.0")


def test_run_reads_the_version_prose_names(tmp_path):
    from ingest.run import read_run

    (tmp_path / "notes.txt").write_text("After moving to the vLLM nightly image the regression is gone.\n"
                                        "vllm serve Qwen/Qwen3-8B --max-num-seqs 64\n")
    ev = read_run([tmp_path])
    assert (ev.engine, ev.engine_version) == ("vllm", NIGHTLY)


def test_collect_env_version_line():
    # vLLM's collect_env.py line, as pasted in issue reports
    assert version_in("vLLM Version                 : 0.28.1rc1.dev580+g385dce36b (git sha: 385dce36b)") == (
        "vllm", "0.28.1rc1")


# ---------------------------------------------------------------- shipped findings as rules

@pytest.fixture(scope="module")
def shipped():
    from ingest.markdown import read_findings
    from kb.store import findings_files, shipped_findings_dir

    return [f for p in findings_files(shipped_findings_dir()) for f in read_findings(p)]


BITMASK = "ev-vllm-024-structured-output-bitmask"
FUSION = "ev-vllm-0250-nvfp4-allreduce-rmsnorm-fusion"
GARBLED = ("docker run --gpus all vllm/vllm-openai:{tag} --model nvidia/Qwen3-30B-A3B-NVFP4 --tensor-parallel-size 2\n"
           "Every answer is just !!!!!!!!!!!!!!!! with the NVFP4 checkpoint.\n")


def test_a_patch_release_fix_is_proposed_in_its_range_and_not_on_nightly(shipped, tmp_path):
    from ingest.run import read_run
    from kb.diagnose import diagnose, why

    (tmp_path / "issue.txt").write_text(GARBLED.format(tag="v0.25.0"))
    ev = read_run([tmp_path / "issue.txt"])
    assert ev.engine_version == "0.25.0"
    dx = diagnose(ev, shipped)
    rec = next(r for r in dx.recommendations if r.rule == f"finding {FUSION}")
    assert 'pip install -U "vllm>=0.25.1"' in rec.commands
    (tmp_path / "issue.txt").write_text(GARBLED.format(tag="nightly"))
    dx = diagnose(read_run([tmp_path / "issue.txt"]), shipped)
    assert all(r.rule != f"finding {FUSION}" for r in dx.recommendations)
    checks = {c["condition"]: c["state"] for c in why(dx, FUSION)["checks"]}
    assert checks["engine: vllm >=0.25.0,<0.25.1"] == "failed"


def test_the_version_range_decides_the_engine_version_finding(shipped, tmp_path):
    from ingest.run import read_run
    from kb.diagnose import diagnose, why

    text = ("vllm==0.25.1\nOur json_schema requests (xgrammar) run at half the throughput they had; "
            "plain completions are unchanged.\n")
    (tmp_path / "issue.txt").write_text(text)
    dx = diagnose(read_run([tmp_path / "issue.txt"]), shipped)
    top = dx.recommendations[0]
    assert top.rule == f"finding {BITMASK}"
    assert any('pip install "vllm==0.23.0"' in c for c in top.commands)
    assert {c["condition"]: c["state"] for c in why(dx, BITMASK)["checks"]}["engine: vllm >=0.24.0"] == "held"

    (tmp_path / "issue.txt").write_text(text.replace("vllm==0.25.1", "vllm==0.23.0"))
    dx = diagnose(read_run([tmp_path / "issue.txt"]), shipped)
    assert all(r.rule != f"finding {BITMASK}" for r in dx.recommendations)
    assert {c["condition"]: c["state"] for c in why(dx, BITMASK)["checks"]}["engine: vllm >=0.24.0"] == "failed"
