"""The per-version flag catalogs (generated from the engines' own parsers)."""

import pytest

from kb.flags import catalog, versions


def test_catalogs_cover_several_versions_of_both_engines():
    assert {"0.4.10.post2", "0.5.8", "0.5.23"} <= set(versions("sglang"))
    assert {"0.10.1.1", "0.11.0", "0.32.0"} <= set(versions("vllm"))


@pytest.mark.parametrize("version,flag", [
    ("0.4.10.post2", "--cuda-graph-max-bs"), ("0.5.8", "--cuda-graph-max-bs"),
    ("0.5.15", "--cuda-graph-max-bs-decode"), ("0.5.23", "--cuda-graph-max-bs-decode"),
])
def test_cuda_graph_flag_follows_the_sglang_rename(version, flag):
    assert catalog("sglang", version).flag_for("cuda_graph_max_bs") == flag


def test_sglang_0_5_23_no_longer_has_the_old_spelling():
    assert catalog("sglang", "0.5.23").check("--cuda-graph-max-bs") is not None


def test_choices_are_checked():
    cat = catalog("sglang", "0.5.8")
    assert cat.check("--moe-runner-backend", "flashinfer_cutlass") is None
    assert "not one of" in cat.check("--moe-runner-backend", "warp_speed")


def test_vllm_graph_flag_by_version():
    assert catalog("vllm", "0.11.0").flag_for("cuda_graph_max_bs") == "--cuda-graph-sizes"
    assert catalog("vllm", "0.32.0").flag_for("cuda_graph_max_bs") == "--max-cudagraph-capture-size"
    assert catalog("vllm", "0.11.0").flag_for("moe_runner_backend") is None


def test_unknown_versions_use_the_nearest_older_catalog():
    cat = catalog("sglang", "0.5.10")
    assert cat.version == "0.5.8" and "nearest" in cat.note()
    assert catalog("vllm", None).version == versions("vllm")[-1]


# ---------------------------------------------------------------- one setting, one spelling


def test_a_change_replaces_every_spelling_of_its_setting():
    from kb.flags import catalog
    from kb.launchcmd import apply

    cat = catalog("sglang", "0.5.23")
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--cuda-graph-max-bs", "128"]
    flag = cat.flag_for("cuda_graph_max_bs")
    out = apply(argv, [(flag, 256, cat.spellings(flag))])
    assert out == ["python", "-m", "sglang.launch_server", "--model-path", "m", "--cuda-graph-max-bs-decode", "256"]
    vcat = catalog("vllm", "0.32.0")
    out = apply(["vllm", "serve", "m", "-tp", "2"],
                [("--tensor-parallel-size", 4, vcat.spellings("--tensor-parallel-size"))])
    assert out == ["vllm", "serve", "m", "--tensor-parallel-size", "4"]


def test_the_users_flags_pin_an_unknown_version():
    from kb.flags import catalog, infer_version

    # --cuda-graph-max-bs is in sglang's catalogs up to 0.5.19; 0.5.20+ rejects it as ambiguous
    assert infer_version("sglang", ["--model-path", "--cuda-graph-max-bs"])[0] == "0.5.19"
    assert infer_version("sglang", ["--model-path", "--cuda-graph-max-bs-decode"]) is None  # the newest takes it
    assert infer_version("sglang", ["--no-such-flag"]) is None
    cat = catalog("sglang", None, flags=["--cuda-graph-max-bs"])
    assert cat.version == "0.5.19" and "targets 0.5.19" in cat.note() and "--cuda-graph-max-bs" in cat.note()
    assert catalog("sglang", "0.5.8", flags=["--cuda-graph-max-bs"]).version == "0.5.8"  # a known version wins


def test_diagnose_says_which_version_the_command_targets(tmp_path):
    from ingest.run import read_run
    from kb.diagnose import diagnose

    ev = read_run([], engine="sglang", launch="python -m sglang.launch_server --model-path zai-org/GLM-4.6-FP8 "
                                             "--tp-size 8 --cuda-graph-max-bs 128")
    d = diagnose(ev, [])
    assert d.catalog.version == "0.5.19"
    assert any("targets 0.5.19" in w for w in d.warnings)
    for r in d.recommendations:
        for cmd in r.commands:
            assert not ("--cuda-graph-max-bs " in cmd and "--cuda-graph-max-bs-decode" in cmd), cmd


def test_int_choices_accept_their_values():
    from kb.flags import catalog

    assert catalog("vllm", "0.11.0").check("--block-size", 16) is None


# issue 13: a flag the user wrote that the stated version lacks leaves the printed command
# (e20, verbatim: vLLM 0.10.x had no --all2all-backend and refused to start with it)
E20 = ("Trying to run DeepSeek with expert parallel and DeepEP:\n"
       "vllm serve deepseek-ai/DeepSeek-V2-Lite --data-parallel-size 2 --enable-expert-parallel "
       "--all2all-backend deepep_low_latency\n"
       "vllm: error: unrecognized arguments: --all2all-backend deepep_low_latency\n"
       "vllm 0.10.2\n")


def test_a_flag_the_stated_version_lacks_is_left_out_of_every_printed_command(tmp_path, monkeypatch):
    from ingest.run import read_run
    from kb.diagnose import diagnose

    (tmp_path / "issue.txt").write_text(E20)
    ev = read_run([tmp_path / "issue.txt"])
    assert ev.engine_version == "0.10.2" and "--all2all-backend" in ev.launch_argv
    d = diagnose(ev, [])
    commands = [c for r in d.recommendations for c in r.commands if "vllm serve" in c]
    assert commands and not any("--all2all-backend" in c for c in commands)
    assert all("--enable-expert-parallel" in c and "deepep_low_latency" not in c.split("vllm serve")[1]
               for c in commands)
    assert any("--all2all-backend in your command is not a vllm 0.10.1.1 flag" in w for w in d.warnings)


def test_fit_version_renames_a_known_setting_and_keeps_what_the_version_takes():
    from kb.flags import catalog
    from kb.launchcmd import fit_version

    sg = catalog("sglang", "0.5.23")
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--cuda-graph-max-bs", "160", "--tp", "8"]
    out, notes = fit_version(argv, sg)
    assert out == ["python", "-m", "sglang.launch_server", "--model-path", "m", "--cuda-graph-max-bs-decode", "160",
                   "--tp", "8"]
    assert len(notes) == 1 and "written as --cuda-graph-max-bs-decode" in notes[0]
    # the version unknown (newest catalog by default): a flag it lacks may be newer, so it stays
    unknown = catalog("vllm")
    argv = ["vllm", "serve", "m", "--flag-from-the-future", "1"]
    assert fit_version(argv, unknown) == (argv, [])
