"""`kb diagnose` end to end on scenario directories (tests/data/scenarios/*)."""

import json
import shlex

import pytest
from conftest import DATA

from kb.flags import catalog

GLM5 = DATA / "scenarios" / "glm5-rtx-pro-6000"
HEALTHY = DATA / "scenarios" / "healthy-scaling"


@pytest.fixture(scope="module")
def glm5(tmp_path_factory):
    import os
    import subprocess
    import sys

    home = tmp_path_factory.mktemp("kbhome")
    proc = subprocess.run([sys.executable, "-m", "kb", "diagnose", str(GLM5), "--gpu", "8x RTX PRO 6000", "--json"],
                          capture_output=True, text=True, env={**os.environ, "KB_HOME": str(home)}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_seed_scenario_signals(glm5):
    sig = {s["id"]: s for s in glm5["signals"]}
    assert sig["throughput-plateau"]["data"]["knee"] == 128
    assert {"low-single-stream-decode", "running-cap-with-queue", "moe-default-config", "tp-over-pcie"} <= set(sig)
    for s in glm5["signals"]:
        assert s["evidence"] and all(e["text"] for e in s["evidence"])


def test_seed_scenario_ranks_moe_and_running_limits_on_top(glm5):
    top = [r["fix_class"] for r in glm5["recommendations"][:4]]
    assert {"moe-runner-backend", "moe-kernel-config"} & set(top[:2])
    assert {"max-running-requests", "cuda-graph-max-bs"} <= set(top)


def test_seed_scenario_commands_are_right_for_model_and_machine(glm5):
    recs = {r["fix_class"]: r for r in glm5["recommendations"]}
    backend = recs["moe-runner-backend"]
    assert backend["flags"][0]["new"] == "flashinfer_cutlass"
    tune = next(c for c in recs["moe-kernel-config"]["commands"] if "tuning_fused_moe_triton" in c)
    argv = shlex.split(tune.split("  #")[0])
    assert argv[argv.index("--tp-size") + 1] == "8"
    assert argv[argv.index("--model") + 1] == "lukealonso/GLM-5-NVFP4"
    assert "E=257,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition" in tune
    cap = recs["max-running-requests"]["flags"][0]
    assert (cap["flag"], cap["current"], cap["new"]) == ("--max-running-requests", 128, 256)
    graph = recs["cuda-graph-max-bs"]["flags"][0]
    assert graph["flag"] == "--cuda-graph-max-bs" and graph["new"] >= cap["new"]
    # the measured gain cited comes from the finding of the same context
    assert "3.74 k tok/s" in backend["expected_gain"]
    assert backend["findings"][0]["id"] == "glm5-flashinfer-cutlass-moe-sm120"


def test_every_printed_launch_command_is_valid_for_its_version(glm5):
    cat = catalog("sglang", glm5["engine_version"])
    commands = [c for r in glm5["recommendations"] for c in r["commands"]] + [glm5["combined_command"]]
    launches = [c for c in commands if "sglang.launch_server" in c]
    assert launches
    for c in launches:
        for word in shlex.split(c):
            if word.startswith("--"):
                assert cat.check(word) is None, (word, c)


def test_unmeasured_context_says_so(glm5):
    recs = {r["fix_class"]: r for r in glm5["recommendations"]}
    pp = recs["pcie-topology"]  # KB108 files TP4+PP2 over PCIe under the problem class
    assert pp["expected_gain"] is None and any("unmeasured" in n for n in pp["notes"])


def test_healthy_run_has_nothing_above_low(kb):
    out = kb("diagnose", HEALTHY, "--gpu", "1x H100", "--json", check_json=True)
    assert not [r for r in out["recommendations"] if r["severity"] not in ("none", "low")]
    assert not [s for s in out["signals"] if s["severity"] not in ("none", "low")]


def test_text_report_sections(kb):
    proc = kb("diagnose", GLM5, "--gpu", "8x RTX PRO 6000")
    assert proc.returncode == 0, proc.stderr
    for section in ("Files", "Throughput curve", "Signals", "Recommendations", "All changes together"):
        assert section in proc.stdout
    assert "README.md: skipped" in proc.stdout


def test_signals_command_json(kb):
    out = kb("signals", GLM5, "--json", check_json=True)
    assert {s["id"] for s in out["signals"]} >= {"throughput-plateau", "moe-default-config"}


def test_bad_engine_is_usage_error(kb):
    assert kb("diagnose", GLM5, "--engine", "tgi").returncode == 2


def test_missing_path_is_input_error(kb, tmp_path):
    proc = kb("diagnose", tmp_path / "nope")
    assert proc.returncode == 1 and "nope" in proc.stderr and "Traceback" not in proc.stderr


def test_thresholds_override(kb, tmp_path):
    t = tmp_path / "t.toml"
    t.write_text("[throughput-plateau]\nknee_gain = 0.05\n")
    out = kb("signals", GLM5, "--thresholds", t, "--json", check_json=True)
    assert "throughput-plateau" not in {s["id"] for s in out["signals"]}  # +9.2% is above a 5% knee
    t.write_text("[no-such-signal]\nx = 1\n")
    proc = kb("signals", GLM5, "--thresholds", t)
    assert proc.returncode == 1 and "unknown signal" in proc.stderr


def test_ask_with_run_answers_from_this_runs_signals(kb):
    out = kb("ask", "why does throughput plateau at 128 concurrency", "--run", GLM5, "--gpu", "8x RTX PRO 6000",
             "--json", check_json=True)
    assert "throughput-plateau" in {s["id"] for s in out["run"]["signals"]}
    assert out["run"]["recommendations"][0]["commands"]
    top3 = [set(a["fix_classes"]) for a in out["answers"][:3]]
    assert any({"moe-runner-backend", "moe-kernel-config", "max-running-requests"} & fc for fc in top3)


# A benchmark output that names neither the model nor the server's arguments (sglang
# 0.4.6 bench_serving --output-file, no server_info), with the GLM-5 config.json from a
# local directory: the config's name is a label, not a path any server can load.
NO_LAUNCH = DATA / "samples" / "sglang_bench_jsonl" / "run-sglang-0.4.6.post5_sweep_c1-32-128-256.jsonl"


def _launches(out: dict, launcher: str) -> list[str]:
    cmds = [c for r in out["recommendations"] for c in r["commands"]] + [out["combined_command"]]
    return [c for c in cmds if c and launcher in c]


@pytest.mark.parametrize("engine, launcher, placeholder", [
    ("sglang", "sglang.launch_server", "python -m sglang.launch_server --model-path MODEL "),
    ("vllm", "vllm serve", "vllm serve MODEL "),
])
def test_without_a_launch_command_the_model_is_a_marked_placeholder(kb, engine, launcher, placeholder):
    out = kb("diagnose", NO_LAUNCH, "--config", GLM5 / "config.json", "--gpu", "8x RTX PRO 6000",
             "--engine", engine, "--json", check_json=True)
    launches = _launches(out, launcher)
    assert launches, out["recommendations"]
    for c in launches:  # never a server with no model, nor one named after a directory
        assert c.startswith(placeholder), c
        assert c.endswith("  # MODEL: your model; add the rest of your launch command"), c
        assert "glm5-rtx-pro-6000" not in c
    assert any("no launch command known" in w and "MODEL, a placeholder for your model" in w
               for w in out["warnings"]), out["warnings"]
    text = kb("diagnose", NO_LAUNCH, "--config", GLM5 / "config.json", "--gpu", "8x RTX PRO 6000", "--engine", engine)
    assert f"$ {launches[0]}" in text.stdout and "warning: no launch command known" in text.stdout


def test_a_known_model_without_its_arguments_asks_for_the_rest_of_the_command(kb, tmp_path):
    """The model is named (bench_serving's `model`), its launch arguments are not: the
    command keeps the model and says the rest of the launch command goes with it."""
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps({**json.loads(line), "model": "zai-org/GLM-5"}) + "\n"
                             for line in NO_LAUNCH.read_text().splitlines()))
    out = kb("diagnose", bench, "--config", GLM5 / "config.json", "--gpu", "8x RTX PRO 6000", "--json",
             check_json=True)
    launches = _launches(out, "sglang.launch_server")
    assert launches
    for c in launches:
        assert c.startswith("python -m sglang.launch_server --model-path zai-org/GLM-5 "), c
        assert c.endswith("  # add the rest of your launch command"), c


def test_a_full_launch_command_is_printed_whole_and_unmarked(glm5):
    launches = _launches(glm5, "sglang.launch_server")
    assert launches and not any("#" in c for c in launches), launches
    assert not any("no launch command known" in w for w in glm5["warnings"])
