"""`kb doctor` against a real vLLM server capped at --max-num-seqs 8: the plateau, its
knee, the running-request cap with the waiting queue (from /metrics and from the
server log), the recommendation to raise --max-num-seqs; then the server restarted
with the recommended value, where the knee moves; a server that dies mid-sweep.
Small requests: input 32 tokens, output 64, levels 1,4,8,16,32, 3 s of load per level.
Each test stands alone (any order, any subset): the doctor run on the capped server is
a module fixture computed by whichever test needs it first; the other servers come from
a module pool (Spares) that starts one only when none fits, and stops them all at the end."""

import json
import time

import pytest

from live import vllm_server as vs
from live.util import read_jsonl, run_kb, sweep_until_first_level

SWEEP = ["-c", "1,4,8,16,32", "--duration", "3", "--input-len", "32", "--output-len", "64"]


@pytest.fixture(scope="module")
def doctor8(vllm8, tmp_path_factory):
    """`kb doctor --json` on the server capped at 8, run once for every test that needs its
    result (whichever of them runs first, or alone): (report, sweep file)."""
    work = tmp_path_factory.mktemp("doctor8")
    out = work / "doctor.jsonl"
    proc = run_kb(work / "kbhome", "doctor", vllm8.url, *SWEEP, "--log", vllm8.log, "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), out


class Spares:
    """The vLLM servers of this module besides vllm8. A start takes 45 s on this 2-core
    machine at a load average of 4 and 150 s at 9 (measured), so a server a test started
    stays up for a later test that can use it: the server restarted with the recommended cap is
    the one test_server_dies_mid_sweep kills when it runs after that test."""

    def __init__(self, model, tmp_path_factory):
        self.model, self.tmp, self.idle, self.started = model, tmp_path_factory, [], []

    def get(self, max_num_seqs: int) -> vs.VllmServer:
        """A running server with this --max-num-seqs (started if none is up); it stays in the pool."""
        server = next((s for s in self.idle if s.max_num_seqs == max_num_seqs and s.alive()), None)
        if server is None:
            server = self._start(max_num_seqs)
            self.idle.append(server)
        return server

    def take(self) -> vs.VllmServer:
        """Any running server, for good: the caller may kill it (one capped at 8 is started if none is up)."""
        alive = [s for s in self.idle if s.alive()]
        server = alive[0] if alive else self._start(8)
        if server in self.idle:
            self.idle.remove(server)
        return server

    def _start(self, max_num_seqs: int) -> vs.VllmServer:
        log = self.tmp.mktemp(f"vllm{max_num_seqs}-") / "server.log"
        try:
            server = vs.start(self.model, log, max_num_seqs=max_num_seqs)
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)
        self.started.append(server)
        return server


@pytest.fixture(scope="module")
def spares(tiny_model, tmp_path_factory):
    """Every server started through it is stopped when the module ends, pass or fail."""
    pool = Spares(tiny_model, tmp_path_factory)
    try:
        yield pool
    finally:
        for server in pool.started:
            server.stop()


def _signals(doc):
    return {s["id"]: s for s in doc["diagnosis"]["signals"]}


def _cap_recommendation(doc):
    return next((r for r in doc["diagnosis"]["recommendations"] if r["fix_class"] == "max-running-requests"), None)


def test_doctor_finds_the_cap_and_recommends_max_num_seqs(kb_live, vllm8, tmp_path, doctor8):
    doc, out = doctor8
    assert doc["probe"]["engine"] == "vllm" and doc["diagnosis"]["engine_version"] == "0.32.0"
    assert [r["max_concurrency"] for r in read_jsonl(out)] == [1, 4, 8, 16, 32]
    sig = _signals(doc)

    plateau = sig["throughput-plateau"]
    assert plateau["data"]["knee"] <= 16, plateau["summary"]

    cap = sig["running-cap-with-queue"]
    assert cap["data"]["cap"] == 8 and cap["data"]["queued_max"] > 0
    # /metrics is sampled about once a second within each level, so the levels above the cap
    # always show it; whether the server log's stats lines (spread over all five levels, three
    # below the cap) reach the signal's queue fraction depends on how fast the levels drain:
    # test_the_server_log_shows_the_cap_too checks the log where every level exceeds the cap.
    assert "metrics" in cap["data"]["sources"] and set(cap["data"]["sources"]) <= {"metrics", "log"}
    texts = [e["text"] for e in cap["evidence"]]
    where = [(e["where"] or {}).get("path") for e in cap["evidence"]]
    assert any("/metrics samples at concurrency" in t and "(cap 8)" in t for t in texts), texts
    assert str(out) in where

    rec = _cap_recommendation(doc)
    assert rec is not None and rec["rank"] == 1, doc["diagnosis"]["recommendations"]
    [flag] = rec["flags"]
    assert flag["flag"] == "--max-num-seqs" and flag["current"] == 8
    new = int(flag["new"])
    assert new >= 16  # a concrete, larger value (the highest level tested: 32)
    cmd = rec["commands"][0]
    assert f"--max-num-seqs {new}" in cmd and "--max-num-seqs 8" not in cmd
    assert "--load-format dummy" in cmd and "--max-model-len 512" in cmd  # a diff against what runs

    # the same findings in the text report
    text = kb_live("doctor", vllm8.url, *SWEEP, "--log", vllm8.log, "--out", tmp_path / "again.jsonl")
    assert text.returncode == 0, text.stderr
    assert "throughput stops scaling after" in text.stdout
    assert "running-cap-with-queue: the server runs at most 8 requests and queues the rest" in text.stdout
    assert f"Raise --max-num-seqs from 8 to {new}" in text.stdout


