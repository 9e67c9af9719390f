"""`kb attach`: a before/after pair of runs becomes a finding the next query finds.

The run files are the verbatim sglang 0.5.5 `bench_serving --output-file` sweep from
tests/data/samples (key names, key order, server_info as the tool writes them). Only
the throughput and latency numbers are changed, with json manipulation, to the A/B
values each test needs: those values are synthetic (e.g. 880 → 3,740 tok/s at 256
concurrency, the GLM-5 story's figures), not measurements.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, ROOT

from ingest.markdown import read_findings
from kb import attach as kbattach, index as kbindex
from kb.errors import KbError, UsageError
from kb.redact import redact_text
from kb.store import Store

SWEEP = DATA / "samples" / "sglang_bench_jsonl" / "run-sglang-0.5.5_sweep_c1-32-128-256_server-info.jsonl"
GLM5 = DATA / "scenarios" / "glm5-rtx-pro-6000"
GPU = "8x RTX PRO 6000"
MOE_FIX = "switch the MoE runner backend to flashinfer_cutlass"
MOE_CMD = ("python -m sglang.launch_server --model-path lukealonso/GLM-5-NVFP4 --tp-size 8 "
           "--moe-runner-backend flashinfer_cutlass")


def bench_file(path: Path, totals: dict, ttft: float | None = None, server: dict | None = None,
               longer_inputs: bool = False) -> Path:
    """The sample sweep, keeping the levels in `totals` ({concurrency: total tok/s or a list of
    them, one line per run}), with synthetic throughput (input/output/request rates scaled
    together), optionally a synthetic median TTFT, server arguments or doubled inputs."""
    lines = []
    for raw in SWEEP.read_text().splitlines():
        doc = json.loads(raw)
        wanted = totals.get(doc["max_concurrency"])
        for total in wanted if isinstance(wanted, list) else [wanted] if wanted else []:
            d = json.loads(raw)
            k = total / (d["input_throughput"] + d["output_throughput"])
            for key in ("request_throughput", "input_throughput", "output_throughput"):
                d[key] *= k
            if ttft is not None:
                d["median_ttft_ms"] = ttft
            if server:
                d["server_info"].update(server)
            if longer_inputs:
                d["total_input_tokens"] *= 2
            lines.append(json.dumps(d))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def glm_config(tmp_path):
    """The real nvidia/GLM-5-NVFP4 config.json and hf_quant_config.json, in a model directory."""
    d = tmp_path / "GLM-5-NVFP4"
    d.mkdir()
    for name in ("config.json", "hf_quant_config.json"):
        shutil.copy(GLM5 / name, d / name)
    return d


@pytest.fixture
def pair(tmp_path):
    before = bench_file(tmp_path / "before" / "bench.jsonl", {256: 880.0})
    after = bench_file(tmp_path / "after" / "bench.jsonl", {256: 3740.0}, ttft=900.0)
    return before, after


def request(before, after, **kw) -> kbattach.Request:
    opts = dict(before=[before], after=[after], fix=MOE_FIX, commands=[MOE_CMD],
                fix_classes=["moe-runner-backend"])
    opts.update(kw)
    return kbattach.Request(**opts)


def attached(kb_home) -> Path:
    return kb_home / "findings" / "attached.md"


# ------------------------------------------------------------------ the story end to end


def test_attach_computes_gain_takes_context_and_is_found_next(kb, kb_home, pair, glm_config):
    before, after = pair
    out = kb("attach", "--before", before, "--after", after, "--fix", MOE_FIX, "--command", MOE_CMD,
             "--fix-class", "moe-runner-backend", "--gpu", GPU, "--config", glm_config, "--json", check_json=True)
    assert out["action"] == "written" and Path(out["path"]) == attached(kb_home)
    f = out["finding"]
    assert f["id"] == out["id"]
    tput = next(g for g in f["gains"] if g["metric"] == "total throughput")
    assert (tput["before"], tput["after"], tput["unit"], tput["concurrency"], tput["runs"]) == \
        (880, 3740, "tok/s", 256, 1)
    assert tput["ratio"] == 4.25
    ttft = next(g for g in f["gains"] if g["metric"] == "TTFT")
    assert ttft["after"] == 900 and ttft["unit"] == "ms"
    assert {g["metric"] for g in f["gains"]} == {"total throughput", "output throughput", "TTFT", "TPOT", "ITL"}
    c = f["context"]
    assert (c["engine"], c["engine_version"], c["gpu_arch"], c["gpu_count"], c["interconnect"]) == \
        ("sglang", "0.5.5", "SM120", 8, "PCIe")
    assert (c["model"], c["model_family"], c["quantization"], c["experts"], c["experts_per_token"]) == \
        ("GLM-5-NVFP4", "glm", "nvfp4", 256, 8)
    assert f["commands"] == [MOE_CMD] and f["fix_classes"] == ["moe-runner-backend"]
    assert f["confidence"] == "low" and "cold-start" in f["body"]  # one run per side
    assert any(s.startswith(str(before.resolve())) for s in f["sources"])
    assert out["id"] in attached(kb_home).read_text()

    question = "what did switching the moe runner backend to flashinfer_cutlass gain for GLM-5-NVFP4 on RTX PRO 6000?"
    top = kb("ask", question, "--json", check_json=True)["answers"][0]
    assert top["id"] == out["id"]

    d = kb("diagnose", GLM5, "--gpu", GPU, "--json", check_json=True)
    rec = next(r for r in d["recommendations"] if r["fix_class"] == "moe-runner-backend")
    assert out["id"] in [c["id"] for c in rec["findings"]]


def test_text_report_says_what_was_written_where(kb, kb_home, pair, glm_config):
    before, after = pair
    p = kb("attach", "--before", before, "--after", after, "--fix", MOE_FIX, "--fix-class", "moe-runner-backend",
           "--gpu", GPU, "--config", glm_config)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("written ") and str(attached(kb_home)) in p.stdout
    assert "880 tok/s → 3.74 k tok/s at 256 concurrency (4.25x)" in p.stdout and "SM120" in p.stdout


def test_changed_server_args_are_named_and_give_the_fix_class(kb_home, tmp_path):
    # the after run also differs in one server argument (synthetic, like the numbers)
    before = bench_file(tmp_path / "b.jsonl", {256: 880.0}, server={"api_key": "sk-abcdefghijklmnopqrstuvwx"})
    after = bench_file(tmp_path / "a.jsonl", {256: 3740.0},
                       server={"moe_runner_backend": "flashinfer_cutlass", "api_key": "sk-zyxwvutsrqponmlkjihgfedc"})
    f, warnings = kbattach.build(kbattach.Request(before=[before], after=[after], fix="FlashInfer CUTLASS MoE"))
    assert "`--moe-runner-backend auto → flashinfer_cutlass`" in f.fix
    assert "api-key" not in f.fix  # a credential that changed is not a setting to name
    assert f.fix_classes == ["moe-runner-backend"]
    assert any("inferred" in w for w in warnings)


# ------------------------------------------------------------------ levels, runs, confidence


def test_several_runs_per_side_give_the_median_and_more_confidence(kb_home, tmp_path):
    before = bench_file(tmp_path / "b.jsonl", {256: [900.0, 870.0, 880.0]})
    after = bench_file(tmp_path / "a.jsonl", {256: [3800.0, 3740.0, 3700.0]})
    f, _ = kbattach.build(request(before, after))
    g = next(g for g in f.gains if g.metric == "total throughput")
    assert (g.before, g.after, g.runs) == (880, 3740, 3)
    assert f.confidence == "high" and "3 runs before" in f.body and "spread" in f.body

    two = kbattach.build(request(bench_file(tmp_path / "b2.jsonl", {256: [870.0, 890.0]}),
                                 bench_file(tmp_path / "a2.jsonl", {256: [3700.0, 3780.0]})))[0]
    assert two.confidence == "medium"

    noisy = kbattach.build(request(bench_file(tmp_path / "b3.jsonl", {256: [800.0, 1000.0]}),
                                   bench_file(tmp_path / "a3.jsonl", {256: [900.0, 1100.0]})))[0]
    assert noisy.confidence == "low" and "overlap" in noisy.body


def test_levels_are_matched_one_by_one_and_the_rest_warned(kb_home, tmp_path):
    before = bench_file(tmp_path / "b.jsonl", {32: 4000.0, 256: 880.0})
    after = bench_file(tmp_path / "a.jsonl", {128: 3000.0, 256: 3740.0})
    f, warnings = kbattach.build(request(before, after))
    assert {g.concurrency for g in f.gains} == {256}
    assert any("32 concurrency" in w and "only in the before" in w for w in warnings)
    assert any("128 concurrency" in w and "only in the after" in w for w in warnings)


def test_mismatched_levels_are_refused_naming_both_files(kb, kb_home, tmp_path):
    before = bench_file(tmp_path / "before.jsonl", {32: 4000.0})
    after = bench_file(tmp_path / "after.jsonl", {256: 3740.0})
    p = kb("attach", "--before", before, "--after", after, "--fix", "x", "--fix-class", "moe-runner-backend")
    assert p.returncode == 1
    assert str(before) in p.stderr and str(after) in p.stderr and "no load level in common" in p.stderr
    # same concurrency, different workload (input length doubled): not comparable either
    longer = bench_file(tmp_path / "longer.jsonl", {256: 3740.0}, longer_inputs=True)
    p = kb("attach", "--before", bench_file(tmp_path / "b256.jsonl", {256: 880.0}), "--after", longer,
           "--fix", "x", "--fix-class", "moe-runner-backend")
    assert p.returncode == 1 and "lengths" in p.stderr
    assert not attached(kb_home).exists()


def test_unknown_fix_class_is_a_usage_error(kb, pair):
    p = kb("attach", "--before", pair[0], "--after", pair[1], "--fix", "x", "--fix-class", "faster-please")
    assert p.returncode == 2 and "faster-please" in p.stderr and "moe-runner-backend" in p.stderr


# ------------------------------------------------------------------ secrets


HF = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f"
BEARER = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2Vu"


def test_secrets_never_reach_the_file_the_index_or_the_output(kb, kb_home, pair):
    cmd = (f"HF_TOKEN={HF} python -m sglang.launch_server --model-path https://bob:hunter2pass@models.example/glm "
           "--api-key sk-live0123456789abcdefXYZ --moe-runner-backend flashinfer_cutlass")
    fix = f"switch the MoE runner; tested with curl -H 'Authorization: Bearer {BEARER}' and {HF}"
    p = kb("attach", "--before", pair[0], "--after", pair[1], "--fix", fix, "--command", cmd,
           "--note", "OPENAI_API_KEY=sk-proj-abcdefghij0123456789 was set", "--fix-class", "moe-runner-backend",
           "--json")
    assert p.returncode == 0, p.stderr
    fid = json.loads(p.stdout)["id"]
    shown = kb("show", fid, "--json")
    for text in (p.stdout, p.stderr, attached(kb_home).read_text(), shown.stdout):
        for secret in (HF, BEARER, "hunter2pass", "sk-live0123456789abcdefXYZ", "sk-proj-abcdefghij0123456789"):
            assert secret not in text
    written = attached(kb_home).read_text()
    assert "https://bob:***@models.example/glm" in written and "--api-key <redacted>" in written
    assert "Authorization: Bearer <redacted>" in written


@pytest.mark.parametrize("text,secret", [
    (f"token {HF} here", HF),
    ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("curl -H 'authorization: sometoken123'", "sometoken123"),
    ("--api-key=abc123 --port 30000", "abc123"),
    ("--hf-token 'x y z'", "x y z"),
    ('{"api_key": "abc123", "port": 1}', "abc123"),
    ("export HF_TOKEN=plain123", "plain123"),
    ("x-api-key: abc123def", "abc123def"),
    ("key sk-ant-api03-abcdefghijklmnop", "sk-ant-api03-abcdefghijklmnop"),
    ("git clone https://me:pa55word@github.com/x/y", "pa55word"),
    ("https://h/p?token=abc123&x=1", "abc123"),
])
def test_redact_text(text, secret):
    assert secret not in redact_text(text)


def test_redact_text_leaves_settings_alone():
    text = "--max-total-tokens 4096 --max-running-requests 256 #token: 1216, token usage: 0.3 https://a.example/x"
    assert redact_text(text) == text


# ------------------------------------------------------------------ safe writes


def test_eight_concurrent_attaches_all_land(kb_home, pair):
    before, after = pair
    env = {**os.environ, "KB_HOME": str(kb_home)}
    procs = [subprocess.Popen([sys.executable, "-m", "kb", "attach", "--before", str(before), "--after", str(after),
                               "--fix", f"concurrent change number {i}", "--title", "Concurrent attach",
                               "--fix-class", "moe-runner-backend", "--force-new", "--json"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(8)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [err for _, err in results]
    ids = {json.loads(out)["id"] for out, _ in results}
    assert len(ids) == 8
    records = read_findings(attached(kb_home))
    assert {r.id for r in records} == ids
    assert sorted(r.fix for r in records) == sorted(f"concurrent change number {i}" for i in range(8))
    indexed = {f.id for f in kbindex.all_records(Store(kb_home).index_dir)}
    assert ids <= indexed


def test_crash_mid_write_leaves_the_old_file_whole(kb_home, tmp_path, monkeypatch):
    store = Store(kb_home)
    b1 = bench_file(tmp_path / "b1.jsonl", {256: 880.0})
    a1 = bench_file(tmp_path / "a1.jsonl", {256: 3740.0})
    kbattach.attach(request(b1, a1), store)
    target = attached(kb_home)
    old = target.read_bytes()

    real_replace = os.replace

    def crash(src, dst, *a, **kw):
        if Path(dst).name == "attached.md":
            raise OSError("simulated crash during rename")
        return real_replace(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KbError, match="simulated crash"):
        kbattach.attach(request(b1, a1, fix="a second change", force_new=True), store)
    assert target.read_bytes() == old
    assert [p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_every_attached_finding_reads_back_as_written(kb_home, tmp_path, glm_config):
    store = Store(kb_home)
    b = bench_file(tmp_path / "b.jsonl", {32: [4000.0, 4100.0], 256: [870.0, 890.0]})
    a = bench_file(tmp_path / "a.jsonl", {32: [4200.0, 4300.0], 256: [3700.0, 3780.0]}, ttft=900.0)
    results = [
        kbattach.attach(request(b, a, gpu=GPU, config=str(glm_config), tags=["sm120,moe"], note="# not a heading",
                                symptoms=["flat; throughput"], cause="default MoE path"), store),
        kbattach.attach(kbattach.Request(after=[a], fix="observed the sweep", fix_classes=["benchmark-method"],
                                         title="Sweep on the new build ## trailing"), store),
        kbattach.attach(kbattach.Request(fix="NCCL_P2P_DISABLE=1 fixed a hang", fix_classes=["nccl-tuning"],
                                         commands=["export NCCL_P2P_DISABLE=1\n```\nodd fence"]), store),
    ]
    fid = results[0].id
    b2 = bench_file(tmp_path / "b2.jsonl", {128: [800.0, 810.0, 790.0]})
    a2 = bench_file(tmp_path / "a2.jsonl", {128: [3000.0, 3100.0, 2900.0]})
    results.append(kbattach.attach(request(b2, a2, fix="again, at 128", update=fid), store))
    back = {r.id: r for r in read_findings(attached(kb_home))}
    latest = {res.id: res.finding for res in results}  # the update replaced the first one
    assert back == latest
    assert results[-1].action == "updated" and len(back[fid].gains) == len(results[0].finding.gains) + 5


# ------------------------------------------------------------------ duplicates and updates


def test_near_duplicate_is_reported_and_update_merges_into_it(kb, kb_home, pair, glm_config, tmp_path):
    before, after = pair
    common = ["--fix-class", "moe-runner-backend", "--gpu", GPU, "--config", glm_config, "--json"]
    first = kb("attach", "--before", before, "--after", after, "--fix", "FlashInfer CUTLASS MoE", *common,
               check_json=True)
    text = attached(kb_home).read_text()
    again = kb("attach", "--before", before, "--after", after, "--fix", "FlashInfer MoE again", *common,
               check_json=True)
    assert again["action"] == "duplicate" and again["id"] == first["id"]
    assert any(first["id"] in w for w in again["warnings"])
    assert attached(kb_home).read_text() == text  # nothing written

    b2 = bench_file(tmp_path / "b2.jsonl", {128: 800.0})
    a2 = bench_file(tmp_path / "a2.jsonl", {128: 3000.0})
    upd = kb("attach", "--before", b2, "--after", a2, "--fix", "same fix at 128", "--update", first["id"], *common,
             check_json=True)
    assert upd["action"] == "updated" and upd["id"] == first["id"]
    assert {g["concurrency"] for g in upd["finding"]["gains"]} == {128, 256}
    assert str(b2.resolve()) in " ".join(upd["finding"]["sources"])
    assert [r.id for r in read_findings(attached(kb_home))] == [first["id"]]
    shown = kb("show", first["id"], "--json", check_json=True)
    assert len(shown["gains"]) == len(upd["finding"]["gains"])

    new = kb("attach", "--before", before, "--after", after, "--fix", "FlashInfer MoE again", "--force-new",
             *common, check_json=True)
    assert new["action"] == "written" and new["id"] != first["id"]


def test_shipped_findings_are_not_edited(kb, pair):
    p = kb("attach", "--before", pair[0], "--after", pair[1], "--fix", "x", "--fix-class", "moe-runner-backend",
           "--update", "glm5-flashinfer-cutlass-moe-sm120")
    assert p.returncode == 1 and "shipped" in p.stderr


def test_to_file_elsewhere_is_indexed(kb, pair, tmp_path):
    team = tmp_path / "team" / "perf.md"
    out = kb("attach", "--before", pair[0], "--after", pair[1], "--fix", "x", "--fix-class", "moe-runner-backend",
             "--to", team, "--json", check_json=True)
    assert Path(out["path"]) == team.resolve() and out["id"] in team.read_text()
    assert kb("show", out["id"], "--json", check_json=True)["id"] == out["id"]


def test_plain_observation_without_runs(kb, kb_home):
    out = kb("attach", "--title", "Driver 580 needs nvidia_uvm loaded before sglang starts",
             "--fix", "modprobe nvidia_uvm before launching", "--note", "seen on two hosts",
             "--fix-class", "driver-environment", "--json", check_json=True)
    f = out["finding"]
    assert out["action"] == "written" and f["gains"] == [] and f["confidence"] == "low"
    assert "seen on two hosts" in f["body"]


def test_fix_or_title_is_required():
    with pytest.raises(UsageError, match="fix: say what changed"):
        kbattach.build(kbattach.Request(fix_classes=["nccl-tuning"]))


def test_run_directories_give_model_and_gpu_context(kb_home, tmp_path, glm_config):
    before = bench_file(tmp_path / "before" / "bench.jsonl", {256: 880.0}).parent
    after = bench_file(tmp_path / "after" / "bench.jsonl", {256: 3740.0}).parent
    for d in (before, after):  # config.json and nvidia-smi -q output saved beside the benchmark
        for f in glm_config.iterdir():
            shutil.copy(f, d / f.name)
        shutil.copy(DATA / "samples" / "nvidia_smi" / "p3_H100NVLx2_nvidia-smi-q.txt", d / "nvidia-smi.txt")
    f, warnings = kbattach.build(kbattach.Request(before=[before], after=[after], fix="x",
                                                  fix_classes=["moe-runner-backend"]))
    c = f.context
    assert (c.model_family, c.quantization, c.experts, c.gpu, c.gpu_count) == ("glm", "nvfp4", 256, "H100 NVL", 2)
    assert not any("unknown" in w for w in warnings)
    cited = [str(s) for s in f.sources]
    assert str((after / "bench.jsonl").resolve()) in cited and str((after / "config.json").resolve()) in cited


def test_update_of_an_unknown_id_is_refused(kb_home, pair):
    with pytest.raises(KbError, match="no-such-finding"):
        kbattach.attach(request(*pair, update="no-such-finding"), Store(kb_home))


def test_without_an_inferable_fix_class_it_is_stored_unclassified_and_found(kb, kb_home):
    """A knowledge base does not turn a finding away: no class in --fix, --title or the
    commands → stored as `unclassified` with a warning, and `kb ask` finds it."""
    title = "Zebrafish gateway stalls when the upstream keeps idle sockets past 30 s"
    first = kb("attach", "--title", title, "--fix", "set the gateway keepalive below the upstream one")
    assert first.returncode == 0, first.stderr
    assert "fix classes unclassified" in first.stdout
    assert "warning: no fix class could be inferred" in first.stdout and "stored as unclassified" in first.stdout
    [f] = read_findings(attached(kb_home), str(attached(kb_home)))
    assert f.fix_classes == ["unclassified"] and f.title == title
    # a second unclassified finding in the same (empty) context is a different finding, not a duplicate
    second = kb("attach", "--title", "Quokka proxy drops streamed chunks", "--fix", "turn proxy buffering off",
                "--json", check_json=True)
    assert second["action"] == "written" and second["finding"]["fix_classes"] == ["unclassified"]
    answers = kb("ask", "zebrafish gateway idle sockets stall", "--json", check_json=True)
    assert answers["answers"][0]["id"] == f.id, answers


def test_a_general_shipped_check_is_not_a_duplicate_of_a_measurement(kb, pair):
    """A shipped launch check of the same class and engine, with no GPU architecture or model
    family, does not swallow a new measurement whose setting is also unknown: it is written."""
    out = kb("attach", "--before", pair[0], "--after", pair[1], "--fix", "x", "--fix-class", "moe-runner-backend",
             "--json", check_json=True)
    assert out["action"] == "written", out
