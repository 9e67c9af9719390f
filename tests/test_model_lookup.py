"""A model named only by its repo id (`vllm serve Qwen/Qwen3-30B-A3B`) gets its config.json
from the local hub cache, else from kb's shipped copies (kb/model_lookup.py); an explicit
config wins over both; an id kb does not know changes nothing."""

import json
import shutil

import pytest
from conftest import ROOT

from ingest.hf_config import load_profile
from ingest.run import read_run
from kb import model_lookup
from kb.diagnose import diagnose, report

# the `kb` runs here read the shipped findings: each test's home starts with them indexed
pytestmark = pytest.mark.usefixtures("shipped_home")

SHIPPED = ROOT / "kb" / "data" / "model_configs"
QWEN = SHIPPED / "Qwen--Qwen3-30B-A3B_config.json"
MIXTRAL = SHIPPED / "mistralai--Mixtral-8x7B-v0.1_config.json"


@pytest.fixture
def no_hub(tmp_path, monkeypatch):
    """An empty hub cache: only kb's shipped copies can answer."""
    empty = tmp_path / "hub"
    empty.mkdir()
    monkeypatch.setattr("ingest.hf_config.hub_cache_dirs", lambda: [empty])
    monkeypatch.setattr("kb.model_lookup.hub_cache_dirs", lambda: [empty])
    return empty