def test_the_server_log_shows_the_cap_too(kb_live, vllm8, tmp_path):
    """Every level above the cap (16 and 32 against 8): the stats lines vLLM writes during
    the sweep (every second: VLLM_LOG_STATS_INTERVAL=1, see vllm_server.start) show 8
    running with a queue, and the signal cites the log beside /metrics."""
    out = tmp_path / "doctor.jsonl"
    proc = kb_live("doctor", vllm8.url, "-c", "16,32", *SWEEP[2:], "--log", vllm8.log, "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr
    cap = _signals(json.loads(proc.stdout))["running-cap-with-queue"]
    assert cap["data"]["cap"] == 8 and set(cap["data"]["sources"]) == {"metrics", "log"}, cap
    texts = [e["text"] for e in cap["evidence"]]
    where = [(e["where"] or {}).get("path") for e in cap["evidence"]]
    assert any("stats lines" in t and "running requests reach 8 (cap 8)" in t for t in texts), texts
    assert any(t.startswith("running 8, queued ") for t in texts), texts  # a log line, quoted
    assert str(vllm8.log) in where and str(out) in where


def test_restarted_with_the_recommended_cap_the_knee_moves(kb_live, vllm8, doctor8, spares, tmp_path):
    """The server restarted with the recommended --max-num-seqs: no cap signal, no cap
    recommendation, and the knee of the concurrency it serves (vLLM's num_requests_running,
    sampled within each level) moves past the old cap of 8. That knee is set by the server's
    cap, not by the machine's speed. The throughput curves are printed, not asserted: on this
    shared 2-core machine they follow whatever else runs (under a load average of 21 the
    capped server's median curve rose 179 → 2,666 tok/s from 1 to 32, through its cap).
    Speed comparisons belong to benchmarks/."""
    rec = _cap_recommendation(doctor8[0])
    assert rec is not None, doctor8[0]["diagnosis"]["recommendations"]
    new = int(rec["flags"][0]["new"])
    server = spares.get(new)
    out = tmp_path / "doctor.jsonl"
    proc = kb_live("doctor", server.url, *SWEEP, "--log", server.log, "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    sig = _signals(doc)
    assert "running-cap-with-queue" not in sig, sig.get("running-cap-with-queue")
    assert _cap_recommendation(doc) is None
    before, after = _served(doctor8[1]), _served(out)
    print(f"\nserved (max running) and total tok/s per level, --max-num-seqs 8: {before}; {new}: {after}")
    # The most the server ran at once over the sweep: the old cap, then past it. (Per level it
    # can dip: a sample falls where this 2-core machine has the client behind, as at level
    # 32 in one run, 4 running of 32 offered, with 16 of 16 at level 16.)
    assert max(n for n, _ in before.values()) == 8, before
    assert max(n for n, _ in after.values()) > 8, after


def _served(path) -> dict[int, tuple[int, int]]:
    """Per offered concurrency: the most requests the server ran at once (its /metrics
    gauge, sampled during the level) and the level's total throughput (tok/s)."""
    return {r["max_concurrency"]: (max(s["running"] for s in r["kb_metrics"]["samples"]), round(r["total_throughput"]))
            for r in read_jsonl(path)}


def test_server_dies_mid_sweep(tmp_path, spares):
    server = spares.take()  # its own from now on: no other test gets a server this test kills
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
