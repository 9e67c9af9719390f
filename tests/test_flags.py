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
