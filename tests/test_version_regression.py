"""KB116 version-regression: a regression between two engine versions stated in the run's
text becomes a pin of the version that worked, written for how the server runs (pip or
the docker image). The prose here is written for these tests."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.run import read_run
from kb.diagnose import diagnose
from kb.rules import registry

RULE = registry.get("KB116")


def _kb116(tmp_path: Path, files: dict[str, str], **opts):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    d = diagnose(read_run(sorted(tmp_path.iterdir()), **opts), [])
    return next((r for r in d.recommendations if r.rule == "KB116 version-regression"), None)


@pytest.mark.parametrize("prose,pin", [
    ("Decode was fine on vLLM 0.10.2, but after upgrading to 0.11.0 it is half as fast.\n", "0.10.2"),
    ("With vllm 0.10.2 we got 40 tok/s per user.\nMoving from 0.10.2 to 0.11.0 the throughput dropped to 22.\n",
     "0.10.2"),
    ("vLLM 0.10.2 -> 0.11.0: the server now crashes at start with an OOM.\n", "0.10.2"),
    ("Our vllm deployment hangs since upgrading 0.10.2 → 0.11.0; downgrading to 0.10.2 fixes it.\n", "0.10.2"),
])
def test_vllm_regression_pins_the_version_that_worked_with_pip(tmp_path, prose, pin):
    rec = _kb116(tmp_path, {"notes.txt": prose})
    assert rec is not None
    assert rec.commands[0] == f'pip install "vllm=={pin}"'
    assert any("release notes after 0.11.0" in n for n in rec.notes)
    assert rec.fix_class == "engine-version" and rec.severity == "moderate"
    assert rec.evidence and rec.evidence[0].where and "notes.txt" in str(rec.evidence[0].where)


def test_sglang_regression_pins_with_sglangs_all_extra(tmp_path):
    rec = _kb116(tmp_path, {"notes.txt": "After upgrading sglang from 0.5.2 to 0.5.8 decode got 30% slower.\n"})
    assert rec.commands[0] == 'pip install "sglang[all]==0.5.2"'
    assert rec.title == "Pin sglang 0.5.2 (regression in 0.5.8)"
    assert any(n.startswith("in docker: lmsysorg/sglang:v0.5.2") for n in rec.notes)


def test_only_the_bad_version_pins_the_nearest_catalogued_release_below_it(tmp_path):
    rec = _kb116(tmp_path, {"notes.txt": "Since vLLM 0.32.0 our decode throughput is much slower.\n"})
    assert rec.commands[0] == 'pip install "vllm==0.31.0"'  # the newest vLLM catalogue below 0.32.0
    assert any("nearest release below 0.32.0" in n for n in rec.notes)


def test_vllm_docker_launch_gets_its_image_rewritten(tmp_path):
    rec = _kb116(tmp_path, {
        "launch.sh": "docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.11.0 --model Qwen/Qwen3-8B "
                     "--max-num-seqs 64\n",
        "notes.txt": "It worked on vLLM 0.10.2; since 0.11.0 the output is garbage.\n"})
    assert rec.commands[0].startswith("docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.10.2 --model")
    assert "--max-num-seqs 64" in rec.commands[0]


@pytest.mark.parametrize("prose", [
    "Since vLLM 0.11.0 decode was slower than on 0.10.2; upgrading to 0.11.1 fixed it.\n",  # a newer version fixed it
    "We moved from vLLM 0.10.2 to 0.11.0 last week and tested the new scheduler.\n",  # no regression word
    "After upgrading sglang from 0.5.2 to 0.5.4 the server crashes at start.\n",  # the other engine's versions
    "With torch 2.7.1 it worked; after upgrading to torch 2.8.0 vllm serve is slower.\n",  # torch, not vLLM
])
def test_quiet_without_a_stated_vllm_regression(tmp_path, prose):
    assert _kb116(tmp_path, {"notes.txt": prose}, engine="vllm") is None


def test_quiet_when_the_run_already_shows_the_version_that_worked(tmp_path):
    files = {"server.log": "INFO 10-14 09:12:01 [api_server.py:1896] vLLM API server version 0.10.2\n",
             "notes.txt": "vLLM 0.10.2 was fine; since 0.11.0 decode is half as fast.\n"}
    assert _kb116(tmp_path, files) is None
    # the same text on a server running the bad version: the pin
    files["server.log"] = "INFO 10-14 09:12:01 [api_server.py:1896] vLLM API server version 0.11.0\n"
    assert _kb116(tmp_path, files).commands[0] == 'pip install "vllm==0.10.2"'


def _kb(*args, cwd):
    env = {**os.environ, "KB_HOME": str(cwd / "kbhome")}
    return subprocess.run([sys.executable, "-m", "kb", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_cli_diagnose_prints_the_pin_and_why_explains_the_rule(tmp_path):
    (tmp_path / "notes.txt").write_text("It worked on vLLM 0.10.2, but since 0.11.0 decode is half as fast.\n")
    out = _kb("diagnose", "notes.txt", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert 'pip install "vllm==0.10.2"' in out.stdout and "KB116 version-regression" in out.stdout
    why = _kb("diagnose", "notes.txt", "--why", "KB116", cwd=tmp_path)
    assert why.returncode == 0, why.stderr
    assert "KB116 (rule)" in why.stdout and "the rule proposed a change" in why.stdout
    assert "recommended at rank 1" in why.stdout


@pytest.mark.parametrize("prose", [
    "With 0.95 it crashes with OOM; with 0.9 it works fine.\n",  # memory fractions, not versions
    "Going from 0.9 to 0.95 gpu memory utilization the server crashes with OOM.\n",
])
def test_numbers_not_written_as_versions_do_not_fire(tmp_path, prose):
    assert _kb116(tmp_path, {"notes.txt": prose}, engine="vllm") is None


@pytest.mark.parametrize("prose,pin", [
    ("Since 0.11 it is slower on vllm.\n", "0.10.1.1"),  # only the bad version: the nearest catalogued release
    ("vLLM 0.10.1.1 was fine; since 0.11.0 prefill fails with an illegal memory access.\n", "0.10.1.1"),
    ("regression in v0.32.0: vllm serve hangs at start\n", "0.31.0"),
    ("Throughput regression between vllm 0.10.2 and 0.11.0 for our vision model.\n", "0.10.2"),
])
def test_vllm_regression_phrasings(tmp_path, prose, pin):
    rec = _kb116(tmp_path, {"notes.txt": prose}, engine="vllm")
    assert rec is not None and rec.commands[0] == f'pip install "vllm=={pin}"'


def test_another_regressions_measured_gain_is_not_this_pins_expected_gain(tmp_path, shipped_records):
    # every engine-version finding is a different bug: the shipped ones are cited for
    # reading, but none of their gains is offered as what this pin will bring
    findings, _ = shipped_records
    (tmp_path / "notes.txt").write_text("It worked on vLLM 0.10.2, but since 0.11.0 decode is half as fast.\n")
    d = diagnose(read_run([tmp_path / "notes.txt"]), findings)
    rec = next(r for r in d.recommendations if r.rule == "KB116 version-regression")
    assert rec.findings, "engine-version findings are still cited"
    assert rec.expected_gain is None and rec.expected_ratio is None
    assert any("their gains are not this fix's" in n for n in rec.notes)


# issue 13: the version that worked, written after the error it avoids (verbatim, KServe thread
# evidence of this session): before, kb pinned the nearest catalogued release and said the text
# named no version that worked
KSERVE = ("KServe huggingfaceserver with the vLLM backend: after bumping vLLM to 0.25.1 in our image the predictor "
          "fails at engine startup:\nModuleNotFoundError: No module named 'vllm.entrypoints.serve.render'\n"
          "After patching the import by hand:\nTypeError: OpenAIServingChat.__init__() missing 1 required "
          "keyword-only argument: 'online_renderer'\nIt works with the pinned vllm 0.24.0.\n")


def test_works_with_the_pinned_version_is_the_good_version(tmp_path):
    rec = _kb116(tmp_path, {"issue.txt": KSERVE})
    assert rec is not None and rec.commands[0] == 'pip install "vllm==0.24.0"'
    assert "0.24.0 worked and 0.25.1 regressed" in rec.rationale
    assert not any("names no version that worked" in n for n in rec.notes)


@pytest.mark.parametrize("prose,pin", [
    ("After upgrading to vllm 0.11.0 decode crashes.\nvllm 0.10.1 works.\n", "0.10.1"),
    ("Since vllm 0.11.0 decode is slower. It was fine on the older vllm 0.10.1.1\n", "0.10.1.1"),
    # the other package's version, or a GPU count, is not the good engine version
    ("After upgrading to vllm 0.11.0 decode crashes.\nIt works with torch 2.8.0.\n", "0.10.1.1"),
    ("After upgrading to vllm 0.11.0 decode crashes.\nvllm works with 2.5 GB free.\n", "0.10.1.1"),
    # the pinned version that itself fails is not the good one
    ("After upgrading to vllm 0.11.0 decode crashes.\nThe pinned vllm 0.10.1 crashes too.\n", "0.10.1.1"),
])
def test_worked_version_phrasings(tmp_path, prose, pin):
    rec = _kb116(tmp_path, {"notes.txt": prose}, engine="vllm")
    assert rec is not None and rec.commands[0] == f'pip install "vllm=={pin}"'


def test_a_worked_version_alone_does_not_fire(tmp_path):
    assert _kb116(tmp_path, {"notes.txt": "It works with the pinned vllm 0.10.1.\n"}, engine="vllm") is None