def fake_cache(root, repo_id, config):
    """The hub-cache layout huggingface_hub writes: refs/main names the snapshot."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snap.mkdir(parents=True)
    shutil.copy(config, snap / "config.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snap.name)
    return snap / "config.json"


def launch(tmp_path, text):
    p = tmp_path / "launch.sh"
    p.write_text(text + "\n")
    return p


def test_launch_naming_a_shipped_model_gets_moe_facts_and_kb105(tmp_path, no_hub):
    ev = read_run([launch(tmp_path, "vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 2")], gpu="2x H100")
    d = diagnose(ev, [])
    m = d.ev.model
    assert (m.name, m.is_moe, m.experts, m.experts_per_token, m.expert_intermediate_size) == \
        ("Qwen/Qwen3-30B-A3B", True, 128, 8, 768)
    kb105 = next(r for r in d.recommendations if r.rule.startswith("KB105"))
    assert "E=128" in kb105.title and "N=384" in kb105.title  # 768 / TP 2
    text = report(d)
    assert "config.json: Qwen/Qwen3-30B-A3B from kb's shipped copy → model config: MoE 128×top-8" in text
    j = d.to_json()
    assert j["model_config"] == {"repo_id": "Qwen/Qwen3-30B-A3B", "from": "shipped", "file": str(QWEN)}
    assert j["model"]["experts"] == 128


def test_without_the_lookup_the_same_launch_has_no_model(tmp_path, no_hub, monkeypatch):
    """The facts above come from the lookup, not from the launch command itself."""
    monkeypatch.setattr("kb.model_lookup.candidates", lambda repo: [])
    files = [launch(tmp_path, "vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 2")]
    d = diagnose(read_run(files, gpu="2x H100"), [])
    assert d.ev.model is None and not any(r.rule.startswith("KB105") for r in d.recommendations)


def test_repo_id_matches_whatever_its_case(no_hub):
    assert model_lookup.find_config("qwen/QWEN3-30b-a3b") == (QWEN, model_lookup.SHIPPED)


def test_quantized_variant_is_not_given_its_base_models_config(no_hub):
    """Only the exact id: nvidia's NVFP4 upload of Qwen3-30B-A3B is not shipped, and the base
    config would say bf16 and the wrong weight size."""
    assert model_lookup.find_config("nvidia/Qwen3-30B-A3B-NVFP4") is None
    assert model_lookup.find_config("Qwen/Qwen3-30B-A3B-Instruct-2507") is None
    # the FP8 upload is shipped under its own id and reads as FP8
    path, origin = model_lookup.find_config("Qwen/Qwen3-30B-A3B-FP8")
    assert origin == model_lookup.SHIPPED and load_profile(path).quantization == "fp8"


def test_unknown_repo_id_changes_nothing(tmp_path, no_hub):
    files = [launch(tmp_path, "vllm serve acme/NoSuchModel-7B --tensor-parallel-size 2")]
    d = diagnose(read_run(files, gpu="2x H100"), [])
    assert d.ev.model is None and d.ev.model_path == "acme/NoSuchModel-7B"
    assert [f["path"] for f in d.ev.files] == [str(files[0])]
    assert d.to_json()["model_config"] is None and "config.json" not in report(d)


def test_hub_cache_wins_over_the_shipped_copy(tmp_path, kb):
    """Through the CLI, with the cache found the way huggingface_hub finds it (HF_HUB_CACHE)."""
    cache = tmp_path / "hub"
    cached = fake_cache(cache, "Qwen/Qwen3-30B-A3B", QWEN)
    env = {"HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "hfhome")}
    p = launch(tmp_path, "vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 2")
    j = kb("diagnose", p, "--gpu", "2x H100", "--json", check_json=True, env=env)
    assert j["model_config"] == {"repo_id": "Qwen/Qwen3-30B-A3B", "from": "hub", "file": str(cached)}
    assert j["model"]["experts"] == 128
    text = kb("diagnose", p, "--gpu", "2x H100", env=env).stdout
    assert ("config.json: Qwen/Qwen3-30B-A3B from the local hub cache → model config: MoE 128×top-8, bf16"
            f" ({cached})") in text


def test_hub_cache_match_ignores_case(tmp_path, no_hub):
    cached = fake_cache(no_hub, "Qwen/Qwen3-30B-A3B", QWEN)
    assert model_lookup.find_config("qwen/qwen3-30b-a3b") == (cached, model_lookup.HUB)


def test_explicit_config_wins_over_cache_and_shipped_copy(tmp_path, no_hub):
    fake_cache(no_hub, "Qwen/Qwen3-30B-A3B", QWEN)
    ev = read_run([launch(tmp_path, "vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 2")],
                  config=str(MIXTRAL), gpu="2x H100")
    d = diagnose(ev, [])
    assert (d.ev.model.experts, d.ev.model.experts_per_token) == (8, 2)  # Mixtral's, as given
    assert d.to_json()["model_config"] is None and not any(f["path"] == "config.json" for f in d.ev.files)


def test_a_config_among_the_files_wins_too(tmp_path, no_hub):
    d = diagnose(read_run([launch(tmp_path, "vllm serve Qwen/Qwen3-30B-A3B"), MIXTRAL]), [])
    assert d.ev.model.experts == 8 and d.to_json()["model_config"] is None


def test_every_shipped_config_loads_and_is_sourced():
    sources = (SHIPPED / "SOURCES.md").read_text()
    configs = [p for p in SHIPPED.glob("*_config.json") if not p.name.endswith("_hf_quant_config.json")]
    assert len(configs) >= 20
    for p in configs:
        repo = p.name[: -len("_config.json")].replace("--", "/", 1)
        assert repo in sources, f"{p.name} is not in SOURCES.md"
        assert load_profile(p).layers, p.name
        # each one is a byte-identical copy of a sourced test sample
        samples = ROOT / "tests" / "data" / "samples" / "model_configs"
        assert any(s.read_bytes() == p.read_bytes() for s in samples.iterdir()), p.name


def test_damaged_cached_config_is_a_warning_and_kbs_copy_is_used(tmp_path, no_hub):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    fake_cache(no_hub, "Qwen/Qwen3-30B-A3B", bad)
    d = diagnose(read_run([launch(tmp_path, "vllm serve Qwen/Qwen3-30B-A3B")]), [])
    assert d.ev.model.experts == 128 and d.to_json()["model_config"]["from"] == model_lookup.SHIPPED
    assert any("config.json for Qwen/Qwen3-30B-A3B in the local hub cache not used" in w for w in d.warnings)


def test_damaged_cached_config_of_an_unshipped_model_leaves_it_unknown(tmp_path, no_hub):
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    fake_cache(no_hub, "acme/Private-7B", bad)
    d = diagnose(read_run([launch(tmp_path, "vllm serve acme/Private-7B")]), [])
    assert d.ev.model is None and d.to_json()["model_config"] is None
    assert any("config.json for acme/Private-7B in the local hub cache not used" in w for w in d.warnings)
    json.dumps(d.to_json(), default=str)


def test_publishers_own_quantized_upload_gets_the_base_shape_with_the_named_format(tmp_path, no_hub):
    """`Org/X-GPTQ-Int4` beside a known `Org/X`: the same layers and experts, weights as the name says."""
    assert model_lookup.base_of("Qwen/Qwen3-235B-A22B-GPTQ-Int4") == ("Qwen/Qwen3-235B-A22B", "gptq")
    assert model_lookup.base_of("Qwen/Qwen3-8B-FP8-Dynamic") == ("Qwen/Qwen3-8B", "fp8")
    assert model_lookup.base_of("Qwen/Qwen3-30B-A3B") is None
    ev = read_run([launch(tmp_path, "vllm serve Qwen/Qwen3-30B-A3B-GPTQ-Int4 --tensor-parallel-size 2")],
                  gpu="2x H100")
    model_lookup.fill_model(ev)
    base = load_profile(QWEN)
    m = ev.model
    assert (m.name, m.experts, m.layers, m.quantization) == ("Qwen/Qwen3-30B-A3B-GPTQ-Int4", base.experts,
                                                             base.layers, "gptq")
    assert base.quantization != "gptq"
    entry = ev.files[-1]
    assert entry["model_config"]["repo_id"] == "Qwen/Qwen3-30B-A3B" and "gptq weights by its name" in entry["kind"]


def test_another_orgs_quantized_upload_still_gets_nothing(tmp_path, no_hub):
    ev = read_run([launch(tmp_path, "vllm serve acme/Qwen3-30B-A3B-FP8 --tensor-parallel-size 2")], gpu="2x H100")
    model_lookup.fill_model(ev)
    assert ev.model is None
