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
