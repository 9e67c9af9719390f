"""`kb tune` against the real vLLM CPU server: from --max-num-seqs 8 under a load of 32
with a TTFT objective it keeps a larger cap within its budget of server starts and records
the measured gain as a finding; a candidate with an invalid value fails at start-up, is
recorded with the server's own lines, and the search goes on; Ctrl-C mid-trial leaves no
process of the server behind and its port free.

Time: every trial is a server start, the cost that dominates here, so the run is two
starts (the baseline and KB101's cap; the invalid value is refused from kb's catalog of
vLLM's argument parser without a start) and the Ctrl-C test part of one: it interrupts
once the server has bound its port and spawned its engine core, the point from which a
careless stop leaves an orphan. The Ctrl-C test launches with `--enforce-eager` (torch.compile
took 41 s of a 124 s start at load 13 on this 2-core machine); the tune run cannot: on an
idle machine kb's diagnosis then ranks KB110's "remove --enforce-eager" first, which takes the
second start instead of KB101's cap."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from live import vllm_server as vs
from live.util import ctrl_c_reaches_it, marked

# Goodput under a TTFT objective, not raw throughput: on this CPU-bound 2-core server the
# throughput of two fresh servers with the same flags differed by up to 48% under other
# load. A cap of 8 under 32 concurrent streams of 256 tokens serves them in four waves, so
# the later waves wait one to three waves for their first token (TTFT p50 2.4 and 4.1 s in
# two sweeps at load 9), while a cap of 32 serves them all at once (TTFT p50 0.15 s at load
# 12, 0.52 s at load 9 with a benchmark running: 500 ms was too tight). 2 s sits 4x above
# the worst cap-32 figure; where cap 8 meets it too (an idle machine) the gain is still
# cap 32's throughput (2,603 against 788-1,120 tok/s at load 9). One request per stream
# (-n 32) keeps the sweep short.
SWEEP = ["-c", "32", "-n", "32", "--input-len", "16", "--output-len", "256", "--slo", "ttft_p50<=2000ms",
         "--warmup", "8"]


def _launch(model, marker: str, port: int | None = None, eager: bool = False) -> str:
    # KB_TEST_MARK rides in the server's environment, which its engine-core and worker
    # children inherit: the Ctrl-C test finds any survivor by it, whatever its command line.
    env = (f"KB_TEST_MARK={marker} VLLM_CPU_KVCACHE_SPACE=1 VLLM_LOG_STATS_INTERVAL=1 HF_HUB_OFFLINE=1 "
           "TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1")
    cmd = (f"{env} {vs.ENGINES_PY} -m vllm.entrypoints.openai.api_server --model {model} --load-format dummy "
           f"--max-num-seqs 8 --max-model-len 512" + (" --enforce-eager" if eager else ""))
    return cmd + (f" --host 127.0.0.1 --port {port}" if port else "")


def _kb_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "KB_API_KEY"}
    env["KB_HOME"] = str(home)
    return env


@pytest.fixture(scope="module")
def tuned(tiny_model, tmp_path_factory):
    """One kb tune run shared by the assertions below (each trial is a real server start)."""
    tmp = tmp_path_factory.mktemp("tune")
    env = _kb_env(tmp / "home")
    proc = subprocess.run([sys.executable, "-m", "kb", "tune", "--launch", _launch(tiny_model, uuid.uuid4().hex),
                           *SWEEP, "--max-trials", "2", "--candidate", "--max-num-seqs abc",
                           "--out-dir", str(tmp / "runs"), "--json"],
                          capture_output=True, text=True, env=env, cwd=vs.ROOT, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), env, tmp


def test_tune_keeps_a_larger_cap_with_a_measured_gain(tuned):
    doc, _, _ = tuned
    trials = {t["label"]: t for t in doc["trials"]}
    assert sum(t["starts"] for t in doc["trials"]) <= 2  # within the budget of two server starts
    assert trials["baseline"]["status"] == "ok" and len(trials["baseline"]["scores"]) == 2  # the noise sweeps
    best = next(t for t in doc["trials"] if t["n"] == doc["best"])
    seqs = int(best["command"].split("--max-num-seqs ")[1].split()[0])
    assert seqs > 8, best["command"]
    assert doc["gain"] > 1 + doc["noise"], (doc["gain"], doc["noise"])
    # the before/after: kb compare's table and kb report's page
    assert "TTFT p50" in doc["comparison"] and "baseline" in doc["comparison"]
    page = open(doc["report"], encoding="utf-8").read()
    assert page.count("<svg") >= 3 and "best" in page


def test_an_invalid_candidate_is_recorded_as_failed_and_the_search_goes_on(tuned):
    doc, _, _ = tuned
    bad = next(t for t in doc["trials"] if t["label"].startswith("given: --max-num-seqs abc"))
    assert bad["status"] == "failed" and bad["starts"] == 0  # refused before a start: no trial spent
    assert any("abc" in w or "invalid" in w.lower() for w in bad["why"]), bad["why"]
    assert doc["trials"][-1]["n"] > bad["n"] and any(t["status"] == "ok" and t["n"] > bad["n"] for t in doc["trials"])


def test_the_finding_is_attached_and_found_next_time(tuned):
    doc, env, _ = tuned
    f = doc["finding"]
    assert f and f["action"] == "written"
    gains = f["finding"]["gains"]
    assert gains and any((g.get("ratio") or 0) > 1 for g in gains), gains
    show = subprocess.run([sys.executable, "-m", "kb", "show", f["id"]], capture_output=True, text=True, env=env,
                          cwd=vs.ROOT, timeout=120)
    assert show.returncode == 0 and "--max-num-seqs" in show.stdout


def _engine_core_up(marker: str, port: int) -> bool:
    """The server's port is taken and one of its processes is a multiprocessing spawn child
    (vLLM's engine core). Two marked processes alone are not enough: before it binds, the
    API server runs short-lived `uname -p` and `file -b` children (strace; 30-45 ms per start
    at load 9), and a wait that took one of those for the engine core went on to a port
    that was still free, failed, and SIGKILLed kb."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return False
        except OSError:
            pass
    for pid in marked(marker):
        try:
            if b"multiprocessing.spawn" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            pass
    return False


def test_ctrl_c_mid_trial_leaves_no_server(tiny_model, tmp_path):
    port, marker = vs.free_port(), uuid.uuid4().hex
    runs = tmp_path / "runs"
    launch = _launch(tiny_model, marker, port, eager=True)
    proc = subprocess.Popen([sys.executable, "-m", "kb", "tune", "--launch", launch,
                             "-c", "8", "--duration", "60", "--input-len", "32", "--output-len", "64",
                             "--out-dir", str(runs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_kb_env(tmp_path / "home"), cwd=vs.ROOT, preexec_fn=ctrl_c_reaches_it)
    try:
        deadline = time.monotonic() + vs.START_TIMEOUT
        # mid-trial: the baseline's API server has bound its port (vLLM binds before it builds
        # the engine, vllm-project/vllm#8204) and spawned its engine-core child
        while time.monotonic() < deadline and proc.poll() is None and not _engine_core_up(marker, port):
            time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read()
        assert _engine_core_up(marker, port), "the server's engine core never started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # the server's group dies with kb (kb/live/reaper.py)
            proc.kill()
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert "every server kb started is stopped" in err
    assert marked(marker) == []  # no process of the server's tree is left, whatever its command line
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))  # nothing listens on the server's port any more
