"""`kb doctor` against a real vLLM server capped at --max-num-seqs 8: the plateau, its
knee, the running-request cap with the waiting queue (from /metrics and from the
server log), the recommendation to raise --max-num-seqs; then the server restarted
with the recommended value, where the knee moves; then that server dies mid-sweep.
Small requests: input 32 tokens, output 64, levels 1,4,8,16,32, 3 s of load per level."""

import json
import time

import pytest

from live import vllm_server as vs
from live.util import read_jsonl, sweep_until_first_level

SWEEP = ["-c", "1,4,8,16,32", "--duration", "3", "--input-len", "32", "--output-len", "64"]


@pytest.fixture(scope="module")
def holder():
    """State passed from one test to the next; the restarted server is stopped at the end."""
    h: dict = {}
    yield h
    if h.get("server"):
        h["server"].stop()


def _signals(doc):
    return {s["id"]: s for s in doc["diagnosis"]["signals"]}


def _knee(kb_live, runs):
    """The knee (inf: none) and the curve of the median of several sweeps per level."""
    proc = kb_live("diagnose", *runs, "--json")
    assert proc.returncode == 0, proc.stderr
    diag = json.loads(proc.stdout)
    assert all(p["runs"] == len(runs) for p in diag["curve"])
    plateau = next((s for s in diag["signals"] if s["id"] == "throughput-plateau"), None)
    curve = {int(p["level"]): round(p["throughput"]) for p in diag["curve"]}
    return (plateau["data"]["knee"] if plateau else float("inf")), curve


def _cap_recommendation(doc):
    return next((r for r in doc["diagnosis"]["recommendations"] if r["fix_class"] == "max-running-requests"), None)


def test_doctor_finds_the_cap_and_recommends_max_num_seqs(kb_live, vllm8, tmp_path, holder):
    out = tmp_path / "doctor.jsonl"
    proc = kb_live("doctor", vllm8.url, *SWEEP, "--log", vllm8.log, "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["probe"]["engine"] == "vllm" and doc["diagnosis"]["engine_version"] == "0.32.0"
    assert [r["max_concurrency"] for r in read_jsonl(out)] == [1, 4, 8, 16, 32]
    sig = _signals(doc)

    plateau = sig["throughput-plateau"]
    assert plateau["data"]["knee"] <= 16, plateau["summary"]

    cap = sig["running-cap-with-queue"]
    assert cap["data"]["cap"] == 8 and cap["data"]["queued_max"] > 0
    assert set(cap["data"]["sources"]) == {"metrics", "log"}  # both /metrics and the server log show it
    texts = [e["text"] for e in cap["evidence"]]
    where = [(e["where"] or {}).get("path") for e in cap["evidence"]]
    assert any("/metrics samples at concurrency" in t and "(cap 8)" in t for t in texts), texts
    assert any("stats lines" in t and "(cap 8)" in t for t in texts), texts
    assert str(vllm8.log) in where and str(out) in where

    rec = _cap_recommendation(doc)
    assert rec is not None and rec["rank"] == 1, doc["diagnosis"]["recommendations"]
    [flag] = rec["flags"]
    assert flag["flag"] == "--max-num-seqs" and flag["current"] == 8
    new = int(flag["new"])
    assert new >= 16  # a concrete, larger value (the highest level tested: 32)
    cmd = rec["commands"][0]
    assert f"--max-num-seqs {new}" in cmd and "--max-num-seqs 8" not in cmd
    assert "--load-format dummy" in cmd and "--max-model-len 512" in cmd  # a diff against what runs
    holder["new_cap"] = new

    # the same findings in the text report
    text = kb_live("doctor", vllm8.url, *SWEEP, "--log", vllm8.log, "--out", tmp_path / "again.jsonl")
    assert text.returncode == 0, text.stderr
    assert "throughput stops scaling after" in text.stdout
    assert "running-cap-with-queue: the server runs at most 8 requests and queues the rest" in text.stdout
    assert f"Raise --max-num-seqs from 8 to {new}" in text.stdout


def test_restarted_with_the_recommended_cap_the_knee_moves(kb_live, vllm8, tiny_model, tmp_path_factory, holder):
    new = holder.get("new_cap")
    assert new, "the doctor test did not produce a recommendation"
    log = tmp_path_factory.mktemp("vllm-raised") / "server.log"
    server = vs.start(tiny_model, log, max_num_seqs=new)
    holder["server"] = server
    work = tmp_path_factory.mktemp("raised")
    out = work / "doctor.jsonl"
    proc = kb_live("doctor", server.url, *SWEEP, "--log", log, "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    sig = _signals(doc)
    assert "running-cap-with-queue" not in sig, sig.get("running-cap-with-queue")
    assert _cap_recommendation(doc) is None
    top = read_jsonl(out)[-1]
    assert max(s["running"] for s in top["kb_metrics"]["samples"]) > 8  # more than the old cap run at once
    # The knees: medians of three sweeps per server, the two servers swept in turn so that
    # whatever else runs on this small machine weighs on both curves alike.
    before, after = [], [out]
    for i in range(5):
        url, runs = (vllm8.url, before) if i % 2 == 0 else (server.url, after)
        runs.append(work / f"sweep{i}.jsonl")
        proc = kb_live("sweep", url, *SWEEP, "--out", runs[-1])
        assert proc.returncode == 0, proc.stderr
    (k0, c0), (k1, c1) = _knee(kb_live, before), _knee(kb_live, after)
    print(f"\nknee with --max-num-seqs 8: {k0} {c0}; with {new}: {k1} {c1}")
    assert k1 > k0, {"max-num-seqs 8": (k0, c0), f"max-num-seqs {new}": (k1, c1)}


def test_server_dies_mid_sweep(tmp_path, tiny_model, tmp_path_factory, holder):
    server = holder.get("server")
    if server is None or not server.alive():
        server = vs.start(tiny_model, tmp_path_factory.mktemp("vllm-dies") / "server.log", max_num_seqs=8)
        holder["server"] = server
    out = tmp_path / "sweep.jsonl"
    proc = sweep_until_first_level(server.url, out)
    try:
        time.sleep(0.5)  # well into the concurrency-64 level
        server.kill()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = stderr.strip().splitlines()
    assert proc.returncode == 1, (proc.returncode, stderr)
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith(f"kb: error: {server.url} stopped answering during the concurrency-64 level")
    assert lines[0].endswith(f"1 finished level kept in {out}")
    assert [r["max_concurrency"] for r in read_jsonl(out)] == [1]
